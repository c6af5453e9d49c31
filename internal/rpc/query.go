package rpc

import (
	"context"
	"fmt"

	"connectrpc.com/connect"

	compactorv1 "github.com/compactorhq/compactor/gen/compactor/v1"
	"github.com/compactorhq/compactor/gen/compactor/v1/compactorv1connect"
	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/compaction"
	"github.com/compactorhq/compactor/internal/vindex"
	"github.com/compactorhq/compactor/internal/where"
)

var distances = newEnumTable(map[vindex.Distance]compactorv1.Distance{
	vindex.DistanceL2:     compactorv1.Distance_DISTANCE_L2,
	vindex.DistanceCosine: compactorv1.Distance_DISTANCE_COSINE,
	vindex.DistanceIP:     compactorv1.Distance_DISTANCE_IP,
})

// distanceFromProto converts a requested distance; unspecified is the
// default, an unknown number an error naming field.
func distanceFromProto(field string, d compactorv1.Distance) (vindex.Distance, error) {
	if d == compactorv1.Distance_DISTANCE_UNSPECIFIED {
		return vindex.DefaultDistance, nil
	}
	if k, ok := distances.fromProto(d); ok {
		return k, nil
	}
	return 0, invalidArgument(field, "%d is not a distance (want DISTANCE_L2, DISTANCE_COSINE or DISTANCE_IP)", int32(d))
}

func indexToProto(s catalog.IndexSettings) *compactorv1.IndexSettings {
	return &compactorv1.IndexSettings{M: int32(s.M), EfConstruction: int32(s.EfConstruction), EfSearch: int32(s.EfSearch), Disabled: s.Disabled}
}

// collectionSpec converts a CreateCollection request (validated by the
// catalog; its errors name the index field).
func collectionSpec(m *compactorv1.CreateCollectionRequest) (catalog.CollectionSpec, error) {
	d, err := distanceFromProto("distance", m.GetDistance())
	if err != nil {
		return catalog.CollectionSpec{}, err
	}
	spec := catalog.CollectionSpec{Name: m.GetName(), Dimension: int(m.GetDimension()), Index: catalog.IndexSettings{Distance: d}}
	if ix := m.GetIndex(); ix != nil {
		for _, f := range []struct {
			name string
			v    int32
		}{{"index.m", ix.GetM()}, {"index.ef_construction", ix.GetEfConstruction()}, {"index.ef_search", ix.GetEfSearch()}} {
			if f.v < 0 {
				return catalog.CollectionSpec{}, invalidArgument(f.name, "must not be negative, got %d (0: the default)", f.v)
			}
		}
		spec.Index.M, spec.Index.EfConstruction, spec.Index.EfSearch = int(ix.GetM()), int(ix.GetEfConstruction()), int(ix.GetEfSearch())
		spec.Index.Disabled = ix.GetDisabled()
	}
	return spec, nil
}

// includes is what a query result carries.
type includes struct{ documents, metadata, embeddings, distances bool }

func includesFromProto(in []compactorv1.Include) (includes, error) {
	if len(in) == 0 {
		return includes{documents: true, metadata: true, distances: true}, nil
	}
	var out includes
	for i, v := range in {
		switch v {
		case compactorv1.Include_INCLUDE_DOCUMENTS:
			out.documents = true
		case compactorv1.Include_INCLUDE_METADATA:
			out.metadata = true
		case compactorv1.Include_INCLUDE_EMBEDDINGS:
			out.embeddings = true
		case compactorv1.Include_INCLUDE_DISTANCES:
			out.distances = true
		default:
			return includes{}, invalidArgument(fmt.Sprintf("include[%d]", i), "%s is not one of INCLUDE_DOCUMENTS, INCLUDE_METADATA, INCLUDE_EMBEDDINGS, INCLUDE_DISTANCES", v)
		}
	}
	return out, nil
}

// QueryRecords implements CollectionService.QueryRecords.
func (s *Service) QueryRecords(ctx context.Context, req *connect.Request[compactorv1.QueryRecordsRequest]) (*connect.Response[compactorv1.QueryRecordsResponse], error) {
	const proc = compactorv1connect.CollectionServiceQueryRecordsProcedure
	m := req.Msg
	if err := checkID("collection_id", m.GetCollectionId()); err != nil {
		return nil, err
	}
	inc, err := includesFromProto(m.GetInclude())
	if err != nil {
		return nil, err
	}
	q := compaction.Query{K: int(m.GetK()), Ef: int(m.GetEf()), Exact: m.GetExact(), NoEmbeddings: !inc.embeddings}
	if m.Version != nil {
		if m.GetVersion() < 1 {
			return nil, invalidArgument("version", "%d: versions start at 1 (leave it unset to query the current view)", m.GetVersion())
		}
		q.Version = m.GetVersion()
	}
	if w := m.GetWhere(); w != nil {
		if q.Where, err = where.Compile(w.AsMap()); err != nil {
			return nil, s.fail(ctx, proc, err)
		}
	}
	if len(m.GetIds()) > 0 {
		q.IDs = m.GetIds()
	}
	q.Embeddings = make([][]float32, len(m.GetEmbeddings()))
	for i, e := range m.GetEmbeddings() {
		q.Embeddings[i] = e.GetValues()
	}
	res, err := s.recs.QueryRecords(ctx, m.GetCollectionId(), q)
	if err != nil {
		return nil, s.fail(ctx, proc, collectionNotFound(m.GetCollectionId(), err))
	}
	out := &compactorv1.QueryRecordsResponse{SegmentVersion: res.SegmentVersion, LogPosition: res.LogPosition, Exact: res.Exact,
		Results: make([]*compactorv1.QueryResult, len(res.Hits))}
	for i, hits := range res.Hits {
		r := &compactorv1.QueryResult{Hits: make([]*compactorv1.QueryHit, len(hits))}
		for j, h := range hits {
			p, err := recordToProto(h.Record)
			if err != nil {
				return nil, s.fail(ctx, proc, err)
			}
			hit := &compactorv1.QueryHit{Id: h.Record.ID}
			if inc.distances {
				d := h.Distance
				hit.Distance = &d
			}
			if inc.documents {
				hit.Document = p.Document
			}
			if inc.metadata {
				hit.Metadata = p.Metadata
			}
			if inc.embeddings {
				hit.Embedding = p.Embedding
			}
			r.Hits[j] = hit
		}
		out.Results[i] = r
	}
	return connect.NewResponse(out), nil
}

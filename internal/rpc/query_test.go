package rpc_test

import (
	"fmt"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	compactorv1 "github.com/compactorhq/compactor/gen/compactor/v1"
)

// hitsText is "id@distance ..." of a result.
func hitsText(r *compactorv1.QueryResult) string {
	var parts []string
	for _, h := range r.GetHits() {
		if h.Distance != nil {
			parts = append(parts, fmt.Sprintf("%s@%g", h.GetId(), h.GetDistance()))
		} else {
			parts = append(parts, h.GetId())
		}
	}
	return strings.Join(parts, " ")
}

func whereOf(t *testing.T, m map[string]any) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func emb(v ...float32) *compactorv1.QueryEmbedding { return &compactorv1.QueryEmbedding{Values: v} }

// TestQueryRecords runs over every protocol: distance and index settings
// at creation, queries that see the uncompacted tail (an update moving a
// record, a delete, an add), where filters, includes, several embeddings,
// and every class of bad input as INVALID_ARGUMENT naming the field.
func TestQueryRecords(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			c := f.clients(p)
			ctx := t.Context()

			def := createCollection(t, c, "query-default-"+p.name, 2)
			if def.GetDistance() != compactorv1.Distance_DISTANCE_COSINE ||
				!proto.Equal(def.GetIndex(), &compactorv1.IndexSettings{M: 16, EfConstruction: 200, EfSearch: 100}) {
				t.Errorf("a collection created without settings: distance %v index %v, want cosine and the defaults", def.GetDistance(), def.GetIndex())
			}
			res, err := c.colls.CreateCollection(ctx, connect.NewRequest(&compactorv1.CreateCollectionRequest{
				Name: "query-" + p.name, Dimension: 2, Distance: compactorv1.Distance_DISTANCE_L2,
				Index: &compactorv1.IndexSettings{M: 32, EfSearch: 64},
			}))
			if err != nil {
				t.Fatal(err)
			}
			coll := res.Msg.GetCollection()
			wantIndex := &compactorv1.IndexSettings{M: 32, EfConstruction: 200, EfSearch: 64}
			if got := getCollection(t, c, coll.GetId()); got.GetDistance() != compactorv1.Distance_DISTANCE_L2 || !proto.Equal(got.GetIndex(), wantIndex) {
				t.Errorf("GetCollection: distance %v index %v, want l2 and %v", got.GetDistance(), got.GetIndex(), wantIndex)
			}

			// r00000..r00009 at (k, k+0.1), compacted; then in the tail r00005
			// moves far away, r00004 is deleted and r00010 is added at (5, 5.1).
			push(t, c, coll.GetId(), smallRecords(0, 10, 2))
			wantSucceeded(t, waitJob(t, c, compactOne(t, c, coll.GetId()).GetJob().GetId()))
			tailMd := whereOf(t, map[string]any{"n": 10.0, "even": true, "tag": "t1"})
			push(t, c, coll.GetId(), []*compactorv1.OperationRecord{
				{Op: compactorv1.Operation_OPERATION_UPDATE, Id: "r00005", Embedding: []float32{100, 100}},
				{Op: compactorv1.Operation_OPERATION_DELETE, Id: "r00004"},
				{Op: compactorv1.Operation_OPERATION_ADD, Id: "r00010", Embedding: []float32{5, 5.1}, Metadata: tailMd},
			})

			query := func(req *compactorv1.QueryRecordsRequest) (*compactorv1.QueryRecordsResponse, error) {
				req.CollectionId = coll.GetId()
				res, err := c.colls.QueryRecords(ctx, connect.NewRequest(req))
				if err != nil {
					return nil, err
				}
				return res.Msg, nil
			}
			tests := []struct {
				name string
				req  *compactorv1.QueryRecordsRequest
				want []string // per embedding
			}{
				{"the nearest, ties by id, the tail applied", &compactorv1.QueryRecordsRequest{Embeddings: []*compactorv1.QueryEmbedding{emb(5, 5.1)}, K: 3},
					[]string{"r00010@0 r00006@2 r00003@8"}},
				{"a where filter", &compactorv1.QueryRecordsRequest{Embeddings: []*compactorv1.QueryEmbedding{emb(5, 5.1)}, K: 3, Where: whereOf(t, map[string]any{"even": true})},
					[]string{"r00010@0 r00006@2 r00002@18"}},
				{"a where filter with $and and $gt", &compactorv1.QueryRecordsRequest{Embeddings: []*compactorv1.QueryEmbedding{emb(0, 0.1)}, K: 2,
					Where: whereOf(t, map[string]any{"$and": []any{map[string]any{"n": map[string]any{"$gt": 6.0}}, map[string]any{"tag": map[string]any{"$ne": "t1"}}}})},
					[]string{"r00008@128 r00009@162"}},
				{"an id restriction", &compactorv1.QueryRecordsRequest{Embeddings: []*compactorv1.QueryEmbedding{emb(5, 5.1)}, K: 10, Ids: []string{"r00005", "r00004", "r00001", "missing"},
					Include: []compactorv1.Include{compactorv1.Include_INCLUDE_DOCUMENTS}},
					[]string{"r00001 r00005"}},
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					res, err := query(tt.req)
					if err != nil {
						t.Fatal(err)
					}
					if len(res.GetResults()) != len(tt.want) {
						t.Fatalf("%d results, want %d", len(res.GetResults()), len(tt.want))
					}
					for i, w := range tt.want {
						if got := hitsText(res.GetResults()[i]); got != w {
							t.Errorf("result %d = %s, want %s", i, got, w)
						}
					}
					if res.GetLogPosition() != 13 || res.GetSegmentVersion() != coll.GetSegmentVersion()+1 {
						t.Errorf("log position %d version %d, want 13 and 1", res.GetLogPosition(), res.GetSegmentVersion())
					}
					// The compaction built an index: an unfiltered query
					// searches it; over 10 records a filter's matches are
					// cheaper to scan, and ids are read by id.
					if wantExact := tt.req.Where != nil || tt.req.Ids != nil; res.GetExact() != wantExact {
						t.Errorf("exact = %v, want %v", res.GetExact(), wantExact)
					}
				})
			}

			t.Run("several embeddings are answered in order", func(t *testing.T) {
				res, err := query(&compactorv1.QueryRecordsRequest{Embeddings: []*compactorv1.QueryEmbedding{emb(0, 0.1), emb(100, 100)}, K: 1000, Exact: true})
				if err != nil {
					t.Fatal(err)
				}
				first, second := res.GetResults()[0].GetHits(), res.GetResults()[1].GetHits()
				if len(first) != 10 || len(second) != 10 {
					t.Fatalf("%d and %d hits, want the 10 live records each", len(first), len(second))
				}
				if first[0].GetId() != "r00000" || first[9].GetId() != "r00005" || second[0].GetId() != "r00005" || second[1].GetId() != "r00009" {
					t.Errorf("results %s | %s", hitsText(res.GetResults()[0]), hitsText(res.GetResults()[1]))
				}
				for _, hits := range [][]*compactorv1.QueryHit{first, second} {
					for i := 1; i < len(hits); i++ {
						if hits[i].GetDistance() < hits[i-1].GetDistance() {
							t.Errorf("hits out of distance order: %v", hits)
						}
					}
				}
			})

			t.Run("includes choose the fields", func(t *testing.T) {
				res, err := query(&compactorv1.QueryRecordsRequest{Embeddings: []*compactorv1.QueryEmbedding{emb(5, 5.1)}, K: 1})
				if err != nil {
					t.Fatal(err)
				}
				h := res.GetResults()[0].GetHits()[0]
				if h.Distance == nil || h.GetMetadata().GetFields()["n"].GetNumberValue() != 10 || len(h.GetEmbedding()) != 0 {
					t.Errorf("default include: %v, want distance and metadata, no embedding", h)
				}
				res, err = query(&compactorv1.QueryRecordsRequest{Embeddings: []*compactorv1.QueryEmbedding{emb(1, 1.1)}, K: 1,
					Include: []compactorv1.Include{compactorv1.Include_INCLUDE_EMBEDDINGS, compactorv1.Include_INCLUDE_DOCUMENTS}})
				if err != nil {
					t.Fatal(err)
				}
				h = res.GetResults()[0].GetHits()[0]
				if h.Distance != nil || h.GetMetadata() != nil || h.GetDocument() != "document 1" || len(h.GetEmbedding()) != 2 {
					t.Errorf("embeddings and documents: %v", h)
				}
			})

			t.Run("bad input is INVALID_ARGUMENT naming the field", func(t *testing.T) {
				one := []*compactorv1.QueryEmbedding{emb(1, 2)}
				bad := []struct {
					name, field, contains string
					req                   *compactorv1.QueryRecordsRequest
				}{
					{"no embeddings", "embeddings", "at least one", &compactorv1.QueryRecordsRequest{K: 1}},
					{"k 0", "k", "outside 1..1000", &compactorv1.QueryRecordsRequest{Embeddings: one}},
					{"k 1001", "k", "outside 1..1000", &compactorv1.QueryRecordsRequest{Embeddings: one, K: 1001}},
					{"ef too large", "ef", "outside 0..10000", &compactorv1.QueryRecordsRequest{Embeddings: one, K: 1, Ef: 10_001}},
					{"the wrong dimension", "embeddings[0]", "the collection's dimension is 2", &compactorv1.QueryRecordsRequest{Embeddings: []*compactorv1.QueryEmbedding{emb(1, 2, 3)}, K: 1}},
					{"an unknown operator", "where.n.$gtt", `unknown operator "$gtt"`,
						&compactorv1.QueryRecordsRequest{Embeddings: one, K: 1, Where: whereOf(t, map[string]any{"n": map[string]any{"$gtt": 1.0}})}},
					{"$gt with a string", "where.n.$gt", "numbers only",
						&compactorv1.QueryRecordsRequest{Embeddings: one, K: 1, Where: whereOf(t, map[string]any{"n": map[string]any{"$gt": "1"}})}},
					{"an empty $and", "where.$and", "empty list",
						&compactorv1.QueryRecordsRequest{Embeddings: one, K: 1, Where: whereOf(t, map[string]any{"$and": []any{}})}},
					{"an unknown include", "include[1]", "not one of",
						&compactorv1.QueryRecordsRequest{Embeddings: one, K: 1, Include: []compactorv1.Include{compactorv1.Include_INCLUDE_DOCUMENTS, 99}}},
				}
				for _, b := range bad {
					_, err := query(b.req)
					wantCode(t, err, connect.CodeInvalidArgument)
					wantViolation(t, err, b.field, b.contains)
				}
				_, err := c.colls.QueryRecords(ctx, connect.NewRequest(&compactorv1.QueryRecordsRequest{CollectionId: "nope", Embeddings: one, K: 1}))
				wantViolation(t, err, "collection_id", "not a valid id")
				_, err = c.colls.QueryRecords(ctx, connect.NewRequest(&compactorv1.QueryRecordsRequest{CollectionId: unknownID(7), Embeddings: one, K: 1}))
				if ce := wantCode(t, err, connect.CodeNotFound); ce.Message() != "collection "+unknownID(7)+" not found" {
					t.Errorf("query of an unknown collection: %q, want it to say the collection is not found", ce.Message())
				}
			})

			t.Run("bad settings at creation name the field", func(t *testing.T) {
				bad := []struct {
					field string
					req   *compactorv1.CreateCollectionRequest
				}{
					{"distance", &compactorv1.CreateCollectionRequest{Name: "bad-d-" + p.name, Distance: 9}},
					{"index.m", &compactorv1.CreateCollectionRequest{Name: "bad-m-" + p.name, Index: &compactorv1.IndexSettings{M: 1}}},
					{"index.ef_construction", &compactorv1.CreateCollectionRequest{Name: "bad-efc-" + p.name, Index: &compactorv1.IndexSettings{M: 64, EfConstruction: 32}}},
					{"index.ef_search", &compactorv1.CreateCollectionRequest{Name: "bad-efs-" + p.name, Index: &compactorv1.IndexSettings{EfSearch: -3}}},
				}
				for _, b := range bad {
					_, err := c.colls.CreateCollection(ctx, connect.NewRequest(b.req))
					wantCode(t, err, connect.CodeInvalidArgument)
					wantViolation(t, err, b.field)
				}
			})
		})
	}
}

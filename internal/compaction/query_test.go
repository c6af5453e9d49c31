package compaction

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/materialize"
	"github.com/compactorhq/compactor/internal/segment"
	"github.com/compactorhq/compactor/internal/vindex"
	"github.com/compactorhq/compactor/internal/where"
)

// bruteForce is the k nearest of the model's records to q that f accepts
// (and ids, when not nil), by distance then id: the ground truth.
func (m model) bruteForce(d vindex.Distance, q []float32, k int, f *where.Filter, ids []string) []QueryHit {
	var all []QueryHit
	for id, r := range m {
		if ids != nil && !slices.Contains(ids, id) {
			continue
		}
		if !f.Match(r.Metadata) {
			continue
		}
		all = append(all, QueryHit{Record: r, Distance: d.Between(q, r.Embedding)})
	}
	slices.SortFunc(all, func(a, b QueryHit) int {
		return cmp.Or(cmp.Compare(a.Distance, b.Distance), strings.Compare(a.Record.ID, b.Record.ID))
	})
	return all[:min(k, len(all))]
}

func briefHits(hs []QueryHit) string {
	var b strings.Builder
	for _, h := range hs {
		fmt.Fprintf(&b, " %s@%g", h.Record.ID, h.Distance)
	}
	return b.String()
}

var queryFilters = []string{
	``,
	`{"a": {"$gt": 5}}`,
	`{"b": "s3"}`,
	`{"$or": [{"a": {"$lte": 10}}, {"c": true}]}`,
	`{"b": {"$nin": ["s1", "s2", "s3"]}}`,
	`{"$and": [{"a": {"$ne": 2.5}}, {"c": {"$in": [true]}}]}`,
}

// checkQueries compares QueryRecords (exact) with brute force over the
// model, for random query embeddings, every filter, k small and larger
// than the collection, and an id restriction.
func (e *env) checkQueries(r *rand.Rand, when string, dim int, d vindex.Distance) {
	e.t.Helper()
	if dim == 0 {
		return
	}
	modelIDs := make([]string, 0, len(e.model))
	for id := range e.model {
		modelIDs = append(modelIDs, id)
	}
	slices.Sort(modelIDs)
	for _, fs := range queryFilters {
		f, err := where.Parse([]byte(fs))
		if err != nil {
			e.t.Fatal(err)
		}
		qs := make([][]float32, 3)
		for i := range qs {
			qs[i] = make([]float32, dim)
			for j := range qs[i] {
				qs[i][j] = float32(r.IntN(200)-100) / 10
			}
		}
		if len(modelIDs) > 0 {
			// A query equal to a record's embedding: distance 0, ties.
			qs[2] = slices.Clone(e.model[modelIDs[r.IntN(len(modelIDs))]].Embedding)
		}
		var restrict []string
		if r.IntN(3) == 0 {
			restrict = []string{}
			for _, id := range append(slices.Clone(modelIDs), "id-98", "id-99") {
				if r.IntN(2) == 0 {
					restrict = append(restrict, id)
				}
			}
		}
		for _, k := range []int{1, 5, 1000} {
			q := Query{Embeddings: qs, K: k, Where: f, Exact: true, IDs: restrict}
			res, err := e.comp.QueryRecords(e.ctx, e.id, q)
			if err != nil {
				e.t.Fatalf("%s: query k=%d where %s: %v", when, k, fs, err)
			}
			if !res.Exact {
				e.t.Fatalf("%s: an exact query was not exact", when)
			}
			for i, qe := range qs {
				want := e.model.bruteForce(d, qe, k, f, restrict)
				got := res.Hits[i]
				if len(got) == 0 && len(want) == 0 {
					continue
				}
				if !reflect.DeepEqual(got, want) {
					e.t.Fatalf("%s: query %d k=%d where %s ids %v:\n got%s\nwant%s", when, i, k, fs, restrict, briefHits(got), briefHits(want))
				}
			}
		}
	}
}

// After random operation sequences and compactions (blocks split and
// merged, deltas, log tails of every length), an exact query returns
// exactly the brute-force k nearest of the model's view: the same records,
// in the same order, ties by id; with and without where filters.
func TestExactQueryMatchesBruteForce(t *testing.T) {
	for _, d := range []vindex.Distance{vindex.DistanceL2, vindex.DistanceCosine, vindex.DistanceIP} {
		t.Run(d.String(), func(t *testing.T) {
			const seed = 17
			r := rand.New(rand.NewPCG(seed, uint64(d)))
			e := newEnv(t, envConfig{maxRecords: 40, batchRecords: 16, maxBlock: 6, minBlock: 2,
				seg: segment.Config{DeltaMinBlocks: 2, DeltaMaxFraction: 0.5, DeltaFoldRecords: 24}})
			// The env's collection has the default distance: make one of d.
			c, err := e.cat.CreateCollectionSpec(e.ctx, catalog.CollectionSpec{Name: "q-" + d.String(), Index: catalog.IndexSettings{Distance: d}})
			if err != nil {
				t.Fatal(err)
			}
			e.id = c.ID
			const dim = 3
			g := gen{r: r, ids: 40, dim: dim}
			steps := 30
			if raceEnabled {
				steps = 12
			}
			e.checkQueries(r, "empty", dim, d)
			for step := range steps {
				e.push(g.batch(1 + r.IntN(30))...)
				// Records sharing an embedding, so that ties are common
				// at the k-th place.
				if ids := slices.Sorted(maps.Keys(e.model)); len(ids) > 0 {
					emb := e.model[ids[r.IntN(len(ids))]].Embedding
					for range 1 + r.IntN(4) {
						e.push(materialize.OperationRecord{Op: materialize.OpUpsert, ID: fmt.Sprintf("id-%02d", r.IntN(g.ids)), Embedding: slices.Clone(emb)})
					}
				}
				if r.IntN(3) > 0 {
					e.compact()
				}
				e.checkQueries(r, fmt.Sprintf("step %d", step), dim, d)
			}
			e.compactAll()
			e.checkQueries(r, "compacted", dim, d)
		})
	}
}

func TestQueryErrorsNameTheField(t *testing.T) {
	e := newEnv(t, envConfig{maxRecords: 100, batchRecords: 50, maxBlock: 8, minBlock: 2})
	e.push(materialize.OperationRecord{Op: materialize.OpAdd, ID: "a", Embedding: []float32{1, 2}})
	q2 := [][]float32{{1, 2}}
	tests := []struct {
		name  string
		q     Query
		field string
	}{
		{"no embeddings", Query{K: 1}, "embeddings"},
		{"k 0", Query{Embeddings: q2, K: 0}, "k"},
		{"k over the limit", Query{Embeddings: q2, K: MaxQueryK + 1}, "k"},
		{"a negative ef", Query{Embeddings: q2, K: 1, Ef: -1}, "ef"},
		{"the wrong dimension", Query{Embeddings: [][]float32{{1, 2, 3}}, K: 1}, "embeddings[0]"},
		{"embeddings of two dimensions", Query{Embeddings: [][]float32{{1, 2}, {1}}, K: 1}, "embeddings[1]"},
		{"an empty embedding", Query{Embeddings: [][]float32{{}}, K: 1}, "embeddings[0]"},
		{"a NaN in an embedding", Query{Embeddings: [][]float32{{1, 2}, {1, float32(math.NaN())}}, K: 1}, "embeddings[1][1]"},
		{"an empty id", Query{Embeddings: q2, K: 1, IDs: []string{"a", ""}}, "ids[1]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.comp.QueryRecords(e.ctx, e.id, tt.q)
			var qe *QueryError
			if !errors.As(err, &qe) || qe.Field != tt.field || !errors.Is(err, catalog.ErrInvalidArgument) {
				t.Fatalf("QueryRecords = %v, want a QueryError on %s", err, tt.field)
			}
		})
	}
	if _, err := e.comp.QueryRecords(e.ctx, "0b6a3c0e-8f1e-4a55-9f0e-5c1d2f3a4b5c", Query{Embeddings: q2, K: 1}); !errors.Is(err, catalog.ErrNotFound) {
		t.Errorf("an unknown collection: %v, want ErrNotFound", err)
	}
}

// fakeIndex is an exact "index" over a fixed set of records, recording the
// ids its filter was asked about.
type fakeIndex struct {
	recs    map[string]materialize.Record
	d       vindex.Distance
	asked   map[string]bool
	allowed map[string]bool
}

func (f *fakeIndex) Search(q []float32, k, ef int, allow func(string) bool) ([]Hit, error) {
	var hs []Hit
	for id, r := range f.recs {
		f.asked[id] = true
		if allow != nil && !allow(id) {
			continue
		}
		f.allowed[id] = true
		hs = append(hs, Hit{ID: id, Distance: f.d.Between(q, r.Embedding)})
	}
	slices.SortFunc(hs, func(a, b Hit) int { return cmp.Or(cmp.Compare(a.Distance, b.Distance), strings.Compare(a.ID, b.ID)) })
	return hs[:min(k, len(hs))], nil
}

func (f *fakeIndex) Metadata(id string) (map[string]any, bool) {
	r, ok := f.recs[id]
	return r.Metadata, ok
}

type fakeSource struct{ idx *fakeIndex }

func (s fakeSource) Index(ctx context.Context, coll catalog.Collection, m *segment.Manifest) (Searcher, error) {
	return s.idx, nil
}

// With an index, the query asks it for candidates with a filter that
// rejects the ids the tail shadows and the records the where filter
// rejects, and merges its hits with the tail's records: the answer is the
// exact one.
func TestIndexPlanShadowsTheTailAndFilters(t *testing.T) {
	e := newEnv(t, envConfig{maxRecords: 100, batchRecords: 50, maxBlock: 8, minBlock: 2})
	str := func(s string) *string { return &s }
	e.push(
		materialize.OperationRecord{Op: materialize.OpAdd, ID: "a", Embedding: []float32{0, 0}, Metadata: materialize.Metadata{"kind": "x"}},
		materialize.OperationRecord{Op: materialize.OpAdd, ID: "b", Embedding: []float32{1, 0}, Metadata: materialize.Metadata{"kind": "x"}},
		materialize.OperationRecord{Op: materialize.OpAdd, ID: "c", Embedding: []float32{2, 0}, Metadata: materialize.Metadata{"kind": "y"}},
		materialize.OperationRecord{Op: materialize.OpAdd, ID: "d", Embedding: []float32{3, 0}, Metadata: materialize.Metadata{"kind": "x"}},
	)
	e.compactAll()
	// The index of the version: its records as compacted.
	idx := &fakeIndex{recs: map[string]materialize.Record{}, d: vindex.DefaultDistance, asked: map[string]bool{}, allowed: map[string]bool{}}
	for id, r := range e.model {
		idx.recs[id] = r
	}
	e.comp.index = fakeSource{idx}
	// The tail moves a far away, deletes b, and adds e near the query.
	e.push(
		materialize.OperationRecord{Op: materialize.OpUpdate, ID: "a", Embedding: []float32{-9, 5}, Document: str("moved")},
		materialize.OperationRecord{Op: materialize.OpDelete, ID: "b"},
		materialize.OperationRecord{Op: materialize.OpAdd, ID: "e", Embedding: []float32{1, 0.1}, Metadata: materialize.Metadata{"kind": "x"}},
	)
	for _, fs := range []string{``, `{"kind": "x"}`} {
		f, err := where.Parse([]byte(fs))
		if err != nil {
			t.Fatal(err)
		}
		q := Query{Embeddings: [][]float32{{1, 0}, {3, 1}}, K: 3, Where: f}
		res, err := e.comp.QueryRecords(e.ctx, e.id, q)
		if err != nil {
			t.Fatal(err)
		}
		if res.Exact {
			t.Fatalf("where %q: the query scanned although the version has an index", fs)
		}
		for i, qe := range q.Embeddings {
			want := e.model.bruteForce(vindex.DefaultDistance, qe, q.K, f, nil)
			if !reflect.DeepEqual(res.Hits[i], want) {
				t.Errorf("where %q query %d:\n got%s\nwant%s", fs, i, briefHits(res.Hits[i]), briefHits(want))
			}
		}
		if idx.allowed["a"] || idx.allowed["b"] {
			t.Errorf("where %q: the index was allowed ids the tail shadows: %v", fs, idx.allowed)
		}
		if fs != "" && idx.allowed["c"] {
			t.Errorf("where %q: the index was allowed c, which the filter rejects", fs)
		}
		exact, err := e.comp.QueryRecords(e.ctx, e.id, Query{Embeddings: q.Embeddings, K: q.K, Where: f, Exact: true})
		if err != nil {
			t.Fatal(err)
		}
		if !exact.Exact || !reflect.DeepEqual(exact.Hits, res.Hits) {
			t.Errorf("where %q: exact and index answers differ:\n%v\n%v", fs, exact.Hits, res.Hits)
		}
		clear(idx.allowed)
	}
}

// An index that cannot read metadata serves unfiltered queries only; a
// filtered query scans. A collection with indexing disabled always scans.
func TestQueryPlan(t *testing.T) {
	e := newEnv(t, envConfig{maxRecords: 100, batchRecords: 50, maxBlock: 8, minBlock: 2})
	e.push(materialize.OperationRecord{Op: materialize.OpAdd, ID: "a", Embedding: []float32{0, 1}, Metadata: materialize.Metadata{"k": 1.0}})
	e.compactAll()
	idx := &fakeIndex{recs: map[string]materialize.Record{"a": e.model["a"]}, d: vindex.DefaultDistance, asked: map[string]bool{}, allowed: map[string]bool{}}
	e.comp.index = fakeSource{idx}
	f, _ := where.Parse([]byte(`{"k": 1}`))
	plain := Query{Embeddings: [][]float32{{0, 1}}, K: 1}
	filtered := Query{Embeddings: [][]float32{{0, 1}}, K: 1, Where: f}
	byID := Query{Embeddings: [][]float32{{0, 1}}, K: 1, IDs: []string{"a"}}
	noMeta := searcherOnly{idx}
	tests := []struct {
		name      string
		src       IndexSource
		q         Query
		wantExact bool
	}{
		{"an unfiltered query uses the index", fakeSource{idx}, plain, false},
		{"a filtered query uses an index that filters", fakeSource{idx}, filtered, false},
		{"a filtered query scans when the index cannot filter", funcSource(func() Searcher { return noMeta }), filtered, true},
		{"an unfiltered query uses an index that cannot filter", funcSource(func() Searcher { return noMeta }), plain, false},
		{"a query by ids reads the ids", fakeSource{idx}, byID, true},
		{"a version without an index scans", funcSource(func() Searcher { return nil }), plain, true},
		{"a selective filter scans", funcSource(func() Searcher { return selective{idx, 0.001} }), filtered, true},
		{"an unselective filter searches", funcSource(func() Searcher { return selective{idx, 0.5} }), filtered, false},
		{"the index's cost model prefers a scan", funcSource(func() Searcher { return priced{selective{idx, 0.5}, true} }), filtered, true},
		{"the index's cost model prefers the walk", funcSource(func() Searcher { return priced{selective{idx, 0.001}, false} }), filtered, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e.comp.index = tt.src
			res, err := e.comp.QueryRecords(e.ctx, e.id, tt.q)
			if err != nil {
				t.Fatal(err)
			}
			if res.Exact != tt.wantExact {
				t.Errorf("exact = %v, want %v", res.Exact, tt.wantExact)
			}
			if len(res.Hits[0]) != 1 || res.Hits[0][0].Record.ID != "a" {
				t.Errorf("hits = %s, want a", briefHits(res.Hits[0]))
			}
		})
	}
	disabled, err := e.cat.CreateCollectionSpec(e.ctx, catalog.CollectionSpec{Name: "off", Index: catalog.IndexSettings{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	e.id = disabled.ID
	e.model = model{}
	e.push(materialize.OperationRecord{Op: materialize.OpAdd, ID: "a", Embedding: []float32{0, 1}})
	e.compactAll()
	e.comp.index = fakeSource{idx}
	if res, err := e.comp.QueryRecords(e.ctx, e.id, plain); err != nil || !res.Exact {
		t.Errorf("a collection with indexing off: exact %v, %v; want a scan", res.Exact, err)
	}
}

type searcherOnly struct{ s Searcher }

func (s searcherOnly) Search(q []float32, k, ef int, allow func(string) bool) ([]Hit, error) {
	return s.s.Search(q, k, ef, allow)
}

type selective struct {
	*fakeIndex
	f float64
}

func (s selective) Selectivity(*where.Filter) (float64, bool) { return s.f, true }

// priced has a cost model that answers scan.
type priced struct {
	selective
	scan bool
}

func (p priced) Len() int                            { return len(p.recs) }
func (p priced) ScanCheaper(allowed, k, ef int) bool { return p.scan }

type funcSource func() Searcher

func (f funcSource) Index(context.Context, catalog.Collection, *segment.Manifest) (Searcher, error) {
	return f(), nil
}

func TestQueryDurationMetric(t *testing.T) {
	e := newEnv(t, envConfig{maxRecords: 100, batchRecords: 50, maxBlock: 8, minBlock: 2})
	reg := prometheus.NewPedanticRegistry()
	WithRegisterer(reg)(e.comp)
	e.push(materialize.OperationRecord{Op: materialize.OpAdd, ID: "a", Embedding: []float32{0, 1}})
	if _, err := e.comp.QueryRecords(e.ctx, e.id, Query{Embeddings: [][]float32{{0, 1}}, K: 1}); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(e.comp.query.duration, "compactor_query_duration_seconds"); n != 2 {
		t.Errorf("%d series, want 2 (exact and index)", n)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]uint64{}
	for _, mf := range mfs {
		if mf.GetName() != "compactor_query_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			counts[m.GetLabel()[0].GetValue()] = m.GetHistogram().GetSampleCount()
		}
	}
	if counts[planExact] != 1 || counts[planIndex] != 0 {
		t.Errorf("samples by plan = %v, want one exact", counts)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}

// graphIndex is a real HNSW graph of a compacted version with the
// metadata of its records, as an IndexSource would open it.
type graphIndex struct {
	*vindex.Graph
	md map[string]map[string]any
}

func (g graphIndex) Metadata(id string) (map[string]any, bool) {
	md, ok := g.md[id]
	return md, ok
}

// With a real graph over the compacted version and a log tail that
// updates, deletes and adds records, index-planned queries (filtered and
// not) find the brute-force nearest of the model's view: recall@k counts a
// hit as right when its distance is at most the k-th true distance.
func TestIndexPlanWithAGraphReachesTheBruteForceAnswer(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 5))
	e := newEnv(t, envConfig{maxRecords: 1000, batchRecords: 200, maxBlock: 32, minBlock: 8})
	c, err := e.cat.CreateCollectionSpec(e.ctx, catalog.CollectionSpec{Name: "graph", Index: catalog.IndexSettings{Distance: vindex.DistanceL2}})
	if err != nil {
		t.Fatal(err)
	}
	e.id = c.ID
	const dim = 4
	g := gen{r: r, ids: 300, dim: dim}
	e.push(g.batch(600)...)
	e.compactAll()
	graph, err := vindex.New(vindex.Params{Dim: dim, Distance: vindex.DistanceL2, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	idx := graphIndex{Graph: graph, md: map[string]map[string]any{}}
	for _, id := range slices.Sorted(maps.Keys(e.model)) {
		rec := e.model[id]
		if err := graph.Insert(id, rec.Embedding); err != nil {
			t.Fatal(err)
		}
		idx.md[id] = rec.Metadata
	}
	e.comp.index = funcSource(func() Searcher { return idx })
	e.push(g.batch(40)...) // the tail the graph does not know

	right, total := 0, 0
	for _, fs := range queryFilters {
		f, err := where.Parse([]byte(fs))
		if err != nil {
			t.Fatal(err)
		}
		for range 10 {
			qe := make([]float32, dim)
			for j := range qe {
				qe[j] = float32(r.IntN(200)-100) / 10
			}
			const k = 10
			res, err := e.comp.QueryRecords(e.ctx, e.id, Query{Embeddings: [][]float32{qe}, K: k, Where: f, Ef: 200})
			if err != nil {
				t.Fatal(err)
			}
			if res.Exact {
				t.Fatalf("where %q: scanned although the version has a graph", fs)
			}
			want := e.model.bruteForce(vindex.DistanceL2, qe, k, f, nil)
			if len(res.Hits[0]) != len(want) {
				t.Fatalf("where %q: %d hits, want %d", fs, len(res.Hits[0]), len(want))
			}
			for _, h := range res.Hits[0] {
				cur, live := e.model[h.Record.ID]
				if !live || !f.Match(cur.Metadata) || !reflect.DeepEqual(cur, h.Record) {
					t.Fatalf("where %q: hit %s is not the live record the filter accepts: %v (live %v)", fs, h.Record.ID, h.Record, cur)
				}
				total++
				if h.Distance <= want[len(want)-1].Distance {
					right++
				}
			}
		}
	}
	if recall := float64(right) / float64(total); recall < 0.99 {
		t.Errorf("recall@10 = %.3f over %d hits, want at least 0.99", recall, total)
	}
}

func mustWhere(tb testing.TB, s string) *where.Filter {
	tb.Helper()
	f, err := where.Parse([]byte(s))
	if err != nil {
		tb.Fatal(err)
	}
	return f
}

// Queries that run while compactions commit (and purge the tail rows they
// compacted) answer the same as before: each reads one snapshot, the
// segment version pinned with the tail after its offset.
func TestQueriesDuringCompactionsSeeOneView(t *testing.T) {
	r := rand.New(rand.NewPCG(29, 1))
	e := newEnv(t, envConfig{maxRecords: 15, batchRecords: 5, maxBlock: 6, minBlock: 2})
	g := gen{r: r, ids: 60, dim: 3}
	e.push(g.batch(150)...)
	f := mustWhere(t, `{"a": {"$gte": 3}}`)
	qs := [][]float32{{1, 2, 3}, {-4, 0, 2}}
	want := make([][]QueryHit, len(qs))
	for i, q := range qs {
		want[i] = e.model.bruteForce(vindex.DefaultDistance, q, 7, f, nil)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			res, err := e.comp.Compact(e.ctx, e.id, Options{})
			if err != nil {
				t.Errorf("compact: %v", err)
				return
			}
			if res.Remaining == 0 {
				return
			}
		}
	}()
	check := func(when string) {
		res, err := e.comp.QueryRecords(e.ctx, e.id, Query{Embeddings: qs, K: 7, Where: f, Exact: true})
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		for i := range qs {
			if len(want[i]) == 0 && len(res.Hits[i]) == 0 {
				continue
			}
			if !reflect.DeepEqual(res.Hits[i], want[i]) {
				t.Fatalf("%s: query %d at version %d:\n got%s\nwant%s", when, i, res.SegmentVersion, briefHits(res.Hits[i]), briefHits(want[i]))
			}
		}
	}
	for n := 0; ; n++ {
		select {
		case <-done:
			check("after the compactions")
			return
		default:
			check(fmt.Sprintf("query %d", n))
		}
	}
}

// At most MaxConcurrentScans exact scans run at once; one more waits for a
// slot within its context, and runs once a slot frees.
func TestScansWaitForASlot(t *testing.T) {
	e := newEnv(t, envConfig{maxRecords: 100, batchRecords: 50, maxBlock: 8, minBlock: 2})
	e.push(materialize.OperationRecord{Op: materialize.OpAdd, ID: "a", Embedding: []float32{0, 1}})
	q := Query{Embeddings: [][]float32{{0, 1}}, K: 1}
	for range MaxConcurrentScans {
		e.comp.scans <- struct{}{} // scans in flight
	}
	ctx, cancel := context.WithCancel(e.ctx)
	cancel()
	if _, err := e.comp.QueryRecords(ctx, e.id, q); !errors.Is(err, context.Canceled) {
		t.Fatalf("a scan with every slot taken and its context done: %v, want context.Canceled", err)
	}
	// A query by ids does not scan, so it needs no slot.
	if res, err := e.comp.QueryRecords(e.ctx, e.id, Query{Embeddings: q.Embeddings, K: 1, IDs: []string{"a"}}); err != nil || len(res.Hits[0]) != 1 {
		t.Fatalf("a query by ids with every slot taken: %v, %v", res.Hits, err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := e.comp.QueryRecords(e.ctx, e.id, q)
		done <- err
	}()
	<-e.comp.scans // one scan ends
	if err := <-done; err != nil {
		t.Fatalf("the waiting scan: %v", err)
	}
	if n := len(e.comp.scans); n != MaxConcurrentScans-1 {
		t.Errorf("%d slots taken after the scan, want %d", n, MaxConcurrentScans-1)
	}
}

// A query that leaves the embeddings out (NoEmbeddings) finds the same
// ids, at the same distances, in the same order as one that keeps them,
// by either plan and every distance, with the embeddings nil; an index
// hit's distance is, bit for bit, the one the exact scan computes from its
// record; and once the row cache holds the hits' blocks, a repeated
// index query reads no block (its hits' embeddings are never read).
func TestQueryWithoutEmbeddingsFindsTheSameHits(t *testing.T) {
	for _, d := range []vindex.Distance{vindex.DistanceL2, vindex.DistanceIP, vindex.DistanceCosine} {
		t.Run(d.String(), func(t *testing.T) {
			r := rand.New(rand.NewPCG(41, uint64(d)))
			e := newEnv(t, envConfig{maxRecords: 300, batchRecords: 64, maxBlock: 32, minBlock: 8, seg: segment.Config{RowCacheBytes: 1 << 20}})
			c, err := e.cat.CreateCollectionSpec(e.ctx, catalog.CollectionSpec{Name: "light-" + d.String(), Index: catalog.IndexSettings{Distance: d}})
			if err != nil {
				t.Fatal(err)
			}
			e.id = c.ID
			const dim, k = 6, 10
			g := gen{r: r, ids: 200, dim: dim}
			queries := func() [][]float32 {
				qs := make([][]float32, 3)
				for i := range qs {
					qs[i] = make([]float32, dim)
					for j := range qs[i] {
						qs[i][j] = float32(r.IntN(200)-100) / 10
					}
				}
				ids := slices.Sorted(maps.Keys(e.model))
				if len(ids) > 0 {
					qs = append(qs, slices.Clone(e.model[ids[r.IntN(len(ids))]].Embedding)) // distance 0, ties
				}
				return qs
			}
			indexed := 0
			for step := range 5 {
				e.push(g.batch(80)...)
				e.compactAll()
				if step == 2 {
					e.restart() // the graph decoded from its blobs
				}
				e.push(g.batch(8)...) // a tail the index does not know
				for _, fs := range []string{``, `{"a": {"$gt": 0}}`} {
					f := mustWhere(t, fs)
					qs := queries()
					for _, exact := range []bool{false, true} {
						q := Query{Embeddings: qs, K: k, Where: f, Ef: 200, Exact: exact}
						with, err := e.comp.QueryRecords(e.ctx, e.id, q)
						if err != nil {
							t.Fatal(err)
						}
						q.NoEmbeddings = true
						without, err := e.comp.QueryRecords(e.ctx, e.id, q)
						if err != nil {
							t.Fatal(err)
						}
						if with.Exact != without.Exact {
							t.Fatalf("step %d where %q: plans differ (exact %v and %v)", step, fs, with.Exact, without.Exact)
						}
						if !with.Exact {
							indexed++
						}
						for i := range qs {
							want := slices.Clone(with.Hits[i])
							for j := range want {
								if h := want[j]; h.Distance != d.Between(qs[i], e.model[h.Record.ID].Embedding) {
									t.Fatalf("step %d where %q exact %v: %s at distance %v, the scan's is %v", step, fs, exact, h.Record.ID, h.Distance, d.Between(qs[i], e.model[h.Record.ID].Embedding))
								}
								want[j].Record.Embedding = nil
							}
							if got := without.Hits[i]; !reflect.DeepEqual(got, want) {
								t.Fatalf("step %d where %q exact %v query %d: without embeddings\n got%s\nwant%s", step, fs, exact, i, briefHits(got), briefHits(want))
							}
							for _, h := range without.Hits[i] {
								if h.Distance != d.Between(qs[i], e.model[h.Record.ID].Embedding) {
									t.Fatalf("step %d where %q exact %v: %s at distance %v without embeddings, the scan's is %v", step, fs, exact, h.Record.ID, h.Distance, d.Between(qs[i], e.model[h.Record.ID].Embedding))
								}
							}
						}
					}
				}
			}
			if indexed == 0 {
				t.Fatal("no query used the index")
			}
			// No tail: the hits come from the index alone.
			e.compactAll()
			q := Query{Embeddings: queries(), K: k, NoEmbeddings: true}
			if _, err := e.comp.QueryRecords(e.ctx, e.id, q); err != nil {
				t.Fatal(err)
			}
			e.faulty.Reset()
			if _, err := e.comp.QueryRecords(e.ctx, e.id, q); err != nil {
				t.Fatal(err)
			}
			if n := e.faulty.Gets(); n > 1 {
				t.Errorf("a repeated query without embeddings read %d blobs, want the manifest alone", n)
			}
		})
	}
}

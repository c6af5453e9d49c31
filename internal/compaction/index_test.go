package compaction

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"
	"weak"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/materialize"
	"github.com/compactorhq/compactor/internal/segment"
	"github.com/compactorhq/compactor/internal/vindex"
	"github.com/compactorhq/compactor/internal/where"
)

// currentManifest returns the manifest of the collection's current version.
func (e *env) currentManifest() *segment.Manifest {
	e.t.Helper()
	c := e.coll()
	if c.SegmentVersion == 0 {
		return nil
	}
	m, err := e.seg.ReadManifest(e.ctx, c.ManifestKey)
	if err != nil {
		e.t.Fatal(err)
	}
	return m
}

// restart gives the env a new Compactor over the same storage: nothing
// cached in process.
func (e *env) restart() {
	e.t.Helper()
	next, err := New(e.cat, e.seg, e.comp.cfg, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	e.comp = next
}

// checkIndexBlobs asserts that every index blob each kept version lists is
// in the blob store.
func (e *env) checkIndexBlobs(when string) {
	e.t.Helper()
	versions, err := e.cat.ListVersions(e.ctx, e.id)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, v := range versions {
		m, err := e.seg.ReadManifest(e.ctx, v.ManifestKey)
		if err != nil {
			e.t.Fatalf("%s: version %d: %v", when, v.Version, err)
		}
		for _, k := range indexKeys(m) {
			if _, err := e.blobs.Get(e.ctx, k); err != nil {
				e.t.Fatalf("%s: version %d lists index blob %s: %v", when, v.Version, k, err)
			}
		}
	}
}

// recallOf counts the hits of hits whose distance is at most the k-th exact
// distance (ties are right), over the hits wanted.
func recallOf(got, want []QueryHit) (right, total int) {
	if len(want) == 0 {
		return 0, 0
	}
	bound := want[len(want)-1].Distance
	for _, h := range got {
		if h.Distance <= bound {
			right++
		}
	}
	return min(right, len(want)), len(want)
}

// After random operation sequences and compactions (blocks split and
// merged, deltas, incremental successors, repairs and rebuilds, log tails),
// QueryRecords through the index reaches recall@10 ≥ 0.99 at a large ef
// against the brute force of the model (exact mode is checked to be the
// brute force exactly by TestExactQueryMatchesBruteForce, over versions
// that now carry indexes), with and without filters.
func TestIndexedQueryRecall(t *testing.T) {
	const seed, dim, k = 23, 8, 10
	r := rand.New(rand.NewPCG(seed, 1))
	e := newEnv(t, envConfig{maxRecords: 300, batchRecords: 64, maxBlock: 64, minBlock: 16,
		seg: segment.Config{DeltaMinBlocks: 2, DeltaMaxFraction: 0.5, DeltaFoldRecords: 96}})
	g := gen{r: r, ids: 600, dim: dim}
	steps := 24
	if raceEnabled {
		steps = 10
	}
	var right, total, indexed int
	builds := map[string]int{}
	for step := range steps {
		e.push(g.batch(20 + r.IntN(200))...)
		if r.IntN(4) > 0 {
			e.compact()
			if m := e.currentManifest(); m != nil && m.Index != nil {
				builds[m.Index.Build]++
				if m.Index.Vectors != int(m.RecordCount) {
					t.Fatalf("step %d: index of %d vectors, version of %d records", step, m.Index.Vectors, m.RecordCount)
				}
			}
		}
		if step%3 == 2 {
			e.restart() // the next queries and compaction decode the blobs
		}
		for _, fs := range queryFilters {
			f, err := where.Parse([]byte(fs))
			if err != nil {
				t.Fatal(err)
			}
			qs := make([][]float32, 4)
			for i := range qs {
				qs[i] = make([]float32, dim)
				for j := range qs[i] {
					qs[i][j] = float32(r.IntN(200)-100) / 10
				}
			}
			res, err := e.comp.QueryRecords(e.ctx, e.id, Query{Embeddings: qs, K: k, Where: f, Ef: 500})
			if err != nil {
				t.Fatalf("step %d: query where %s: %v", step, fs, err)
			}
			if !res.Exact {
				indexed++
			}
			for i, q := range qs {
				want := e.model.bruteForce(vindex.DefaultDistance, q, k, f, nil)
				for _, h := range res.Hits[i] {
					if mr, ok := e.model[h.Record.ID]; !ok || !f.Match(mr.Metadata) {
						t.Fatalf("step %d: query where %s returned %s, which the view does not hold or the filter rejects", step, fs, h.Record.ID)
					}
				}
				rr, tt := recallOf(res.Hits[i], want)
				right, total = right+rr, total+tt
			}
		}
	}
	if indexed == 0 {
		t.Fatal("no query used the index")
	}
	if builds[buildIncremental]+builds[buildRepaired] == 0 || builds[buildFull] == 0 {
		t.Fatalf("builds %v: want full and incremental ones", builds)
	}
	if recall := float64(right) / float64(total); recall < 0.99 {
		t.Fatalf("recall@10 %.4f over %d wanted hits (%d index plans), want ≥ 0.99", recall, total, indexed)
	}
	t.Logf("recall@10 %d/%d, %d queries by the index, builds %v", right, total, indexed, builds)
}

// A compaction over an indexed version takes a successor: the new index
// lists the previous one's chunks first, by the same keys, and adds one
// for the new vectors; GC keeps the chunks a retained version shares when
// it collects an older version.
func TestIncrementalIndexSharesChunksAndGCKeepsThem(t *testing.T) {
	e := newEnv(t, envConfig{maxRecords: 1000, batchRecords: 200, maxBlock: 64, minBlock: 16, seg: segment.Config{NoDeltas: true}})
	g := gen{r: rand.New(rand.NewPCG(3, 3)), ids: 100_000, dim: 4}
	add := func(n int) {
		ops := g.batch(n)
		for i := range ops {
			ops[i].Op = materialize.OpUpsert
			if ops[i].Embedding == nil {
				ops[i].Embedding = []float32{1, 2, 3, 4}
			}
		}
		e.push(ops...)
		e.compact()
	}
	add(300)
	v1 := e.currentManifest()
	if v1.Index == nil || v1.Index.Build != buildFull || len(v1.Index.Chunks) != 1 {
		t.Fatalf("first index %+v, want a full build of one chunk", v1.Index)
	}
	add(20)
	v2 := e.currentManifest()
	if v2.Index.Build != buildIncremental || len(v2.Index.Chunks) != 2 || v2.Index.Chunks[0] != v1.Index.Chunks[0] {
		t.Fatalf("second index %+v, want an incremental one over the first's chunk", v2.Index)
	}
	add(20)
	v3 := e.currentManifest()
	if !slices.Equal(v3.Index.Chunks[:2], v2.Index.Chunks) {
		t.Fatalf("third index chunks %v, want the second's %v first", v3.Index.Chunks, v2.Index.Chunks)
	}
	e.checkNoGarbage("after three versions") // keeps two: v1 goes
	if _, err := e.blobs.Get(e.ctx, v1.Index.Graph.Key); err == nil {
		t.Fatalf("GC kept the graph blob of a collected version")
	}
	if _, err := e.blobs.Get(e.ctx, v1.Index.Chunks[0].Key); err != nil {
		t.Fatalf("GC deleted a chunk retained versions share: %v", err)
	}
	e.restart()
	q := Query{Embeddings: [][]float32{{1, 0, 0, 0}}, K: 5}
	res, err := e.comp.QueryRecords(e.ctx, e.id, q)
	if err != nil || res.Exact {
		t.Fatalf("query after GC: exact %v, %v; want the index", res.Exact, err)
	}
}

// holds reports whether the graph of key is in the LRU (not only weakly
// held).
func (ic *indexCache) holds(key string) bool {
	ic.mu.Lock()
	defer ic.mu.Unlock()
	_, ok := ic.byKey[key]
	return ok
}

// A commit drops the base version's graph from the index cache: a reader
// that still holds it (a query of the base version) keeps it and finds it
// again without a decode, and once no reader does, nothing keeps it alive
// beside its successor. A graph evicted by the budget behaves the same.
func TestIndexCacheDropsSupersededGraph(t *testing.T) {
	e := newEnv(t, envConfig{maxRecords: 1000, batchRecords: 200, maxBlock: 64, minBlock: 16, seg: segment.Config{NoDeltas: true}})
	g := gen{r: rand.New(rand.NewPCG(5, 5)), ids: 100_000, dim: 4}
	add := func(n int) *segment.Manifest {
		ops := g.batch(n)
		for i := range ops {
			ops[i].Op = materialize.OpUpsert
			if ops[i].Embedding == nil {
				ops[i].Embedding = []float32{1, 2, 3, 4}
			}
		}
		e.push(ops...)
		e.compact()
		return e.currentManifest()
	}
	ic := e.comp.indexes
	v1 := add(300)
	k1 := v1.Index.Graph.Key
	if !ic.has(k1) {
		t.Fatal("the graph of the version just written is not cached")
	}
	reader := ic.get(k1) // a query of version 1, still running
	v2 := add(20)
	if v2.Index.Build != buildIncremental {
		t.Fatalf("second index %+v, want an incremental build", v2.Index)
	}
	if cached, cached2 := ic.holds(k1), ic.holds(v2.Index.Graph.Key); cached || !cached2 {
		t.Fatalf("after the commit: version 1's graph cached %v (want false), version 2's %v (want true)", cached, cached2)
	}
	if again := ic.get(k1); again != reader {
		t.Fatalf("version 1's graph while a reader holds it: got %p, want the reader's %p (no second decode)", again, reader)
	}
	if hits, err := reader.g.Search([]float32{1, 0, 0, 0}, 5, 0, nil); err != nil || len(hits) != 5 {
		t.Fatalf("search of the superseded graph its reader holds: %d hits, %v", len(hits), err)
	}
	live := weak.Make(reader)
	reader = nil
	for i := 0; i < 100 && live.Value() != nil; i++ {
		runtime.GC()
	}
	if live.Value() != nil {
		t.Fatal("the superseded graph stays alive after its last reader let go")
	}
	if ic.get(k1) != nil || ic.has(k1) {
		t.Fatal("the cache still finds the superseded graph after the collector freed it")
	}

	// The budget: a graph put past it evicts the least recent one, which
	// its reader still finds.
	k2 := v2.Index.Graph.Key
	held := ic.get(k2)
	ic.budget = 1
	other, err := vindex.New(vindex.Params{Dim: 4})
	if err != nil {
		t.Fatal(err)
	}
	ic.put("other", other)
	if cached := ic.holds(k2); cached || ic.get(k2) != held || !ic.has(k2) {
		t.Fatalf("with a budget of 1 byte: version 2's graph cached %v (want false), or not found again for its reader", cached)
	}
}

// A crash at any blob write of a compaction (index blobs included) never
// leaves a kept version whose index lists a missing blob, and the next
// compaction writes a good index.
func TestProcessKilledMidIndexWriteLeavesNoDanglingIndex(t *testing.T) {
	n := putsOfCompaction(t)
	for i := 0; i < n; i++ {
		t.Run(fmt.Sprintf("after put %d of %d", i, n), func(t *testing.T) {
			e := scenario(t)
			start := e.faulty.Puts()
			if i == 0 {
				e.crash.kill(true)
			}
			e.faulty.BeforePut = func(k int, _ string) {
				if k == start+i {
					e.crash.kill(true)
				}
			}
			if _, err := e.comp.Compact(e.ctx, e.id, Options{}); err == nil {
				t.Fatal("a compaction whose process died reported success")
			}
			e.faulty.BeforePut = nil
			e.crash.kill(false)
			e.restart()
			e.checkIndexBlobs("after the crash")
			e.compactAll()
			e.checkIndexBlobs("after compacting again")
			if m := e.currentManifest(); m.Index == nil {
				t.Fatal("the version after the crash has no index")
			}
			if _, err := e.comp.QueryRecords(e.ctx, e.id, Query{Embeddings: [][]float32{{1, 1, 1}}, K: 3}); err != nil {
				t.Fatalf("query: %v", err)
			}
		})
	}
}

// A corrupt index blob makes queries answer data loss naming the blob
// (CorruptKind index) while id reads still work; the next compaction
// rebuilds the index from the blocks and queries work again.
func TestCorruptIndexIsDataLossAndTheNextCompactionRebuildsIt(t *testing.T) {
	for _, which := range []string{"graph", "chunk", "missing chunk"} {
		t.Run(which, func(t *testing.T) {
			e := newEnv(t, envConfig{maxRecords: 1000, batchRecords: 100, maxBlock: 16, minBlock: 4})
			g := gen{r: rand.New(rand.NewPCG(5, 5)), ids: 200, dim: 3}
			e.push(g.batch(300)...)
			e.compact()
			m := e.currentManifest()
			key := m.Index.Graph.Key
			switch which {
			case "graph":
				e.overwrite(key, func(b []byte) { b[60] ^= 0xff })
			case "chunk":
				key = m.Index.Chunks[0].Key
				e.overwrite(key, func(b []byte) { b[len(b)-9] ^= 0xff })
			case "missing chunk":
				key = m.Index.Chunks[0].Key
				if err := e.blobs.Delete(e.ctx, key); err != nil {
					t.Fatal(err)
				}
			}
			reg := prometheus.NewPedanticRegistry()
			next, err := New(e.cat, e.seg, e.comp.cfg, nil, WithRegisterer(reg))
			if err != nil {
				t.Fatal(err)
			}
			e.comp = next
			_, err = e.comp.QueryRecords(e.ctx, e.id, Query{Embeddings: [][]float32{{1, 2, 3}}, K: 3})
			if kind, ok := CorruptKind(err); !ok || kind != segment.KindIndex || !strings.Contains(err.Error(), key) {
				t.Fatalf("query over a damaged index: %v (kind %q), want data loss of kind index naming %s", err, kind, key)
			}
			if got := testutil.ToFloat64(e.comp.corrupt.WithLabelValues(segment.KindIndex)); got != 1 {
				t.Fatalf("corrupt index counted %v times, want 1", got)
			}
			if _, err := e.comp.QueryRecords(e.ctx, e.id, Query{Embeddings: [][]float32{{1, 2, 3}}, K: 3, Exact: true}); err != nil {
				t.Fatalf("an exact query needs no index: %v", err)
			}
			e.check("with a damaged index") // id reads and listings still work
			e.push(materialize.OperationRecord{Op: materialize.OpUpsert, ID: "new", Embedding: []float32{1, 2, 3}})
			e.compact()
			m2 := e.currentManifest()
			if m2.Index == nil || m2.Index.Build != buildFull {
				t.Fatalf("index after the damage: %+v, want a full rebuild", m2.Index)
			}
			res, err := e.comp.QueryRecords(e.ctx, e.id, Query{Embeddings: [][]float32{{1, 2, 3}}, K: 1})
			if err != nil || res.Exact || len(res.Hits[0]) != 1 {
				t.Fatalf("query after the rebuild: %+v, %v", res, err)
			}
		})
	}
}

// overwrite rewrites the blob at key with change applied to its bytes.
func (e *env) overwrite(key string, change func([]byte)) {
	e.t.Helper()
	b, err := e.blobs.Get(e.ctx, key)
	if err != nil {
		e.t.Fatal(err)
	}
	b = slices.Clone(b)
	change(b)
	if err := e.blobs.Put(e.ctx, key, b); err != nil {
		e.t.Fatal(err)
	}
}

// A collection with indexing off gets no index and every query scans.
func TestIndexingOffWritesNoIndex(t *testing.T) {
	e := newEnv(t, envConfig{maxRecords: 1000, batchRecords: 100, maxBlock: 16, minBlock: 4})
	c, err := e.cat.CreateCollectionSpec(e.ctx, catalog.CollectionSpec{Name: "off", Index: catalog.IndexSettings{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	e.id = c.ID
	e.push(gen{r: rand.New(rand.NewPCG(1, 1)), ids: 50, dim: 2}.batch(60)...)
	e.compact()
	if m := e.currentManifest(); m.Index != nil {
		t.Fatalf("indexing off, yet the version has an index: %+v", m.Index)
	}
	res, err := e.comp.QueryRecords(e.ctx, e.id, Query{Embeddings: [][]float32{{1, 2}}, K: 3})
	if err != nil || !res.Exact {
		t.Fatalf("query: exact %v, %v; want a scan", res.Exact, err)
	}
}

// The index build's metrics: seconds by build, vectors indexed, the
// tombstone fraction; lint clean.
func TestIndexMetrics(t *testing.T) {
	e := newEnv(t, envConfig{maxRecords: 1000, batchRecords: 100, maxBlock: 16, minBlock: 4, seg: segment.Config{NoDeltas: true}})
	reg := prometheus.NewPedanticRegistry()
	next, err := New(e.cat, e.seg, e.comp.cfg, nil, WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	e.comp = next
	for i := range 40 {
		e.push(materialize.OperationRecord{Op: materialize.OpAdd, ID: fmt.Sprintf("r%03d", i), Embedding: []float32{float32(i), 1}})
	}
	e.compact()
	e.push(materialize.OperationRecord{Op: materialize.OpDelete, ID: "r000"}, materialize.OperationRecord{Op: materialize.OpDelete, ID: "r001"})
	e.compact()
	if got := testutil.ToFloat64(e.comp.indexm.vectors); got != 40 {
		t.Errorf("vectors indexed %v, want 40 (the full build; the deletes insert none)", got)
	}
	if got := testutil.ToFloat64(e.comp.indexm.tombstone); got != 2.0/40 {
		t.Errorf("tombstone fraction %v, want 2/40", got)
	}
	if n := testutil.CollectAndCount(e.comp.indexm.seconds); n != 4 {
		t.Errorf("%d build series, want 4 (full, incremental, repaired and rebuild, pre-created at zero)", n)
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %v", problems, err)
	}
}

// A record a delta inserted and a later compaction deletes while it folds
// the deltas into blocks leaves the incremental index too: the successor
// agrees with the version (no full rebuild is needed to mend it), and a
// query through it never returns the deleted record.
func TestFoldThatDeletesADeltaRecordRemovesItFromTheIndex(t *testing.T) {
	e := newEnv(t, envConfig{maxRecords: 1000, batchRecords: 100, maxBlock: 16, minBlock: 4,
		seg: segment.Config{DeltaMinBlocks: 2, DeltaMaxFraction: 0.5, DeltaFoldRecords: 20}})
	var base []materialize.OperationRecord
	for i := range 160 {
		base = append(base, materialize.OperationRecord{Op: materialize.OpAdd, ID: fmt.Sprintf("k%04d", i*10), Embedding: emb(float32(i))})
	}
	e.push(base...)
	e.compact()
	// New ids in 8 of the 10 blocks: a delta.
	var added, deleted []materialize.OperationRecord
	for i := range 8 {
		id := fmt.Sprintf("k%04d-new", i*200+5)
		added = append(added, materialize.OperationRecord{Op: materialize.OpAdd, ID: id, Embedding: emb(1000 + float32(i))})
		deleted = append(deleted, materialize.OperationRecord{Op: materialize.OpDelete, ID: id})
	}
	e.push(added...)
	e.compact()
	if e.deltaCount() != 1 {
		t.Fatalf("%d deltas after the spread insert, want 1", e.deltaCount())
	}
	// Their deletes with more updates than the deltas may take: a fold.
	for i := range 30 {
		deleted = append(deleted, materialize.OperationRecord{Op: materialize.OpUpsert, ID: fmt.Sprintf("k%04d", i*10), Embedding: emb(float32(i) + 0.5)})
	}
	e.push(deleted...)
	e.compact()
	m := e.currentManifest()
	if len(m.Deltas) != 0 || m.Index == nil {
		t.Fatalf("after the fold: %d deltas, index %v; want none and an index", len(m.Deltas), m.Index)
	}
	if m.Index.Vectors != int(m.RecordCount) || m.Index.Build == buildFull {
		t.Errorf("index of %d vectors built %s, version of %d records; want a successor (incremental or repaired) of as many", m.Index.Vectors, m.Index.Build, m.RecordCount)
	}
	for i := range 8 {
		res, err := e.comp.QueryRecords(e.ctx, e.id, Query{Embeddings: [][]float32{emb(1000 + float32(i))}, K: 3, Ef: 100})
		if err != nil {
			t.Fatal(err)
		}
		if res.Exact {
			t.Fatal("the query did not use the index")
		}
		for _, h := range res.Hits[0] {
			if _, ok := e.model[h.Record.ID]; !ok {
				t.Errorf("query returned %s, which was deleted", h.Record.ID)
			}
		}
	}
	e.check("after the fold")
}

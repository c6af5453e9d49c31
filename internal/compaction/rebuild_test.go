package compaction

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/jobtype"
	"github.com/compactorhq/compactor/internal/materialize"
	"github.com/compactorhq/compactor/internal/segment"
)

// rebuildEnv is a compacted collection of 300 records with distinct
// random vectors of dimension 8 (fixed seed) in blocks of at most 16, and
// a few updates and deletes compacted after them.
//
// The index builds insert on one thread here: a parallel batch insert
// links nodes in an order that depends on scheduling, and under -race such
// a graph of 300 vectors has been seen to leave a vector unreachable (a
// miss at ef above the collection's size); one thread makes the graphs,
// and the exact-result assertions, deterministic.
func rebuildEnv(t *testing.T) *env {
	t.Cleanup(func(n int) func() { return func() { runtime.GOMAXPROCS(n) } }(runtime.GOMAXPROCS(1)))
	e := newEnv(t, envConfig{maxRecords: 1000, batchRecords: 100, maxBlock: 16, minBlock: 4})
	r := rand.New(rand.NewPCG(7, 7))
	vec := func() []float32 {
		v := make([]float32, 8)
		for i := range v {
			v[i] = float32(r.NormFloat64())
		}
		return v
	}
	var ops []materialize.OperationRecord
	for i := range 300 {
		ops = append(ops, materialize.OperationRecord{Op: materialize.OpAdd, ID: fmt.Sprintf("r%03d", i), Embedding: vec()})
	}
	e.push(ops...)
	e.compact()
	e.push(materialize.OperationRecord{Op: materialize.OpDelete, ID: "r007"},
		materialize.OperationRecord{Op: materialize.OpUpsert, ID: "r010", Embedding: vec()},
		materialize.OperationRecord{Op: materialize.OpAdd, ID: "r300", Embedding: vec()})
	e.compact()
	return e
}

// queries are the fixed query vectors of wantExact.
var queries = func() [][]float32 {
	r := rand.New(rand.NewPCG(9, 9))
	out := make([][]float32, 6)
	for i := range out {
		out[i] = make([]float32, 8)
		for j := range out[i] {
			out[i][j] = float32(r.NormFloat64())
		}
	}
	return out
}()

// rebuild runs an index rebuild of e's collection to its commit.
func (e *env) rebuild(p jobtype.IndexRebuildParams, progress func(jobtype.Progress)) (Result, error) {
	e.t.Helper()
	prep, err := e.comp.PrepareRebuild(e.ctx, e.id, RebuildOptions{Params: p, Progress: progress, JobID: "job-1"})
	if err != nil {
		return prep.Result(), err
	}
	err = prep.Commit(e.ctx, nil)
	return prep.Result(), err
}

// idsOf is the ids of hits, nearest first.
func idsOf(hits []QueryHit) string {
	var ids []string
	for _, h := range hits {
		ids = append(ids, h.Record.ID)
	}
	return strings.Join(ids, " ")
}

// distancesOf is the distances of hits, nearest first.
func distancesOf(hits []QueryHit) []float32 {
	var ds []float32
	for _, h := range hits {
		ds = append(ds, h.Distance)
	}
	return ds
}

// wantExact checks that index queries at a large ef return what exact
// scans return, for a few fixed embeddings.
func (e *env) wantExact(when string) {
	e.t.Helper()
	for i, q := range queries {
		exact, err := e.comp.QueryRecords(e.ctx, e.id, Query{Embeddings: [][]float32{q}, K: 10, Exact: true})
		if err != nil {
			e.t.Fatalf("%s: exact query %d: %v", when, i, err)
		}
		got, err := e.comp.QueryRecords(e.ctx, e.id, Query{Embeddings: [][]float32{q}, K: 10, Ef: 1000})
		if err != nil {
			e.t.Fatalf("%s: index query %d: %v", when, i, err)
		}
		if got.Exact {
			e.t.Fatalf("%s: query %d scanned instead of searching the index", when, i)
		}
		// By distance: records at the same distance may come in either
		// order.
		a, b := distancesOf(got.Hits[0]), distancesOf(exact.Hits[0])
		if !slices.EqualFunc(a, b, func(x, y float32) bool { return math.Abs(float64(x-y)) < 1e-5 }) {
			e.t.Fatalf("%s: query %d: index found %s at %v, exact %s at %v", when, i, idsOf(got.Hits[0]), a, idsOf(exact.Hits[0]), b)
		}
	}
}

// TestIndexRebuildWithNewParameters: a rebuild with new M and
// ef_construction commits a version with the same blocks and a new index
// built with them, makes them the collection's, reports its vectors as it
// goes, and queries at a large ef still return the exact results.
func TestIndexRebuildWithNewParameters(t *testing.T) {
	e := rebuildEnv(t)
	before, was := e.currentManifest(), e.coll().Index
	e.wantExact("before the rebuild")
	var reports []jobtype.Progress
	res, err := e.rebuild(jobtype.IndexRebuildParams{M: 12, EfConstruction: 64}, func(p jobtype.Progress) { reports = append(reports, p) })
	if err != nil {
		t.Fatal(err)
	}
	after := e.currentManifest()
	if res.VersionAfter != before.Version+1 || after.Version != res.VersionAfter || res.RecordsWritten != 0 || res.BytesWritten == 0 {
		t.Fatalf("result %+v: want version %d, no record written, index bytes written", res, before.Version+1)
	}
	if !slices.Equal(after.Blocks, before.Blocks) || after.RecordCount != before.RecordCount || after.CompactionOffset != before.CompactionOffset {
		t.Fatalf("the rebuild changed the blocks: %d blocks %d records offset %d, before %d %d %d",
			len(after.Blocks), after.RecordCount, after.CompactionOffset, len(before.Blocks), before.RecordCount, before.CompactionOffset)
	}
	ix := after.Index
	if ix == nil || ix.M != 12 || ix.EfConstruction != 64 || ix.Build != buildRebuild || ix.Job != "job-1" || int64(ix.Vectors) != after.RecordCount || ix.Graph.Key == before.Index.Graph.Key {
		t.Fatalf("new index %+v: want m 12, ef_construction 64, build rebuild by job-1, %d vectors, a new graph", ix, after.RecordCount)
	}
	if s := e.coll().Index; s.M != 12 || s.EfConstruction != 64 || s.EfSearch != was.EfSearch || s.Distance != was.Distance {
		t.Fatalf("collection settings after the rebuild: %+v, want m 12, ef_construction 64, the rest kept", s)
	}
	if len(reports) < 3 || reports[0].Phase != jobtype.PhaseIndexing || reports[0].VectorsTotal != after.RecordCount || !reports[0].Planned {
		t.Fatalf("progress %+v: want the indexing plan with %d vectors first", reports, after.RecordCount)
	}
	last := reports[len(reports)-2]
	if last.Phase != jobtype.PhaseIndexing || last.VectorsIndexed != after.RecordCount || reports[len(reports)-1].Phase != jobtype.PhaseCommitting {
		t.Fatalf("progress %+v: want every vector indexed, then committing", reports)
	}
	e.wantExact("after the rebuild")
	e.check("after the rebuild") // reads are unchanged
	// The next compaction builds on the new index, with the new settings.
	e.push(materialize.OperationRecord{Op: materialize.OpUpsert, ID: "new", Embedding: queries[0]})
	e.compact()
	if m := e.currentManifest(); m.Index == nil || m.Index.M != 12 || m.Index.Build != buildIncremental {
		t.Fatalf("the compaction after the rebuild wrote index %+v, want an incremental one with m 12", m.Index)
	}
	e.wantExact("after the next compaction")
	e.checkNoGarbage("after the rebuild and a compaction")

	// Out of bounds, indexing off: refused before anything is written.
	_, err = e.comp.PrepareRebuild(e.ctx, e.id, RebuildOptions{Params: jobtype.IndexRebuildParams{M: 500}})
	var bad *catalog.IndexSettingsError
	if !errors.As(err, &bad) || bad.Field != "m" || !errors.Is(err, catalog.ErrInvalidArgument) {
		t.Fatalf("rebuild with m 500: %v, want an index settings error on m", err)
	}
}

// TestCancelledIndexRebuildKeepsTheOldIndex: a rebuild cancelled while it
// indexes returns the context's error, commits nothing, removes the blobs
// it wrote (none of the current version's), and the previous index stays
// current and answers queries; the settings are unchanged.
func TestCancelledIndexRebuildKeepsTheOldIndex(t *testing.T) {
	e := rebuildEnv(t)
	before, was := e.currentManifest(), e.coll().Index
	blobs := func() []string {
		list, err := e.blobs.List(e.ctx, "collections/"+e.id+"/")
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, b := range list {
			keys = append(keys, b.Key)
		}
		slices.Sort(keys)
		return keys
	}
	kept := blobs()
	// While it reads the blocks (the first report comes before any vector
	// is read), and once the new index and manifest are written.
	for _, at := range []jobtype.Phase{jobtype.PhaseIndexing, jobtype.PhaseCommitting} {
		ctx, cancel := context.WithCancel(e.ctx)
		prep, err := e.comp.PrepareRebuild(ctx, e.id, RebuildOptions{Params: jobtype.IndexRebuildParams{M: 8}, Progress: func(p jobtype.Progress) {
			if p.Phase == at {
				cancel()
			}
		}})
		cancel()
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("rebuild cancelled while %s: %v, want context.Canceled", at, err)
		}
		if prep.Pending() || prep.Result().VersionAfter != before.Version {
			t.Fatalf("rebuild cancelled while %s: pending %v, result %+v; want nothing to commit", at, prep.Pending(), prep.Result())
		}
		if got := blobs(); !slices.Equal(got, kept) {
			t.Fatalf("blobs after a cancel while %s:\n%v\nwant the ones before:\n%v", at, got, kept)
		}
	}
	if m := e.currentManifest(); m.Version != before.Version || m.Index.Graph.Key != before.Index.Graph.Key {
		t.Fatalf("current version %d with graph %s after the cancel, want version %d with %s", m.Version, m.Index.Graph.Key, before.Version, before.Index.Graph.Key)
	}
	if s := e.coll().Index; s != was {
		t.Fatalf("settings after the cancel %+v, want %+v", s, was)
	}
	e.wantExact("after the cancel")
}

// TestCorruptIndexIsRepairedByARebuild: a damaged index makes queries
// answer data loss; an index rebuild reads the blocks, not the index, and
// after its commit the queries are answered again.
func TestCorruptIndexIsRepairedByARebuild(t *testing.T) {
	e := rebuildEnv(t)
	m := e.currentManifest()
	e.overwrite(m.Index.Graph.Key, func(b []byte) { b[60] ^= 0xff })
	next, err := New(e.cat, e.seg, e.comp.cfg, nil) // nothing decoded in memory
	if err != nil {
		t.Fatal(err)
	}
	e.comp = next
	q := Query{Embeddings: queries[:1], K: 3}
	if _, err := e.comp.QueryRecords(e.ctx, e.id, q); !isDataLoss(err, m.Index.Graph.Key) {
		t.Fatalf("query over the damaged index: %v, want data loss naming %s", err, m.Index.Graph.Key)
	}
	if _, err := e.rebuild(jobtype.IndexRebuildParams{}, nil); err != nil {
		t.Fatalf("rebuild of a damaged index: %v", err)
	}
	if ix := e.currentManifest().Index; ix == nil || ix.Build != buildRebuild || ix.M != m.Index.M {
		t.Fatalf("index after the rebuild: %+v, want a rebuild with the collection's m %d", ix, m.Index.M)
	}
	res, err := e.comp.QueryRecords(e.ctx, e.id, q)
	if err != nil || res.Exact || len(res.Hits[0]) != 3 {
		t.Fatalf("query after the rebuild: %+v, %v; want 3 hits from the index", res, err)
	}
	e.wantExact("after the repair")
}

// isDataLoss reports whether err is damaged index data naming key.
func isDataLoss(err error, key string) bool {
	kind, ok := CorruptKind(err)
	return ok && kind == segment.KindIndex && strings.Contains(err.Error(), key)
}

// TestIndexRebuildWithNothingToIndexOrIndexingOff: a collection without a
// version has nothing to rebuild (nothing committed, a note); one created
// with indexing off is refused.
func TestIndexRebuildWithNothingToIndexOrIndexingOff(t *testing.T) {
	e := newEnv(t, envConfig{maxRecords: 1000, batchRecords: 100, maxBlock: 16, minBlock: 4})
	prep, err := e.comp.PrepareRebuild(e.ctx, e.id, RebuildOptions{})
	if err != nil || prep.Pending() || prep.Result().Note != NoteNothingToIndex {
		t.Fatalf("rebuild of an empty collection: pending %v, note %q, %v; want nothing to commit and the note", prep.Pending(), prep.Result().Note, err)
	}
	if err := prep.Commit(e.ctx, nil); err != nil {
		t.Fatal(err)
	}
	off := newEnv(t, envConfig{maxRecords: 1000, batchRecords: 100, maxBlock: 16, minBlock: 4, noIndex: true})
	off.push(materialize.OperationRecord{Op: materialize.OpAdd, ID: "a", Embedding: []float32{1}})
	off.compact()
	if _, err := off.comp.PrepareRebuild(off.ctx, off.id, RebuildOptions{}); !errors.Is(err, ErrIndexDisabled) || !strings.Contains(err.Error(), off.id) {
		t.Fatalf("rebuild with indexing off: %v, want ErrIndexDisabled naming the collection", err)
	}
}

// TestIndexCacheBoundIsAFlag: --index-cache-bytes sets the bound of the
// decoded index cache (a negative one is refused naming the flag), and an
// index over it is dropped once another one is used.
func TestIndexCacheBoundIsAFlag(t *testing.T) {
	cfg := DefaultConfig()
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	cfg.RegisterFlags(fs)
	if err := fs.Parse([]string{"--index-cache-bytes", "1KiB"}); err != nil {
		t.Fatal(err)
	}
	if cfg.IndexCacheBytes != 1024 {
		t.Fatalf("--index-cache-bytes 1KiB: %d bytes", cfg.IndexCacheBytes)
	}
	e := rebuildEnv(t)
	c, err := New(e.cat, e.seg, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.comp = c
	first := e.currentManifest().Index.Graph.Key
	e.wantExact("with a small cache") // decodes the index: over the bound, kept as the last used
	if c.indexes.get(first) == nil {
		t.Fatal("the index used last was not kept")
	}
	if _, err := e.rebuild(jobtype.IndexRebuildParams{}, nil); err != nil {
		t.Fatal(err)
	}
	if c.indexes.holds(first) || !c.indexes.holds(e.currentManifest().Index.Graph.Key) {
		t.Fatal("over the bound, the older index stayed in the cache")
	}
	cfg.IndexCacheBytes = -1
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "--index-cache-bytes") {
		t.Fatalf("a negative bound: %v, want an error naming --index-cache-bytes", err)
	}
}

// TestEstimateShowsTheIndexWork: the plan's estimate counts the vectors the
// next compaction inserts and tombstones, and says when it builds the
// index from every record (no index yet, new parameters); with indexing
// off it shows none.
func TestEstimateShowsTheIndexWork(t *testing.T) {
	e := rebuildEnv(t)
	e.push(materialize.OperationRecord{Op: materialize.OpUpsert, ID: "r001", Embedding: queries[1]},
		materialize.OperationRecord{Op: materialize.OpAdd, ID: "r400", Embedding: queries[2]},
		materialize.OperationRecord{Op: materialize.OpDelete, ID: "r002"})
	est, err := e.comp.Estimate(e.ctx, e.id)
	if err != nil {
		t.Fatal(err)
	}
	if !est.Indexed || est.VectorsToInsert != 2 || est.VectorsToDelete != 1 || est.IndexFullBuild {
		t.Fatalf("estimate %+v: want 2 vectors to insert, 1 to delete, incremental", est)
	}
	// New parameters (as a rebuild with the collection's settings changed
	// would leave them) make the next compaction build in full.
	coll := e.coll()
	if err := e.cat.CommitCompaction(e.ctx, catalog.Commit{CollectionID: e.id, BaseVersion: coll.SegmentVersion, NewVersion: coll.SegmentVersion + 1,
		ManifestKey: coll.ManifestKey, CompactionOffset: coll.CompactionOffset, RecordCount: coll.RecordCount,
		Index: &catalog.IndexSettings{Distance: coll.Index.Distance, M: 20, EfConstruction: 200, EfSearch: 100}}); err != nil {
		t.Fatal(err)
	}
	if est, err := e.comp.Estimate(e.ctx, e.id); err != nil || !est.IndexFullBuild || !strings.Contains(est.IndexFullBuildReason, "parameters differ") {
		t.Fatalf("estimate after a parameter change: %+v, %v; want a full build because the parameters differ", est, err)
	}
	off := newEnv(t, envConfig{maxRecords: 1000, batchRecords: 100, maxBlock: 16, minBlock: 4, noIndex: true})
	off.push(materialize.OperationRecord{Op: materialize.OpAdd, ID: "a", Embedding: []float32{1}})
	if est, err := off.comp.Estimate(off.ctx, off.id); err != nil || est.Indexed || est.VectorsToInsert != 0 || est.IndexFullBuild {
		t.Fatalf("estimate with indexing off: %+v, %v; want no index work", est, err)
	}
}

// TestIndexRebuildManifestTakesTheStoreClock: the manifest an index
// rebuild writes, and its index's build time, are the store's clock, as a
// compaction's are, so that a fake clock (or a replica's own) is the one
// time source of every version.
func TestIndexRebuildManifestTakesTheStoreClock(t *testing.T) {
	e := newEnv(t, envConfig{maxRecords: 1000, batchRecords: 10, maxBlock: 8, minBlock: 2})
	g := gen{r: rand.New(rand.NewPCG(3, 3)), ids: 20, dim: 3}
	e.push(g.batch(30)...)
	e.compact()
	at := e.clock.Advance(time.Hour)
	res, err := e.rebuild(jobtype.IndexRebuildParams{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := e.currentManifest()
	if m.Version != res.VersionAfter || res.VersionAfter != res.VersionBefore+1 {
		t.Fatalf("setup: the rebuild committed version %d (result %+v)", m.Version, res)
	}
	if !m.CreatedAt.Equal(at) || m.Index == nil || !m.Index.BuiltAt.Equal(at) {
		t.Fatalf("rebuilt version %d created at %v, index built at %v; want the store's clock %v", m.Version, m.CreatedAt, m.Index.BuiltAt, at)
	}
}

// TestIndexRebuildVersionRowHasTheDigest: the version an index rebuild
// commits has the same records as its base, and its catalog row records
// their digest, as a compaction's row does (the version history shows it,
// and verify jobs compare with it).
func TestIndexRebuildVersionRowHasTheDigest(t *testing.T) {
	e := newEnv(t, envConfig{maxRecords: 1000, batchRecords: 10, maxBlock: 8, minBlock: 2})
	g := gen{r: rand.New(rand.NewPCG(4, 4)), ids: 20, dim: 3}
	e.push(g.batch(30)...)
	base := e.compact().VersionAfter
	res, err := e.rebuild(jobtype.IndexRebuildParams{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	was, err := e.cat.GetVersion(e.ctx, e.id, base)
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.cat.GetVersion(e.ctx, e.id, res.VersionAfter)
	if err != nil {
		t.Fatal(err)
	}
	if m := e.currentManifest(); was.Digest == "" || got.Digest != was.Digest || got.Digest != m.Digest || got.OffsetStart != was.CompactionOffset {
		t.Fatalf("rebuilt version %d: row digest %q, offsets (%d, %d]; base %d's digest %q, manifest's %q", got.Version, got.Digest, got.OffsetStart, got.CompactionOffset, base, was.Digest, m.Digest)
	}
}

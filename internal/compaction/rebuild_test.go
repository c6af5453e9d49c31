package compaction

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/jobtype"
	"github.com/compactorhq/compactor/internal/materialize"
	"github.com/compactorhq/compactor/internal/segment"
)

// rebuildEnv is a compacted collection of 300 records of dimension 3
// (fixed seed) in blocks of at most 16.
func rebuildEnv(t *testing.T) *env {
	e := newEnv(t, envConfig{maxRecords: 1000, batchRecords: 100, maxBlock: 16, minBlock: 4})
	g := gen{r: rand.New(rand.NewPCG(7, 7)), ids: 200, dim: 3}
	e.push(g.batch(300)...)
	e.compact()
	return e
}

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

// wantExact checks that index queries at a large ef return what exact
// scans return, for a few fixed embeddings.
func (e *env) wantExact(when string) {
	e.t.Helper()
	for i, q := range [][]float32{{1, 2, 3}, {-5, 0.5, 9}, {0, -7, -2}, {8, 8, -8}} {
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
		if a, b := idsOf(got.Hits[0]), idsOf(exact.Hits[0]); a != b {
			e.t.Fatalf("%s: query %d: index found %s, exact %s", when, i, a, b)
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
	res, err := e.rebuild(jobtype.IndexRebuildParams{M: 6, EfConstruction: 40}, func(p jobtype.Progress) { reports = append(reports, p) })
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
	if ix == nil || ix.M != 6 || ix.EfConstruction != 40 || ix.Build != buildRebuild || ix.Job != "job-1" || int64(ix.Vectors) != after.RecordCount || ix.Graph.Key == before.Index.Graph.Key {
		t.Fatalf("new index %+v: want m 6, ef_construction 40, build rebuild by job-1, %d vectors, a new graph", ix, after.RecordCount)
	}
	if s := e.coll().Index; s.M != 6 || s.EfConstruction != 40 || s.EfSearch != was.EfSearch || s.Distance != was.Distance {
		t.Fatalf("collection settings after the rebuild: %+v, want m 6, ef_construction 40, the rest kept", s)
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
	e.push(materialize.OperationRecord{Op: materialize.OpUpsert, ID: "new", Embedding: []float32{1, 2, 3}})
	e.compact()
	if m := e.currentManifest(); m.Index == nil || m.Index.M != 6 || m.Index.Build != buildIncremental {
		t.Fatalf("the compaction after the rebuild wrote index %+v, want an incremental one with m 6", m.Index)
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
	q := Query{Embeddings: [][]float32{{1, 2, 3}}, K: 3}
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

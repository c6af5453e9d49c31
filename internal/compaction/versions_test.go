package compaction

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/materialize"
	"github.com/compactorhq/compactor/internal/segment"
)

// clone returns a copy of m (records are not shared with later changes:
// the model replaces records, it never changes one in place).
func (m model) clone() model { return maps.Clone(m) }

// checkVersion compares the reads of kept version v alone (paged, by ids,
// and an exact query with a large k) with want.
func (e *env) checkVersion(when string, v int64, want model) {
	e.t.Helper()
	var got []materialize.Record
	after := ""
	for range 100_000 {
		res, err := e.comp.ListRecordsAt(e.ctx, e.id, v, after, 5)
		if err != nil {
			e.t.Fatalf("%s: list records of version %d after %q: %v", when, v, after, err)
		}
		if res.SegmentVersion != v {
			e.t.Fatalf("%s: a page of version %d says version %d", when, v, res.SegmentVersion)
		}
		got = append(got, res.Records...)
		if res.Next == "" {
			break
		}
		after = res.Next
	}
	e.compare(fmt.Sprintf("%s: paged listing of version %d", when, v), got, want.sorted())
	ids := append(slices.Sorted(maps.Keys(want)), "absent-1", "id-99")
	res, err := e.comp.GetRecordsAt(e.ctx, e.id, v, ids)
	if err != nil {
		e.t.Fatalf("%s: get records of version %d: %v", when, v, err)
	}
	e.compare(fmt.Sprintf("%s: version %d by ids", when, v), res.Records, want.sorted())
	if len(want) == 0 {
		return
	}
	for _, exact := range []bool{true, false} {
		q, err := e.comp.QueryRecords(e.ctx, e.id, Query{Embeddings: [][]float32{{0, 0, 0}}, K: MaxQueryK, Ef: MaxQueryEf, Exact: exact, Version: v})
		if err != nil {
			e.t.Fatalf("%s: query of version %d (exact %t): %v", when, v, exact, err)
		}
		var found []string
		for _, h := range q.Hits[0] {
			found = append(found, h.Record.ID)
		}
		slices.Sort(found)
		var withEmbedding []string
		for id, r := range want {
			if len(r.Embedding) > 0 {
				withEmbedding = append(withEmbedding, id)
			}
		}
		slices.Sort(withEmbedding)
		if !slices.Equal(found, withEmbedding) || q.SegmentVersion != v {
			e.t.Fatalf("%s: query of version %d (exact %t) found %v at version %d, want %v", when, v, exact, found, q.SegmentVersion, withEmbedding)
		}
	}
}

// badCompaction commits, as a compaction would (and purges the log after
// it), a version that compacts the whole backlog but materializes it
// wrongly: it ignores the log slice and instead drops or rewrites some of
// the base's records. It returns the version.
func (e *env) badCompaction(r *rand.Rand) int64 {
	e.t.Helper()
	coll := e.coll()
	base, err := e.seg.ReadManifest(e.ctx, coll.ManifestKey)
	if err != nil {
		e.t.Fatal(err)
	}
	current, err := e.comp.GetRecordsAt(e.ctx, e.id, coll.SegmentVersion, slices.Sorted(maps.Keys(e.model)))
	if err != nil {
		e.t.Fatal(err)
	}
	var changes []segment.Change
	for i, rec := range current.Records {
		switch {
		case i == 0 || r.IntN(3) == 0:
			changes = append(changes, segment.Change{ID: rec.ID}) // dropped
		case r.IntN(2) == 0:
			bad := rec
			bad.Document = doc("garbled by a bad compaction")
			changes = append(changes, segment.Change{ID: rec.ID, Record: &bad})
		}
	}
	w := e.seg.NewWriter(e.id, base)
	seq := func(yield func(segment.Change, error) bool) {
		for _, ch := range changes {
			if !yield(ch, nil) {
				return
			}
		}
	}
	m, _, err := w.Write(e.ctx, seq, segment.WriteOptions{CompactionOffset: coll.LogPosition, Dimension: coll.Dimension})
	if err != nil {
		e.t.Fatal(err)
	}
	key, _, err := w.WriteManifest(e.ctx, m)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := e.cat.CommitCompaction(e.ctx, catalog.Commit{CollectionID: e.id, BaseVersion: coll.SegmentVersion, NewVersion: m.Version,
		ManifestKey: key, CompactionOffset: coll.LogPosition, RecordCount: m.RecordCount, BlockCount: len(m.Blocks)}); err != nil {
		e.t.Fatal(err)
	}
	e.comp.purgeLog(e.ctx, e.id)
	e.comp.WaitPurges()
	return m.Version
}

// TestRollbackKeepsLaterWrites is the rollback's property test: compact,
// push, a bad compaction, push more, roll back to the first version. After
// the rollback the view equals the model of every push (the bad version's
// damage is gone and no write is lost, although the log was purged after
// both compactions), version 1 reads as it was, and the next compaction is
// exact; GC then collects the bad version without touching the blocks the
// restored one shares.
func TestRollbackKeepsLaterWrites(t *testing.T) {
	for seed := uint64(1); seed <= 4; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
			e := newEnv(t, envConfig{maxRecords: 1000, batchRecords: 1 + r.IntN(5), maxBlock: 4 + r.IntN(6), minBlock: 2})
			g := gen{r: r, ids: 24, dim: 3}
			e.push(g.batch(10 + r.IntN(20))...)
			first := e.compact().VersionAfter
			atFirst := e.model.clone()
			e.push(g.batch(5 + r.IntN(20))...)
			bad := e.badCompaction(r)
			e.push(g.batch(5 + r.IntN(20))...)
			if _, err := e.comp.GC(e.ctx, e.id); err != nil {
				t.Fatal(err)
			}
			e.comp.WaitPurges()
			// The bad version is current: the view is not the model.
			res, err := e.comp.GetRecords(e.ctx, e.id, slices.Sorted(maps.Keys(e.model)))
			if err != nil {
				t.Fatal(err)
			}
			if slices.EqualFunc(res.Records, e.model.sorted(), func(a, b materialize.Record) bool { return a.ID == b.ID && ptrEq(a.Document, b.Document) }) {
				t.Fatal("setup: the bad compaction did not change the view")
			}
			before := e.coll()

			rb, err := e.comp.Rollback(e.ctx, e.id, RollbackRequest{ToVersion: first, Reason: "compaction 2 dropped records", By: "alice"})
			if err != nil {
				t.Fatalf("rollback: %v", err)
			}
			after := e.coll()
			if after.SegmentVersion != bad+1 || rb.Version.Version != bad+1 || rb.Version.RollbackOf != first || rb.Replaced != bad {
				t.Fatalf("rollback made version %d (row %+v, replaced %d); want %d restoring %d, replacing %d", after.SegmentVersion, rb.Version, rb.Replaced, bad+1, first, bad)
			}
			v1, err := e.cat.GetVersion(e.ctx, e.id, first)
			if err != nil {
				t.Fatal(err)
			}
			if after.CompactionOffset != v1.CompactionOffset || after.RecordCount != v1.RecordCount || after.Backlog() != before.LogPosition-v1.CompactionOffset {
				t.Fatalf("after the rollback: offset %d, records %d, backlog %d; want version %d's offset %d and records %d, backlog %d",
					after.CompactionOffset, after.RecordCount, after.Backlog(), first, v1.CompactionOffset, v1.RecordCount, before.LogPosition-v1.CompactionOffset)
			}
			if rb.Version.Reason != "compaction 2 dropped records" || rb.Version.CreatedBy != "alice" || rb.Reread != before.CompactionOffset-v1.CompactionOffset ||
				rb.JobID == "" || rb.Version.JobID != rb.JobID {
				t.Fatalf("rollback row %+v, reread %d", rb.Version, rb.Reread)
			}
			e.check("after the rollback")
			e.checkVersion("after the rollback", first, atFirst)
			e.checkVersion("after the rollback", after.SegmentVersion, atFirst)

			res2 := e.compact()
			if res2.OffsetStart != v1.CompactionOffset || res2.OffsetEnd != before.LogPosition {
				t.Fatalf("the compaction after the rollback read (%d, %d]; want (%d, %d]", res2.OffsetStart, res2.OffsetEnd, v1.CompactionOffset, before.LogPosition)
			}
			e.check("after the next compaction")
			if got := e.coll().RecordCount; got != int64(len(e.model)) {
				t.Fatalf("record count %d after the next compaction, model has %d", got, len(e.model))
			}
			e.checkVersion("after the next compaction", res2.VersionAfter, e.model)
			e.checkNoGarbage("end")
			e.check("after gc")
			_, err = e.comp.GetRecordsAt(e.ctx, e.id, first, []string{"id-01"})
			var nf *catalog.VersionNotFoundError
			if !errors.As(err, &nf) || nf.Oldest != bad+1 {
				t.Fatalf("read of collected version %d: %v; want a VersionNotFoundError naming version %d", first, err, bad+1)
			}
		})
	}
}

func ptrEq(a, b *string) bool { return a == nil && b == nil || a != nil && b != nil && *a == *b }

// TestReadsOfAKeptVersion: a read or query of a kept version returns that
// version alone, without the log tail; once GC retires it, NOT_FOUND names
// the oldest kept version.
func TestReadsOfAKeptVersion(t *testing.T) {
	e := newEnv(t, envConfig{maxRecords: 1000, batchRecords: 4, maxBlock: 4, minBlock: 2})
	g := gen{r: rand.New(rand.NewPCG(7, 7)), ids: 24, dim: 3}
	e.push(g.batch(30)...)
	v1 := e.compact().VersionAfter
	at1 := e.model.clone()
	e.push(g.batch(20)...)
	v2 := e.compact().VersionAfter
	at2 := e.model.clone()
	e.push(g.batch(20)...) // the tail, seen by the current view only
	e.checkVersion("two kept", v1, at1)
	e.checkVersion("two kept", v2, at2)
	e.check("two kept")
	e.push(g.batch(5)...)
	e.compact()
	if _, err := e.comp.GC(e.ctx, e.id); err != nil {
		t.Fatal(err)
	}
	for _, read := range []func() error{
		func() error { _, err := e.comp.GetRecordsAt(e.ctx, e.id, v1, []string{"id-01"}); return err },
		func() error { _, err := e.comp.ListRecordsAt(e.ctx, e.id, v1, "", 10); return err },
		func() error {
			_, err := e.comp.QueryRecords(e.ctx, e.id, Query{Embeddings: [][]float32{{1, 1, 1}}, K: 3, Version: v1})
			return err
		},
	} {
		err := read()
		if !errors.Is(err, catalog.ErrNotFound) || !strings.Contains(err.Error(), "no longer keeps version 1: the oldest kept version is 2") {
			t.Fatalf("read of retired version 1: %v", err)
		}
	}
	if _, err := e.comp.GetRecordsAt(e.ctx, e.id, 0, nil); !errors.Is(err, catalog.ErrInvalidArgument) {
		t.Fatalf("read of version 0: %v", err)
	}
	if _, err := e.comp.GetRecordsAt(e.ctx, e.id, 9, nil); !errors.Is(err, catalog.ErrNotFound) || !strings.Contains(err.Error(), "the newest is 3") {
		t.Fatalf("read of version 9: %v", err)
	}
}

// TestRollbackFencesACompactionInFlight: a compaction prepared on the
// version that a rollback replaces loses its commit (compare-and-swap) and
// removes what it wrote; the rollback stands.
func TestRollbackFencesACompactionInFlight(t *testing.T) {
	e := newEnv(t, envConfig{maxRecords: 1000, batchRecords: 4, maxBlock: 4, minBlock: 2})
	g := gen{r: rand.New(rand.NewPCG(3, 3)), ids: 24, dim: 3}
	e.push(g.batch(20)...)
	e.compact()
	e.push(g.batch(20)...)
	e.compact()
	e.push(g.batch(10)...)
	p, err := e.comp.Prepare(e.ctx, e.id, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.comp.Rollback(e.ctx, e.id, RollbackRequest{ToVersion: 1}); err != nil {
		t.Fatal(err)
	}
	if err := p.Commit(e.ctx, nil); !errors.Is(err, catalog.ErrConflict) {
		t.Fatalf("commit of the compaction prepared before the rollback: %v; want a conflict", err)
	}
	if got := e.coll(); got.SegmentVersion != 3 {
		t.Fatalf("version %d after the lost commit, want the rollback's 3", got.SegmentVersion)
	}
	e.check("after the lost commit")
	e.compactAll()
	e.check("after compacting again")
	e.checkNoGarbage("end")
}

func TestRollbackRefuses(t *testing.T) {
	e := newEnv(t, envConfig{maxRecords: 1000, batchRecords: 4, maxBlock: 4, minBlock: 2})
	g := gen{r: rand.New(rand.NewPCG(5, 5)), ids: 24, dim: 3}
	e.push(g.batch(20)...)
	e.compact()
	e.push(g.batch(20)...)
	e.compact()
	blobs := func() int {
		bs, err := e.blobs.List(e.ctx, "collections/"+e.id+"/manifests/")
		if err != nil {
			t.Fatal(err)
		}
		return len(bs)
	}
	manifests := blobs()
	tests := []struct {
		name string
		req  RollbackRequest
		want error
		says string
	}{
		{"the current version", RollbackRequest{ToVersion: 2}, catalog.ErrInvalidArgument, "already the current version"},
		{"version 0", RollbackRequest{ToVersion: 0}, catalog.ErrInvalidArgument, "versions start at 1"},
		{"a version never committed", RollbackRequest{ToVersion: 5}, catalog.ErrNotFound, "has no version 5"},
		{"a reason too long", RollbackRequest{ToVersion: 1, Reason: strings.Repeat("x", MaxRollbackReasonBytes+1)}, catalog.ErrInvalidArgument, "reason of 1025 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.comp.Rollback(e.ctx, e.id, tt.req)
			if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.says) {
				t.Fatalf("rollback %+v: %v; want %v saying %q", tt.req, err, tt.want, tt.says)
			}
		})
	}
	// A running job: refused in the catalog, after the manifest copy was
	// written; the copy is removed.
	job := catalog.Job{ID: "0b6a3c0e-8f1e-4a55-9f0e-5c1d2f3a4b5c", CollectionID: e.id, Trigger: catalog.TriggerScheduled, State: catalog.JobRunning,
		Attempt: 1, CreatedAt: e.clock.Now(), StartedAt: e.clock.Now()}
	if err := e.cat.InsertJob(e.ctx, job); err != nil {
		t.Fatal(err)
	}
	_, err := e.comp.Rollback(e.ctx, e.id, RollbackRequest{ToVersion: 1})
	if !errors.Is(err, catalog.ErrFailedPrecondition) || !strings.Contains(err.Error(), job.ID) {
		t.Fatalf("rollback while a job runs: %v", err)
	}
	if got := blobs(); got != manifests {
		t.Fatalf("%d manifests after refused rollbacks, want %d: the copy was left behind", got, manifests)
	}
	e.check("after refused rollbacks")
}

// TestRollbackManifestTakesTheStoreClock: the manifest copy a rollback
// writes records the store's clock, as a compaction's manifest does.
func TestRollbackManifestTakesTheStoreClock(t *testing.T) {
	e := newEnv(t, envConfig{maxRecords: 1000, batchRecords: 10, maxBlock: 8, minBlock: 2})
	g := gen{r: rand.New(rand.NewPCG(5, 5)), ids: 20, dim: 3}
	e.push(g.batch(20)...)
	first := e.compact().VersionAfter
	e.push(g.batch(10)...)
	e.compact()
	at := e.clock.Advance(time.Hour)
	rb, err := e.comp.Rollback(e.ctx, e.id, RollbackRequest{ToVersion: first})
	if err != nil {
		t.Fatal(err)
	}
	if m := e.currentManifest(); m.Version != rb.Version.Version || !m.CreatedAt.Equal(at) {
		t.Fatalf("rollback's manifest of version %d created at %v; want version %d at the store's clock %v", m.Version, m.CreatedAt, rb.Version.Version, at)
	}
}

// TestRollbackVersionCoversTheRestoredOffsets: the version a rollback
// makes lists the log offsets of the version it restores, whose segment it
// is, so its range is never inverted (the offset moved back).
func TestRollbackVersionCoversTheRestoredOffsets(t *testing.T) {
	e := newEnv(t, envConfig{maxRecords: 1000, batchRecords: 10, maxBlock: 8, minBlock: 2})
	g := gen{r: rand.New(rand.NewPCG(6, 6)), ids: 20, dim: 3}
	e.push(g.batch(20)...)
	e.compact()
	e.push(g.batch(10)...)
	second := e.compact().VersionAfter
	e.push(g.batch(10)...)
	e.compact()
	rb, err := e.comp.Rollback(e.ctx, e.id, RollbackRequest{ToVersion: second})
	if err != nil {
		t.Fatal(err)
	}
	to, err := e.cat.GetVersion(e.ctx, e.id, second)
	if err != nil {
		t.Fatal(err)
	}
	vs, err := e.comp.ListVersions(e.ctx, e.id)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []catalog.Version{rb.Version, vs[0].Version} {
		if v.Version != rb.Version.Version || v.OffsetStart != to.OffsetStart || v.CompactionOffset != to.CompactionOffset || v.OffsetStart > v.CompactionOffset {
			t.Fatalf("rollback's version %d covers (%d, %d]; want version %d's (%d, %d]", v.Version, v.OffsetStart, v.CompactionOffset, second, to.OffsetStart, to.CompactionOffset)
		}
	}
}

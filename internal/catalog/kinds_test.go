package catalog_test

import (
	"slices"
	"testing"

	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/jobtype"
)

// TestJobKindsQueueApartAndRunOneAtATime: a queued compaction and a queued
// index rebuild of one collection are two jobs (deduplication is per
// collection and kind), but only one job of a collection runs at a time,
// whatever its kind; ListJobs filters by kind; a job without a kind is a
// compaction; an interrupted job's follow-up keeps its kind.
func TestJobKindsQueueApartAndRunOneAtATime(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		c := e.open(t)
		col := mustCreate(t, c, "kinds", 0)
		comp, created := mustEnqueue(t, c, catalog.JobRequest{CollectionID: col.ID, Trigger: catalog.TriggerOneOff})
		if !created || comp.Kind != jobtype.KindCompaction {
			t.Fatalf("compaction: created %v, kind %q; want a new compaction", created, comp.Kind)
		}
		rebuild, created := mustEnqueue(t, c, catalog.JobRequest{CollectionID: col.ID, Kind: jobtype.KindIndexRebuild, Trigger: catalog.TriggerOneOff})
		if !created || rebuild.ID == comp.ID || rebuild.Kind != jobtype.KindIndexRebuild {
			t.Fatalf("index rebuild: created %v, job %s of kind %q; want a second job", created, rebuild.ID, rebuild.Kind)
		}
		again, created := mustEnqueue(t, c, catalog.JobRequest{CollectionID: col.ID, Kind: jobtype.KindIndexRebuild, Trigger: catalog.TriggerOneOff})
		if created || again.ID != rebuild.ID {
			t.Fatalf("second index rebuild: created %v, job %s; want the queued %s", created, again.ID, rebuild.ID)
		}
		if stored, err := c.GetJob(ctx, rebuild.ID); err != nil || stored.Kind != jobtype.KindIndexRebuild {
			t.Fatalf("stored rebuild: kind %q, %v", stored.Kind, err)
		}
		// The database refuses a second queued job of a kind however it is
		// inserted.
		dup := rebuild
		dup.ID = "another"
		wantErr(t, "InsertJob of a second queued index rebuild", c.InsertJob(ctx, dup), catalog.ErrAlreadyExists)
		_, _, err := c.EnqueueJob(ctx, catalog.JobRequest{CollectionID: col.ID, Kind: "Index Rebuild", Trigger: catalog.TriggerOneOff})
		wantErr(t, "EnqueueJob of a malformed kind", err, catalog.ErrInvalidArgument)

		first := mustClaim(t, c, "n1/a")
		if first.ID != comp.ID {
			t.Fatalf("claimed %s (%s), want the compaction %s, queued first", first.ID, first.Kind, comp.ID)
		}
		if j, err := c.ClaimJob(ctx, "n2/b", lease); err == nil {
			t.Fatalf("claimed %s (%s) while a job of its collection runs", j.ID, j.Kind)
		} else {
			wantErr(t, "ClaimJob beside a running job", err, catalog.ErrNoJob)
		}

		kinds := func(f catalog.JobFilter) []string {
			t.Helper()
			jobs, err := c.ListJobs(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, j := range jobs {
				ids = append(ids, string(j.Kind))
			}
			slices.Sort(ids)
			return ids
		}
		equal(t, "jobs of kind index_rebuild", kinds(catalog.JobFilter{Kinds: []catalog.JobKind{jobtype.KindIndexRebuild}}), []string{"index_rebuild"})
		equal(t, "jobs of both kinds", kinds(catalog.JobFilter{Kinds: []catalog.JobKind{jobtype.KindIndexRebuild, jobtype.KindCompaction}}), []string{"compaction", "index_rebuild"})
		equal(t, "jobs of kind verify", kinds(catalog.JobFilter{Kinds: []catalog.JobKind{jobtype.KindVerify}}), []string(nil))

		// The compaction's process dies: its follow-up is a compaction,
		// queued beside the rebuild.
		if _, err := c.ReleaseNode(ctx, "n1"); err != nil {
			t.Fatal(err)
		}
		queue, err := c.ListQueue(ctx, 0)
		if err != nil || len(queue) != 2 {
			t.Fatalf("queue %+v, %v; want the rebuild and the compaction's follow-up", queue, err)
		}
		for _, j := range queue {
			if j.ID != rebuild.ID && (j.Continues != comp.ID || j.Kind != jobtype.KindCompaction) {
				t.Fatalf("queued %s of kind %q continuing %q; want a compaction continuing %s", j.ID, j.Kind, j.Continues, comp.ID)
			}
		}
		// The rebuild runs now, and its own follow-up is a rebuild.
		claimed := mustClaim(t, c, "n1/c")
		if _, err := c.ReleaseNode(ctx, "n1"); err != nil {
			t.Fatal(err)
		}
		queue, err = c.ListQueue(ctx, 0)
		if err != nil || len(queue) != 2 {
			t.Fatalf("queue %+v, %v; want two follow-ups", queue, err)
		}
		var found bool
		for _, j := range queue {
			found = found || j.Continues == claimed.ID && j.Kind == claimed.Kind
		}
		if !found {
			t.Fatalf("queue %+v: no follow-up of %s (%s) of the same kind", queue, claimed.ID, claimed.Kind)
		}
	})
}

// TestIndexRebuildRowsAndCommit: a job's params and its vector counts
// (persisted with its lease) are stored; a commit with Index sets the
// collection's M and ef_construction in its transaction and keeps the rest
// (distance, ef_search), and one with settings out of bounds is refused.
func TestIndexRebuildRowsAndCommit(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		c := e.open(t)
		col := mustCreate(t, c, "rebuilt", 2)
		params := jobtype.IndexRebuildParams{M: 24}.Encode()
		queued, _ := mustEnqueue(t, c, catalog.JobRequest{CollectionID: col.ID, Kind: jobtype.KindIndexRebuild, Params: params, Trigger: catalog.TriggerOneOff})
		if queued.Params != `{"m":24}` {
			t.Fatalf("params %q", queued.Params)
		}
		j := mustClaim(t, c, "n1/a")
		if j.Params != params || j.Kind != jobtype.KindIndexRebuild {
			t.Fatalf("claimed %q with params %q", j.Kind, j.Params)
		}
		p := catalog.JobProgress{Phase: jobtype.PhaseIndexing, VectorsIndexed: 40, VectorsTotal: 100}
		if _, err := c.RenewLease(ctx, j.ID, "n1/a", lease, p); err != nil {
			t.Fatal(err)
		}
		if got, err := c.GetJob(ctx, j.ID); err != nil || got.Progress.VectorsIndexed != 40 || got.Progress.VectorsTotal != 100 || got.Params != params {
			t.Fatalf("stored job: progress %+v params %q, %v", got.Progress, got.Params, err)
		}
		was := mustGet(t, c, col.ID).Index
		ix := was.WithDefaults()
		ix.M, ix.EfConstruction = 24, 300
		bad := ix
		bad.M = 1000
		wantErr(t, "a commit with M out of bounds", c.CommitCompaction(ctx, catalog.Commit{CollectionID: col.ID, BaseVersion: 0, NewVersion: 1, ManifestKey: "v1", Index: &bad}), catalog.ErrInvalidArgument)
		if err := c.CommitCompaction(ctx, catalog.Commit{CollectionID: col.ID, BaseVersion: 0, NewVersion: 1, ManifestKey: "v1", Index: &ix}); err != nil {
			t.Fatal(err)
		}
		got := mustGet(t, c, col.ID)
		if got.SegmentVersion != 1 || got.Index.M != 24 || got.Index.EfConstruction != 300 || got.Index.EfSearch != was.WithDefaults().EfSearch || got.Index.Distance != was.WithDefaults().Distance {
			t.Fatalf("collection after the commit: version %d, index %+v (was %+v)", got.SegmentVersion, got.Index, was)
		}
	})
}

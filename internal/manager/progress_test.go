package manager

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/jobtype"
)

// at is a fixed clock: clock0 plus d.
var clock0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return clock0.Add(d) }

func TestTrackerFractionCoversTheWholeJobAndReachesOneOnlyAtTheEnd(t *testing.T) {
	var tr tracker
	tr.observe(Progress{Phase: jobtype.PhaseStarting}, at(0))
	steps := []struct {
		p    Progress
		when time.Duration
		want float64
	}{
		{Progress{Phase: jobtype.PhaseReading, OpRecordsTotal: 100}, 0, 0},
		{Progress{Phase: jobtype.PhaseReading, OpRecordsRead: 50, OpRecordsTotal: 100}, time.Second, 0.075},
		{Progress{Phase: jobtype.PhaseReading, OpRecordsRead: 100, OpRecordsTotal: 100}, 2 * time.Second, 0.15},
		{Progress{Phase: jobtype.PhaseMaterializing, OpRecordsRead: 100, OpRecordsTotal: 100}, 2 * time.Second, 0.15},
		{Progress{Phase: jobtype.PhaseWriting, OpRecordsRead: 100, OpRecordsTotal: 100, BlocksTotal: 4}, 4 * time.Second, 0.30},
		{Progress{Phase: jobtype.PhaseWriting, OpRecordsRead: 100, OpRecordsTotal: 100, BlocksWritten: 2, BlocksTotal: 4}, 7 * time.Second, 0.55},
		{Progress{Phase: jobtype.PhaseWriting, OpRecordsRead: 100, OpRecordsTotal: 100, BlocksWritten: 4, BlocksTotal: 4}, 10 * time.Second, 0.80},
		{Progress{Phase: jobtype.PhaseIndexing, OpRecordsRead: 100, OpRecordsTotal: 100, BlocksWritten: 4, BlocksTotal: 4}, 10 * time.Second, 0.80},
		{Progress{Phase: jobtype.PhaseCommitting, OpRecordsRead: 100, OpRecordsTotal: 100, BlocksWritten: 4, BlocksTotal: 4}, 10 * time.Second, 0.95},
	}
	prev := 0.0
	for _, s := range steps {
		tr.observe(s.p, at(s.when))
		f, _, _ := tr.estimate(at(s.when))
		if d := f - s.want; d > 1e-9 || d < -1e-9 {
			t.Fatalf("%s at %s: fraction %v, want %v", s.p.Phase, s.when, f, s.want)
		}
		if f < prev || f >= 1 {
			t.Fatalf("%s at %s: fraction %v after %v: want growing and below 1 while running", s.p.Phase, s.when, f, prev)
		}
		prev = f
	}
}

func TestTrackerETAIsUnknownUntilAPhaseIsTimedThenFromThisJobsRates(t *testing.T) {
	var tr tracker
	tr.observe(Progress{Phase: jobtype.PhaseStarting}, at(0))
	if _, _, known := tr.estimate(at(0)); known {
		t.Fatal("starting: ETA known, want unknown")
	}
	tr.observe(Progress{Phase: jobtype.PhaseReading, OpRecordsTotal: 1000}, at(0))
	tr.observe(Progress{Phase: jobtype.PhaseReading, OpRecordsRead: 10, OpRecordsTotal: 1000}, at(100*time.Millisecond))
	if _, _, known := tr.estimate(at(100 * time.Millisecond)); known {
		t.Fatal("1% read: ETA known, want unknown")
	}
	// 30% of the log in 3 s: reading takes 10 s, which is 15% of the job
	// by weight, so the job takes 66.7 s; 63.7 s are left.
	tr.observe(Progress{Phase: jobtype.PhaseReading, OpRecordsRead: 300, OpRecordsTotal: 1000}, at(3*time.Second))
	_, eta, known := tr.estimate(at(3 * time.Second))
	if !known || eta < 63*time.Second || eta > 64*time.Second {
		t.Fatalf("30%% read in 3 s: ETA %s (known %v), want about 63.7 s", eta, known)
	}
	// Read at the end of the log: the rest of the job remains; never 0.
	tr.observe(Progress{Phase: jobtype.PhaseReading, OpRecordsRead: 1000, OpRecordsTotal: 1000}, at(10*time.Second))
	if _, eta, known := tr.estimate(at(10 * time.Second)); !known || eta <= 0 {
		t.Fatalf("log read: ETA %s (known %v), want the later phases' time", eta, known)
	}
	// Materializing has no counter: its expected share, from the reading
	// rate (10 s per 0.15), counts down; once overrun the ETA is unknown.
	tr.observe(Progress{Phase: jobtype.PhaseMaterializing, OpRecordsRead: 1000, OpRecordsTotal: 1000}, at(10*time.Second))
	_, eta, known = tr.estimate(at(12 * time.Second))
	if want := 66666*time.Millisecond - 12*time.Second; !known || eta < want-time.Second || eta > want+time.Second {
		t.Fatalf("materializing for 2 s: ETA %s (known %v), want about %s", eta, known, want)
	}
	if _, eta, known := tr.estimate(at(30 * time.Second)); known {
		t.Fatalf("materializing overran its expected 10 s: ETA %s, want unknown", eta)
	}
	// Writing, timed by its own counter: half the blocks in 10 s.
	tr.observe(Progress{Phase: jobtype.PhaseWriting, BlocksTotal: 10}, at(30*time.Second))
	tr.observe(Progress{Phase: jobtype.PhaseWriting, BlocksWritten: 5, BlocksTotal: 10}, at(40*time.Second))
	_, eta, known = tr.estimate(at(40 * time.Second))
	// 10 s left writing, plus indexing and committing: (10 + 20 + 20) s
	// for 0.8 of the weight gives 0.2 × 62.5 s = 12.5 s.
	if !known || eta < 22*time.Second || eta > 23*time.Second {
		t.Fatalf("half the blocks in 10 s: ETA %s (known %v), want about 22.5 s", eta, known)
	}
}

func TestPersistedProgressCountsDownAndBecomesUnknown(t *testing.T) {
	jp := catalog.JobProgress{Phase: jobtype.PhaseWriting, Fraction: 0.5, ETA: 10 * time.Second, ETAKnown: true, UpdatedAt: at(0), BlocksWritten: 1, BlocksTotal: 2}
	if p := persistedProgress(jp, at(4*time.Second)); !p.ETAKnown || p.ETA != 6*time.Second || p.Fraction != 0.5 || p.BlocksTotal != 2 {
		t.Fatalf("4 s after: %+v, want ETA 6 s", p)
	}
	if p := persistedProgress(jp, at(11*time.Second)); p.ETAKnown {
		t.Fatalf("past its ETA: %+v, want unknown", p)
	}
	jp.ETAKnown = false
	if p := persistedProgress(jp, at(0)); p.ETAKnown {
		t.Fatalf("persisted unknown: %+v, want unknown", p)
	}
}

// phasedExec reports a job's phases as the real executor does, a report
// per step, each step taking a second of (fake) time, then waits on gate.
type phasedExec struct {
	*fakeExec
	steps []Progress
	gate  chan struct{}
}

func (p phasedExec) Prepare(ctx context.Context, _ catalog.Job, progress func(Progress)) (Prepared, error) {
	for _, s := range p.steps {
		progress(s)
		time.Sleep(time.Second)
	}
	select {
	case <-p.gate:
	case <-ctx.Done():
	}
	return nil, ctx.Err()
}

// TestRunningJobShowsItsPhaseFractionAndETA: Get and the lease's persisted
// progress carry the manager's fraction and ETA, and an ETA that cannot be
// estimated yet is unknown, not 0. Time is synctest's fake clock.
func TestRunningJobShowsItsPhaseFractionAndETA(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newMemStore()
		store.addCollection("a", 100, time.Now())
		gate := make(chan struct{})
		exec := phasedExec{fakeExec: newFakeExec(store, 1000), gate: gate, steps: []Progress{
			{Phase: jobtype.PhaseReading, OpRecordsTotal: 100},
			{Phase: jobtype.PhaseReading, OpRecordsRead: 50, OpRecordsTotal: 100},
			{Phase: jobtype.PhaseReading, OpRecordsRead: 100, OpRecordsTotal: 100},
			{Phase: jobtype.PhaseMaterializing, OpRecordsRead: 100, OpRecordsTotal: 100},
		}}
		cfg := testConfig()
		m := runManager(t, store, exec, cfg)
		e, err := m.Compact(t.Context(), []string{"a"}, false, "test")
		if err != nil {
			t.Fatal(err)
		}
		id := e[0].Job.ID

		// Just after the first report: reading has no rate yet.
		synctest.Wait()
		j, err := m.Get(t.Context(), id)
		if err != nil || j.Progress == nil {
			t.Fatalf("Get: %v, progress %v", err, j.Progress)
		}
		if j.Progress.Phase != jobtype.PhaseReading || j.Progress.ETAKnown || j.Progress.Fraction != 0 {
			t.Fatalf("first report: %+v, want reading, fraction 0, ETA unknown", *j.Progress)
		}
		// Reading took 3 s (its last report came at 2 s, the next phase at
		// 3 s): 15% of the job by weight, so the job takes 20 s, and just
		// after materializing began 17 s are left.
		time.Sleep(3*time.Second + time.Millisecond)
		synctest.Wait()
		j, _ = m.Get(t.Context(), id)
		p := *j.Progress
		if p.Phase != jobtype.PhaseMaterializing || p.Fraction < 0.15-1e-9 || p.Fraction > 0.15+1e-9 {
			t.Fatalf("materializing: %+v, want fraction 0.15", p)
		}
		if !p.ETAKnown || p.ETA < 16*time.Second || p.ETA > 17*time.Second {
			t.Fatalf("materializing after 3 s of reading: ETA %s (known %v), want about 17 s", p.ETA, p.ETAKnown)
		}
		// The lease keeper persists them for other replicas.
		time.Sleep(cfg.RenewInterval)
		synctest.Wait()
		row, err := store.GetJob(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if row.Progress.Phase != jobtype.PhaseMaterializing || row.Progress.Fraction < 0.15-1e-9 || !row.Progress.ETAKnown || row.Progress.ETA <= 0 {
			t.Fatalf("persisted progress %+v, want materializing, fraction 0.15 and a known ETA", row.Progress)
		}
		close(gate)
	})
}

// TestTrackerWithoutIndexingSpreadsTheIndexingWeight: a compaction of a
// collection with indexing off has no indexing phase; its share is spread
// over the others, so writing the last block is most of the job (0.80 of
// 0.85), not 0.80 followed by a jump where the index would have been built.
func TestTrackerWithoutIndexingSpreadsTheIndexingWeight(t *testing.T) {
	var tr tracker
	tr.observe(Progress{Phase: jobtype.PhaseStarting}, at(0))
	steps := []struct {
		p    Progress
		want float64
	}{
		{Progress{Phase: jobtype.PhaseReading, OpRecordsTotal: 100, NoIndexing: true}, 0},
		{Progress{Phase: jobtype.PhaseReading, OpRecordsRead: 100, OpRecordsTotal: 100, NoIndexing: true}, 0.15 / 0.85},
		{Progress{Phase: jobtype.PhaseWriting, BlocksWritten: 4, BlocksTotal: 4, NoIndexing: true}, 0.80 / 0.85},
		{Progress{Phase: jobtype.PhaseCommitting, NoIndexing: true}, 0.80 / 0.85},
	}
	for i, s := range steps {
		tr.observe(s.p, at(time.Duration(i)*time.Second))
		f, _, _ := tr.estimate(at(time.Duration(i) * time.Second))
		if d := f - s.want; d > 1e-9 || d < -1e-9 {
			t.Fatalf("%s: fraction %v, want %v", s.p.Phase, f, s.want)
		}
	}
	// The ETA after writing counts the commit only: 3 s took 0.80/0.85 of
	// the job, so the commit's 0.05/0.85 is about 0.19 s.
	_, eta, known := tr.estimate(at(3 * time.Second))
	if !known || eta > 200*time.Millisecond {
		t.Fatalf("committing: ETA %s (known %v), want at most the commit's share (~0.19 s)", eta, known)
	}
}

// TestTrackerOfAnIndexRebuildCountsVectors: an index rebuild is its
// indexing phase (by vectors inserted) and its commit.
func TestTrackerOfAnIndexRebuildCountsVectors(t *testing.T) {
	tr := tracker{kind: jobtype.KindIndexRebuild}
	tr.observe(Progress{Phase: jobtype.PhaseStarting}, at(0))
	tr.observe(Progress{Phase: jobtype.PhaseIndexing, VectorsTotal: 1000}, at(0))
	tr.observe(Progress{Phase: jobtype.PhaseIndexing, VectorsIndexed: 500, VectorsTotal: 1000}, at(10*time.Second))
	f, eta, known := tr.estimate(at(10 * time.Second))
	if d := f - 0.475; d > 1e-9 || d < -1e-9 {
		t.Fatalf("half the vectors: fraction %v, want 0.475", f)
	}
	// 500 vectors in 10 s: 10 s more of indexing, and the commit's share.
	if want := 10*time.Second + 1052*time.Millisecond; !known || eta < want-100*time.Millisecond || eta > want+100*time.Millisecond {
		t.Fatalf("half the vectors in 10 s: ETA %s (known %v), want about %s", eta, known, want)
	}
}

package manager

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/jobtype"
)

func TestClassifyEnd(t *testing.T) {
	boom := errors.New("disk on fire")
	lostErr := fmt.Errorf("commit: %w", catalog.ErrLeaseLost)
	for _, tc := range []struct {
		name string
		in   endFacts
		want endClass
	}{
		{"a committed success was written by its commit",
			endFacts{Committed: true},
			endClass{State: catalog.JobSucceeded}},
		{"a success that committed nothing is persisted here",
			endFacts{},
			endClass{State: catalog.JobSucceeded, Persist: true}},
		{"a lease renewed after the commit (found lost) keeps the success",
			endFacts{Committed: true, Cause: errLeaseLost},
			endClass{State: catalog.JobSucceeded}},
		{"a cancel that arrived after the commit keeps the success",
			endFacts{Committed: true, CancelRequested: true, Cause: errCancelRequested},
			endClass{State: catalog.JobSucceeded}},
		{"a success with nothing committed while the lease was lost is left to the other replica",
			endFacts{Cause: errLeaseLost},
			endClass{State: catalog.JobSucceeded, Lost: true}},
		{"a lost lease ends the job interrupted, recorded by the replica that took it over",
			endFacts{Err: context.Canceled, Cause: errLeaseLost, Class: jobtype.FailureInfrastructure},
			endClass{State: catalog.JobFailed, Error: "interrupted: node n1 lost the job's lease", Lost: true}},
		{"a commit refused for the lease is lost too",
			endFacts{Err: lostErr, Class: jobtype.FailureInfrastructure},
			endClass{State: catalog.JobFailed, Error: lostErr.Error(), Note: "transient failure", Class: jobtype.FailureInfrastructure, Transient: true, Lost: true}},
		{"an operator's cancel ends it cancelled",
			endFacts{Err: context.Canceled, Cause: errCancelRequested, CancelRequested: true},
			endClass{State: catalog.JobCancelled, Note: NoteCancelled, Persist: true}},
		{"a cancel seen at a lease renewal ends it cancelled",
			endFacts{Err: context.Canceled, Cause: errCancelRequested},
			endClass{State: catalog.JobCancelled, Note: NoteCancelled, Persist: true}},
		{"a deletion's cancel says so",
			endFacts{Err: context.Canceled, CancelRequested: true, CancelNote: NoteCollectionDeleted},
			endClass{State: catalog.JobCancelled, Note: NoteCollectionDeleted, Persist: true}},
		{"a cancel requested while the job failed otherwise wins",
			endFacts{Err: boom, CancelRequested: true},
			endClass{State: catalog.JobCancelled, Note: NoteCancelled, Persist: true}},
		{"the end of the shutdown grace period cancels, not fails",
			endFacts{Err: context.Canceled, Cause: context.Canceled, Shutdown: true, Class: jobtype.FailureInfrastructure},
			endClass{State: catalog.JobCancelled, Note: NoteShutdown, Persist: true}},
		{"a failure counts toward the dead-letter state",
			endFacts{Err: boom},
			endClass{State: catalog.JobFailed, Error: boom.Error(), Class: jobtype.FailureInternal, Persist: true}},
		{"a transient failure backs off only",
			endFacts{Err: boom, Class: jobtype.FailureInfrastructure},
			endClass{State: catalog.JobFailed, Error: boom.Error(), Note: "transient failure", Class: jobtype.FailureInfrastructure, Transient: true, Persist: true}},
		{"a data failure counts toward the dead-letter state",
			endFacts{Err: boom, Class: jobtype.FailureData},
			endClass{State: catalog.JobFailed, Error: boom.Error(), Class: jobtype.FailureData, Persist: true}},
		{"a failed commit is a failure, whatever Committed says",
			endFacts{Err: boom, Committed: true},
			endClass{State: catalog.JobFailed, Error: boom.Error(), Class: jobtype.FailureInternal, Persist: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.in.Node = "n1"
			if got := classifyEnd(tc.in); got != tc.want {
				t.Fatalf("classifyEnd(%+v)\n got %+v\nwant %+v", tc.in, got, tc.want)
			}
		})
	}
}

func TestEndRow(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	claimed := catalog.Job{ID: "j", State: catalog.JobRunning, Note: "", OffsetStart: 10, OffsetEnd: 20, VersionBefore: 3, VersionAfter: 3, RecordsRead: 4}
	t.Run("an executor that failed early keeps the plan", func(t *testing.T) {
		got := endRow(claimed, Outcome{}, endClass{State: catalog.JobFailed, Error: "boom"}, at)
		want := claimed
		want.State, want.Error, want.FinishedAt = catalog.JobFailed, "boom", at
		if got != want {
			t.Fatalf("got %+v\nwant %+v", got, want)
		}
	})
	t.Run("the outcome and the class are applied", func(t *testing.T) {
		o := Outcome{OffsetStart: 10, OffsetEnd: 20, OpRecordsRead: 10, RecordsWritten: 7, BytesWritten: 99, VersionBefore: 3, VersionAfter: 4, Note: "n"}
		got := endRow(claimed, o, endClass{State: catalog.JobSucceeded}, at)
		want := claimed
		want.State, want.FinishedAt, want.Note = catalog.JobSucceeded, at, "n"
		want.RecordsRead, want.RecordsWritten, want.BytesWritten, want.VersionAfter = 10, 7, 99, 4
		if got != want {
			t.Fatalf("got %+v\nwant %+v", got, want)
		}
	})
	t.Run("a cancel's note wins over the outcome's", func(t *testing.T) {
		got := endRow(claimed, Outcome{Note: "nothing to compact"}, endClass{State: catalog.JobCancelled, Note: NoteShutdown}, at)
		if got.Note != NoteShutdown || got.State != catalog.JobCancelled {
			t.Fatalf("got %s %q", got.State, got.Note)
		}
	})
}

func TestEffectOfAJobsEndOnItsCollection(t *testing.T) {
	const (
		compaction = jobtype.KindCompaction
		rebuild    = jobtype.KindIndexRebuild
		verify     = jobtype.KindVerify
		infra      = jobtype.FailureInfrastructure
		data       = jobtype.FailureData
		internal   = jobtype.FailureInternal
	)
	for _, tc := range []struct {
		name  string
		kind  jobtype.Kind
		state catalog.JobState
		class jobtype.FailureClass
		want  endEffect
	}{
		{"a compaction that succeeded clears the failure state", compaction, catalog.JobSucceeded, "", endEffect{Clears: true}},
		{"an index rebuild that succeeded clears it", rebuild, catalog.JobSucceeded, "", endEffect{Clears: true}},
		{"a verify job that succeeded leaves it, saying nothing of compactions", verify, catalog.JobSucceeded, "", endEffect{}},
		{"a compaction on an unreachable store backs off without counting", compaction, catalog.JobFailed, infra, endEffect{Backoff: true}},
		{"a compaction on damaged data backs off and counts", compaction, catalog.JobFailed, data, endEffect{Backoff: true, Counts: true}},
		{"a compaction with a bug backs off and counts", compaction, catalog.JobFailed, internal, endEffect{Backoff: true, Counts: true}},
		{"an index rebuild on damaged data backs off and counts", rebuild, catalog.JobFailed, data, endEffect{Backoff: true, Counts: true}},
		{"a verify job that found damage queues a repair, and neither backs off nor counts", verify, catalog.JobFailed, data, endEffect{Repair: true}},
		{"a verify job on an unreachable store is like any job on one", verify, catalog.JobFailed, infra, endEffect{Backoff: true}},
		{"a verify job with a bug is like any job with one", verify, catalog.JobFailed, internal, endEffect{Backoff: true, Counts: true}},
		{"a cancelled compaction changes nothing", compaction, catalog.JobCancelled, "", endEffect{}},
		{"a cancelled verify job changes nothing", verify, catalog.JobCancelled, "", endEffect{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := effectOf(tc.kind, tc.state, tc.class); got != tc.want {
				t.Fatalf("effectOf(%s, %s, %q) = %+v, want %+v", tc.kind, tc.state, tc.class, got, tc.want)
			}
		})
	}
}

// lateExec prepares as fakeExec does, then holds the prepared work on gate
// (ignoring cancellation) before handing it to the manager.
type lateExec struct {
	*fakeExec
	gate     chan struct{}
	prepared chan *fakePrepared
}

func (l lateExec) Prepare(ctx context.Context, j catalog.Job, progress func(Progress)) (Prepared, error) {
	p, err := l.fakeExec.Prepare(ctx, j, progress)
	if err != nil {
		return p, err
	}
	<-l.gate
	l.prepared <- p.(*fakePrepared)
	return p, nil
}

// TestCancelBetweenPrepareAndCommitAborts: a job cancelled once its work is
// prepared is not committed: the manager aborts what was prepared, and the
// job ends CANCELLED with its collection untouched.
func TestCancelBetweenPrepareAndCommitAborts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newMemStore()
		store.addCollection("a", 20, time.Now())
		exec := lateExec{fakeExec: newFakeExec(store, 100), gate: make(chan struct{}), prepared: make(chan *fakePrepared, 1)}
		m := runManager(t, store, exec, testConfig())
		enq, err := m.Compact(t.Context(), []string{"a"}, false, "")
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // prepared, held on the gate
		res := make(chan error, 1)
		go func() {
			_, err := m.Cancel(t.Context(), enq[0].Job.ID)
			res <- err
		}()
		synctest.Wait()
		close(exec.gate)
		if err := <-res; err != nil {
			t.Fatalf("Cancel: %v", err)
		}
		j, err := m.Get(t.Context(), enq[0].Job.ID)
		if err != nil || j.State != catalog.JobCancelled {
			t.Fatalf("job %s, %v; want CANCELLED", j.State, err)
		}
		if c := store.collection("a"); c.SegmentVersion != 0 || c.CompactionOffset != 0 {
			t.Fatalf("the cancelled job committed: version %d, offset %d", c.SegmentVersion, c.CompactionOffset)
		}
		if p := <-exec.prepared; p.o.VersionAfter != p.o.VersionBefore {
			t.Fatalf("the prepared work was neither aborted nor committed: %+v", p.o)
		}
	})
}

// TestJobsRunOnTheExecutorOfTheirKind: the workers dispatch a claimed job
// to the executor registered for its kind (WithExecutor), not to New's.
func TestJobsRunOnTheExecutorOfTheirKind(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newMemStore()
		store.addCollection("a", 20, time.Now())
		byNew, byKind := newFakeExec(store, 100), newFakeExec(store, 100)
		m, err := New(store, byNew, testConfig(), nil, nil, WithExecutor(jobtype.KindCompaction, byKind))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- m.Run(ctx) }()
		<-m.Started()
		enq, err := m.Compact(t.Context(), []string{"a"}, false, "")
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if j, _ := m.Get(t.Context(), enq[0].Job.ID); j.State != catalog.JobSucceeded {
			t.Fatalf("job %s, want SUCCEEDED", j.State)
		}
		if byKind.callsOf("a") != 1 || byNew.callsOf("a") != 0 {
			t.Fatalf("calls: kind's executor %d, New's %d; want 1 and 0", byKind.callsOf("a"), byNew.callsOf("a"))
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}

// TestAJobOfAnUnknownKindFailsNamingTheKind: a job whose kind no executor
// of this node runs (queued by a newer replica) fails, not as a transient
// failure, with an error naming its kind and the kinds the node runs; a
// compaction of the same collection queued beside it still runs.
func TestAJobOfAnUnknownKindFailsNamingTheKind(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newMemStore()
		store.addCollection("a", 20, time.Now())
		store.put(catalog.Job{ID: "odd", CollectionID: "a", Kind: "reshard", Trigger: catalog.TriggerOneOff, State: catalog.JobQueued,
			Attempt: 1, CreatedAt: time.Now().UTC()})
		exec := newFakeExec(store, 100)
		gate := make(chan struct{})
		exec.gate["a"] = gate // holds the compaction, claimed after the odd job
		cfg := testConfig()
		cfg.Node = "n1"
		m, err := New(store, exec, cfg, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- m.Run(ctx) }()
		<-m.Started()
		enq, err := m.Compact(t.Context(), []string{"a"}, false, "")
		if err != nil {
			t.Fatal(err)
		}
		if !enq[0].Created {
			t.Fatalf("Compact returned the queued %s job instead of queueing a compaction", enq[0].Job.Kind)
		}
		synctest.Wait()
		j, err := m.Get(t.Context(), "odd")
		if err != nil {
			t.Fatal(err)
		}
		want := `job odd is of kind "reshard", which node n1 does not run (it runs compaction)`
		if j.State != catalog.JobFailed || !strings.Contains(j.Error, want) || j.Note == "transient failure" {
			t.Fatalf("job %s, error %q, note %q; want FAILED with an error containing %q, not transient", j.State, j.Error, j.Note, want)
		}
		if c := store.collection("a"); c.FailureCount != 1 {
			t.Fatalf("failure count %d, want 1 (not a transient failure)", c.FailureCount)
		}
		close(gate)
		synctest.Wait()
		if got, _ := m.Get(t.Context(), enq[0].Job.ID); got.State != catalog.JobSucceeded || got.Kind != jobtype.KindCompaction {
			t.Fatalf("the compaction queued beside it: %s %s, want a SUCCEEDED compaction", got.Kind, got.State)
		}
		if exec.callsOf("a") != 1 {
			t.Fatalf("executor calls %d, want 1 (the compaction only)", exec.callsOf("a"))
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}

// TestPlanShowsAQueuedIndexRebuild: a queued index rebuild of a collection
// is on its plan entry, and does not hold its compaction back (it is a
// job of another kind; the compaction waits only while the rebuild runs).
func TestPlanShowsAQueuedIndexRebuild(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newMemStore()
		store.addCollection("a", 50, time.Now())
		store.put(catalog.Job{ID: "rebuild", CollectionID: "a", Kind: jobtype.KindIndexRebuild, Params: `{"m":8}`, Trigger: catalog.TriggerOneOff,
			State: catalog.JobQueued, Attempt: 1, CreatedAt: time.Now().UTC()})
		m, err := New(store, newFakeExec(store, 100), testConfig(), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		p, err := m.Plan(t.Context(), false)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Entries) != 1 {
			t.Fatalf("%d entries, want 1", len(p.Entries))
		}
		e := p.Entries[0]
		if e.IndexRebuild == nil || e.IndexRebuild.ID != "rebuild" || e.Decision != DecideRun {
			t.Fatalf("entry: decision %s, index rebuild %+v; want run, with the queued rebuild", e.Decision, e.IndexRebuild)
		}
	})
}

package manager

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/compactorhq/compactor/internal/catalog"
)

// harness runs a Manager over a memStore and a fakeExec inside a synctest
// bubble: time is fake and advances only when every goroutine is blocked.
type harness struct {
	t     *testing.T
	store *memStore
	exec  *fakeExec
	m     *Manager
	reg   *prometheus.Registry
	stop  context.CancelFunc
	done  chan error
}

func testConfig() Config {
	c := DefaultConfig()
	c.Interval = time.Hour // scheduler runs only where a test lets time pass
	c.Node = "test-node"
	return c
}

func start(t *testing.T, store *memStore, exec *fakeExec, cfg Config) *harness {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := New(store, exec, cfg, reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	h := &harness{t: t, store: store, exec: exec, m: m, reg: reg, stop: cancel, done: make(chan error, 1)}
	go func() { h.done <- m.Run(ctx) }()
	synctest.Wait()
	t.Cleanup(func() { h.shutdown() })
	return h
}

func (h *harness) shutdown() {
	h.stop()
	if err := <-h.done; err != nil {
		h.t.Errorf("Run: %v", err)
	}
	h.done <- nil // later shutdowns return at once
}

func (h *harness) compact(ids ...string) []Enqueued {
	h.t.Helper()
	out, err := h.m.Compact(h.t.Context(), ids, false, "test")
	if err != nil {
		h.t.Fatalf("Compact(%v): %v", ids, err)
	}
	return out
}

// settle waits until every goroutine of the bubble is blocked.
func (h *harness) job(id string) Job {
	h.t.Helper()
	synctest.Wait()
	j, err := h.m.Get(h.t.Context(), id)
	if err != nil {
		h.t.Fatalf("Get(%s): %v", id, err)
	}
	return j
}

func (h *harness) wantState(id string, want catalog.JobState) Job {
	h.t.Helper()
	j := h.job(id)
	if j.State != want {
		h.t.Fatalf("job %s is %s (error %q, note %q), want %s", id, j.State, j.Error, j.Note, want)
	}
	return j
}

func TestOneOffRunsUnderTheMinimumSizeAndWhenDeadLettered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newMemStore()
		store.addCollection("small", 3, time.Now()) // under the minimum of 10
		store.addCollection("dead", 50, time.Now())
		store.colls["dead"].DeadLetteredAt = time.Now()
		store.colls["dead"].FailureCount = 5
		h := start(t, store, newFakeExec(store, 1000), testConfig())

		if err := h.m.Schedule(t.Context()); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if n := len(store.jobsOf("small")) + len(store.jobsOf("dead")); n != 0 {
			t.Fatalf("scheduler queued %d jobs for a small and a dead-lettered collection, want 0", n)
		}
		for _, id := range []string{"small", "dead"} {
			e := h.compact(id)
			if !e[0].Created || e[0].Job.Trigger != catalog.TriggerOneOff {
				t.Fatalf("Compact(%s) = %+v, want a created one-off", id, e[0])
			}
			j := h.wantState(e[0].Job.ID, catalog.JobSucceeded)
			if j.RecordsRead != store.collection(id).CompactionOffset || j.RecordsRead == 0 {
				t.Fatalf("job of %s read %d records, collection offset %d", id, j.RecordsRead, store.collection(id).CompactionOffset)
			}
		}
		if c := store.collection("dead"); c.DeadLettered() || c.FailureCount != 0 {
			t.Fatalf("a success left the collection dead-lettered (%v) with %d failures", c.DeadLettered(), c.FailureCount)
		}
	})
}

func TestSecondCompactWhileQueuedReturnsTheSameJob(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newMemStore()
		store.addCollection("a", 20, time.Now())
		store.addCollection("busy", 20, time.Now())
		exec := newFakeExec(store, 1000)
		cfg := testConfig()
		cfg.Workers = 1
		gate := exec.setGate("busy")
		h := start(t, store, exec, cfg)
		busy := h.compact("busy") // occupies the only worker
		h.wantState(busy[0].Job.ID, catalog.JobRunning)

		first := h.compact("a", "a")
		if len(first) != 1 || !first[0].Created {
			t.Fatalf("Compact(a, a) = %+v, want one created job", first)
		}
		second := h.compact("a")
		if second[0].Created || second[0].Job.ID != first[0].Job.ID || second[0].Job.State != catalog.JobQueued {
			t.Fatalf("second Compact = %+v, want the queued job %s", second[0], first[0].Job.ID)
		}
		close(gate)
		h.wantState(first[0].Job.ID, catalog.JobSucceeded)
		if n := len(store.jobsOf("a")); n != 1 {
			t.Fatalf("collection a has %d jobs, want 1", n)
		}
	})
}

func TestCompactWhileRunningQueuesExactlyOneFollowUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newMemStore()
		store.addCollection("a", 20, time.Now())
		exec := newFakeExec(store, 1000)
		gate := exec.setGate("a")
		h := start(t, store, exec, testConfig())
		running := h.compact("a")[0].Job
		h.wantState(running.ID, catalog.JobRunning)

		store.append("a", 5, time.Now()) // arrives after the running job read the log
		follow := h.compact("a")
		again := h.compact("a")
		if !follow[0].Created || follow[0].Job.ID == running.ID {
			t.Fatalf("Compact while running = %+v, want a new follow-up job", follow[0])
		}
		if again[0].Created || again[0].Job.ID != follow[0].Job.ID {
			t.Fatalf("third Compact = %+v, want the follow-up %s", again[0], follow[0].Job.ID)
		}
		if h.job(follow[0].Job.ID).State != catalog.JobQueued {
			t.Fatal("the follow-up must wait while the first job runs")
		}
		close(gate)
		h.wantState(running.ID, catalog.JobSucceeded)
		f := h.wantState(follow[0].Job.ID, catalog.JobSucceeded)
		if f.RecordsRead != 5 {
			t.Fatalf("follow-up read %d records, want the 5 that arrived late", f.RecordsRead)
		}
		if n := len(store.jobsOf("a")); n != 2 {
			t.Fatalf("collection has %d jobs, want 2", n)
		}
	})
}

func TestSlowJobDoesNotHoldBackOthers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newMemStore()
		for _, id := range []string{"slow", "b", "c"} {
			store.addCollection(id, 20, time.Now())
		}
		exec := newFakeExec(store, 1000)
		gate := exec.setGate("slow")
		h := start(t, store, exec, testConfig()) // two workers
		slow := h.compact("slow")[0].Job
		h.wantState(slow.ID, catalog.JobRunning)
		b, c := h.compact("b")[0].Job, h.compact("c")[0].Job
		h.wantState(b.ID, catalog.JobSucceeded)
		h.wantState(c.ID, catalog.JobSucceeded)
		h.wantState(slow.ID, catalog.JobRunning)
		close(gate)
		h.wantState(slow.ID, catalog.JobSucceeded)
	})
}

func TestPanickingJobFailsAloneAndTheNextJobRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newMemStore()
		store.addCollection("bad", 20, time.Now())
		store.addCollection("good", 20, time.Now())
		exec := newFakeExec(store, 1000)
		exec.panics["bad"] = true
		cfg := testConfig()
		cfg.Workers = 1
		h := start(t, store, exec, cfg)
		bad := h.compact("bad")[0].Job
		good := h.compact("good")[0].Job
		j := h.wantState(bad.ID, catalog.JobFailed)
		if !strings.Contains(j.Error, "panicked") {
			t.Fatalf("error %q does not say it panicked", j.Error)
		}
		h.wantState(good.ID, catalog.JobSucceeded)
		if c := store.collection("bad"); c.FailureCount != 1 {
			t.Fatalf("panic counted %d failures, want 1", c.FailureCount)
		}
	})
}

func TestFailureAccounting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newMemStore()
		store.addCollection("t", 20, time.Now())
		store.addCollection("r", 20, time.Now())
		exec := newFakeExec(store, 1000)
		real := errors.New("corrupt block")
		for range 7 {
			exec.errs["t"] = append(exec.errs["t"], errTransient)
		}
		for range 3 {
			exec.errs["r"] = append(exec.errs["r"], real)
		}
		cfg := testConfig()
		cfg.DeadLetterAfter = 3
		h := start(t, store, exec, cfg)

		for i := range 7 {
			j := h.compact("t")[0].Job
			h.wantState(j.ID, catalog.JobFailed)
			if i == 0 && j.Attempt != 1 {
				t.Fatalf("first attempt numbered %d", j.Attempt)
			}
		}
		if c := store.collection("t"); c.DeadLettered() || c.FailureCount != 0 {
			t.Fatalf("transient failures dead-lettered=%v failures=%d, want neither", c.DeadLettered(), c.FailureCount)
		}
		for i := range 3 {
			j := h.compact("r")[0].Job
			h.wantState(j.ID, catalog.JobFailed)
			if got := store.collection("r").DeadLettered(); got != (i == 2) {
				t.Fatalf("after %d real failures dead-lettered=%v", i+1, got)
			}
		}
		// The scheduler skips it now, whatever the backlog.
		time.Sleep(cfg.BackoffMax + 2*cfg.Interval)
		synctest.Wait()
		if n := len(store.jobsOf("r")); n != 3 {
			t.Fatalf("scheduler queued jobs for a dead-lettered collection: %d jobs", n)
		}
		// A success clears it.
		j := h.compact("r")[0].Job
		h.wantState(j.ID, catalog.JobSucceeded)
		if c := store.collection("r"); c.DeadLettered() || c.FailureCount != 0 {
			t.Fatalf("success left dead-lettered=%v failures=%d", c.DeadLettered(), c.FailureCount)
		}
		if got := testutil.ToFloat64(h.m.metrics.jobs.WithLabelValues("one_off", "failed")); got != 10 {
			t.Fatalf("compactor_jobs_total{one_off,failed} = %v, want 10", got)
		}
	})
}

func TestScheduledRetriesBackOffExponentially(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newMemStore()
		store.addCollection("a", 50, time.Now())
		exec := newFakeExec(store, 1000)
		exec.errs["a"] = []error{errTransient, errTransient, errTransient}
		cfg := testConfig()
		cfg.Interval = time.Second
		cfg.BackoffBase = 10 * time.Second
		h := start(t, store, exec, cfg)
		var starts []time.Time
		t0 := time.Now()
		for len(starts) < 4 {
			<-exec.started
			starts = append(starts, time.Now())
		}
		// Failures at ~1 s; retries 10 s, 20 s, 40 s after (±10 % jitter,
		// plus up to one scheduler interval).
		for i, want := range []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second} {
			if gap := starts[i+1].Sub(starts[i]); gap < want*9/10 || gap > want*11/10+2*cfg.Interval {
				t.Fatalf("retry %d came %s after the failure, want %s ±10 %% (+ one interval)", i+1, gap, want)
			}
		}
		synctest.Wait()
		if c := store.collection("a"); c.Backlog() != 0 {
			t.Fatalf("backlog %d after the fourth attempt, want 0 (started at %s)", c.Backlog(), t0)
		}
		_ = h
	})
}

func TestBacklogLargerThanOneJobContinuesAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newMemStore()
		store.addCollection("a", 250, time.Now())
		exec := newFakeExec(store, 100) // 2.5x the per-job maximum
		h := start(t, store, exec, testConfig())
		t0 := time.Now()
		h.compact("a")
		synctest.Wait()
		jobs := store.jobsOf("a")
		if len(jobs) != 3 {
			t.Fatalf("%d jobs, want 3", len(jobs))
		}
		for i, want := range []int64{100, 100, 50} {
			if jobs[i].State != catalog.JobSucceeded || jobs[i].RecordsRead != want {
				t.Fatalf("job %d: %s with %d records, want SUCCEEDED with %d", i, jobs[i].State, jobs[i].RecordsRead, want)
			}
			if i > 0 && (jobs[i].Continues != jobs[i-1].ID || jobs[i].Trigger != catalog.TriggerOneOff) {
				t.Fatalf("job %d continues %q with trigger %s, want %q and the first job's trigger", i, jobs[i].Continues, jobs[i].Trigger, jobs[i-1].ID)
			}
		}
		if jobs[0].Continues != "" {
			t.Fatalf("the first job claims to continue %q", jobs[0].Continues)
		}
		if !time.Now().Equal(t0) {
			t.Fatalf("continuations waited %s for a tick", time.Since(t0))
		}
		if c := store.collection("a"); c.Backlog() != 0 {
			t.Fatalf("backlog %d left", c.Backlog())
		}
	})
}

func TestNothingToCompactSucceedsWithZeroRecords(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newMemStore()
		store.addCollection("empty", 0, time.Now())
		h := start(t, store, newFakeExec(store, 100), testConfig())
		j := h.wantState(h.compact("empty")[0].Job.ID, catalog.JobSucceeded)
		if j.RecordsRead != 0 || j.Note != "nothing to compact" {
			t.Fatalf("job read %d records with note %q", j.RecordsRead, j.Note)
		}
		row, _ := store.GetJob(t.Context(), j.ID)
		if row.State != catalog.JobSucceeded {
			t.Fatalf("persisted state %s", row.State)
		}
	})
}

func TestCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newMemStore()
		store.addCollection("a", 20, time.Now())
		store.addCollection("b", 20, time.Now())
		exec := newFakeExec(store, 100)
		exec.setGate("a")
		cfg := testConfig()
		cfg.Workers = 1
		h := start(t, store, exec, cfg)
		running := h.compact("a")[0].Job
		queued := h.compact("b")[0].Job
		h.wantState(running.ID, catalog.JobRunning)

		got, err := h.m.Cancel(t.Context(), queued.ID)
		if err != nil || got.State != catalog.JobCancelled {
			t.Fatalf("Cancel(queued) = %s, %v", got.State, err)
		}
		got, err = h.m.Cancel(t.Context(), running.ID)
		if err != nil || got.State != catalog.JobCancelled {
			t.Fatalf("Cancel(running) = %s, %v", got.State, err)
		}
		if c := store.collection("a"); c.CompactionOffset != 0 || c.FailureCount != 0 {
			t.Fatalf("cancelled job committed (offset %d) or counted a failure (%d)", c.CompactionOffset, c.FailureCount)
		}
		if _, err := h.m.Cancel(t.Context(), running.ID); !errors.Is(err, ErrFinished) {
			t.Fatalf("Cancel of a finished job: %v, want ErrFinished", err)
		}
		if _, err := h.m.Cancel(t.Context(), "no-such-job"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Cancel of an unknown job: %v, want ErrNotFound", err)
		}
		for _, id := range []string{queued.ID, running.ID} {
			if row, _ := store.GetJob(t.Context(), id); row.State != catalog.JobCancelled {
				t.Fatalf("persisted state of %s is %s", id, row.State)
			}
		}
	})
}

func TestShutdownCancelsRunningJobWithoutCountingAFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newMemStore()
		store.addCollection("a", 20, time.Now())
		exec := newFakeExec(store, 100)
		exec.setGate("a") // never opened: the job outlives the shutdown timeout
		cfg := testConfig()
		cfg.ShutdownTimeout = 5 * time.Second
		h := start(t, store, exec, cfg)
		j := h.compact("a")[0].Job
		h.wantState(j.ID, catalog.JobRunning)
		t0 := time.Now()
		h.shutdown()
		if waited := time.Since(t0); waited != cfg.ShutdownTimeout {
			t.Fatalf("shutdown waited %s, want the timeout %s", waited, cfg.ShutdownTimeout)
		}
		row, _ := store.GetJob(t.Context(), j.ID)
		if row.State != catalog.JobCancelled || row.Note != "cancelled at shutdown" {
			t.Fatalf("job is %s (%q), want CANCELLED at shutdown", row.State, row.Note)
		}
		if c := store.collection("a"); c.FailureCount != 0 {
			t.Fatalf("shutdown counted %d failures", c.FailureCount)
		}
		if _, err := h.m.Compact(t.Context(), []string{"a"}, false, ""); !errors.Is(err, ErrStopped) {
			t.Fatalf("Compact after shutdown: %v, want ErrStopped", err)
		}
	})
}

func TestCancelOfAJobThatCommitsAnywayIsFailedPrecondition(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newMemStore()
		store.addCollection("a", 20, time.Now())
		exec := newFakeExec(store, 100)
		gate := exec.setGate("a")
		exec.commits["a"] = true
		h := start(t, store, exec, testConfig())
		j := h.compact("a")[0].Job
		h.wantState(j.ID, catalog.JobRunning)
		type result struct {
			job Job
			err error
		}
		res := make(chan result, 1)
		go func() {
			job, err := h.m.Cancel(t.Context(), j.ID)
			res <- result{job, err}
		}()
		synctest.Wait() // Cancel waits for the job, which is past its last boundary
		close(gate)
		r := <-res
		if !errors.Is(r.err, ErrFinished) || r.job.State != catalog.JobSucceeded {
			t.Fatalf("Cancel of a job that committed: %s, %v; want SUCCEEDED and ErrFinished", r.job.State, r.err)
		}
	})
}

func TestShutdownKeepsTheContinuationOfAFinishingJob(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newMemStore()
		store.addCollection("a", 250, time.Now())
		exec := newFakeExec(store, 100)
		gate := exec.setGate("a")
		h := start(t, store, exec, testConfig())
		j := h.compact("a")[0].Job
		h.wantState(j.ID, catalog.JobRunning)
		go func() { time.Sleep(time.Second); close(gate) }() // finishes within the shutdown timeout
		h.shutdown()
		jobs := store.jobsOf("a")
		if len(jobs) != 2 || jobs[0].State != catalog.JobSucceeded || jobs[1].State != catalog.JobQueued || jobs[1].Continues != j.ID {
			t.Fatalf("after shutdown: %+v; want the job SUCCEEDED and its continuation QUEUED", jobs)
		}
		// The next start runs it.
		h2 := start(t, store, exec, testConfig())
		h2.wantState(jobs[1].ID, catalog.JobSucceeded)
	})
}

func TestShutdownLetsAQuickJobFinish(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newMemStore()
		store.addCollection("a", 20, time.Now())
		exec := newFakeExec(store, 100)
		gate := exec.setGate("a")
		h := start(t, store, exec, testConfig())
		j := h.compact("a")[0].Job
		h.wantState(j.ID, catalog.JobRunning)
		go func() { time.Sleep(time.Second); close(gate) }()
		h.shutdown()
		if row, _ := store.GetJob(t.Context(), j.ID); row.State != catalog.JobSucceeded {
			t.Fatalf("job is %s, want SUCCEEDED within the shutdown timeout", row.State)
		}
	})
}

func TestRestartMarksInterruptedAndRequeues(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newMemStore()
		store.addCollection("a", 20, time.Now())
		store.addCollection("b", 20, time.Now())
		now := time.Now().UTC()
		for _, j := range []catalog.Job{
			{ID: "dead", CollectionID: "a", Trigger: catalog.TriggerScheduled, State: catalog.JobRunning, CreatedAt: now, StartedAt: now,
				Node: "test-node", LeaseOwner: "test-node", LeaseExpiresAt: now.Add(time.Hour)},
			{ID: "waiting", CollectionID: "b", Trigger: catalog.TriggerOneOff, State: catalog.JobQueued, CreatedAt: now},
		} {
			store.put(j)
		}
		h := start(t, store, newFakeExec(store, 100), testConfig())
		row, _ := store.GetJob(t.Context(), "dead")
		if row.State != catalog.JobFailed || !strings.HasPrefix(row.Error, "interrupted") {
			t.Fatalf("job left RUNNING is %s (%q), want FAILED interrupted", row.State, row.Note)
		}
		h.wantState("waiting", catalog.JobSucceeded)
		if c := store.collection("a"); c.FailureCount != 0 {
			t.Fatalf("interruption counted as a failure")
		}
	})
}

func TestRestartRequeuesMoreThanOnePageOfQueuedJobs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newMemStore()
		now := time.Now().UTC()
		const n = 1005 // more than one page (1,000) of ListJobs
		for i := range n {
			id := fmt.Sprintf("c%04d", i)
			store.addCollection(id, 1, now)
			j := catalog.Job{ID: fmt.Sprintf("job-%04d", i), CollectionID: id, Trigger: catalog.TriggerOneOff, State: catalog.JobQueued, CreatedAt: now.Add(time.Duration(i) * time.Millisecond)}
			store.put(j)
		}
		h := start(t, store, newFakeExec(store, 100), testConfig())
		synctest.Wait()
		for i := range n {
			if j, _ := store.GetJob(t.Context(), fmt.Sprintf("job-%04d", i)); j.State != catalog.JobSucceeded {
				t.Fatalf("job-%04d is %s after the restart, want SUCCEEDED", i, j.State)
			}
		}
		_ = h
	})
}

func TestSlowJobInsertDoesNotStallTheManager(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newMemStore()
		store.addCollection("a", 20, time.Now())
		store.addCollection("b", 20, time.Now())
		exec := newFakeExec(store, 100)
		gate := exec.setGate("a")
		h := start(t, store, exec, testConfig())
		running := h.compact("a")[0].Job
		h.wantState(running.ID, catalog.JobRunning)

		store.insertGate = make(chan struct{})
		done := make(chan []Enqueued)
		go func() {
			out, err := h.m.Compact(t.Context(), []string{"b"}, false, "slow insert")
			if err != nil {
				t.Error(err)
			}
			done <- out
		}()
		synctest.Wait() // Compact waits in InsertJob
		// Reads and the running job's progress go on meanwhile.
		if got, err := h.m.Active(t.Context()); err != nil || len(got) != 1 || got[0].ID != running.ID {
			t.Fatalf("Active during a slow insert: %+v", got)
		}
		close(gate)
		synctest.Wait()
		if j, _ := store.GetJob(t.Context(), running.ID); j.State != catalog.JobSucceeded {
			t.Fatalf("the running job is %s during a slow insert, want SUCCEEDED", j.State)
		}
		close(store.insertGate)
		out := <-done
		h.wantState(out[0].Job.ID, catalog.JobSucceeded)
	})
}

func TestCancelAfterRunReturnedDoesNotPanic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newMemStore()
		store.addCollection("a", 20, time.Now())
		store.addCollection("b", 20, time.Now())
		exec := newFakeExec(store, 100)
		exec.setGate("a")
		cfg := testConfig()
		cfg.Workers, cfg.ShutdownTimeout = 1, time.Second
		h := start(t, store, exec, cfg)
		if _, _, err := h.m.Watch(t.Context()); err != nil {
			t.Fatal(err)
		}
		h.compact("a")
		queued := h.compact("b")[0].Job
		synctest.Wait()
		h.shutdown()
		j, err := h.m.Cancel(t.Context(), queued.ID)
		if err != nil || j.State != catalog.JobCancelled {
			t.Fatalf("Cancel after shutdown: %s, %v", j.State, err)
		}
	})
}

func TestSchedulerQueuesBySizeAndAge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newMemStore()
		store.addCollection("big", 10, time.Now()) // at the minimum size
		store.addCollection("old", 2, time.Now())  // small, becomes old
		store.addCollection("new", 2, time.Now())  // small and young
		store.addCollection("none", 0, time.Now()) // nothing to do
		cfg := testConfig()
		cfg.Interval = 10 * time.Second
		cfg.MaxAge = time.Minute
		h := start(t, store, newFakeExec(store, 100), cfg)
		time.Sleep(12 * time.Second) // one tick
		synctest.Wait()
		if got := len(store.jobsOf("big")); got != 1 {
			t.Fatalf("big: %d jobs after one tick, want 1", got)
		}
		if got := len(store.jobsOf("old")); got != 0 {
			t.Fatalf("old: %d jobs before its age, want 0", got)
		}
		store.append("new", 0, time.Now())
		time.Sleep(time.Minute)
		synctest.Wait()
		jobs := store.jobsOf("old")
		if len(jobs) != 1 || jobs[0].Trigger != catalog.TriggerScheduled || !strings.Contains(jobs[0].Reason, "waited") {
			t.Fatalf("old: %+v, want one scheduled job for its age", jobs)
		}
		if n := len(store.jobsOf("none")); n != 0 {
			t.Fatalf("a collection with no backlog got %d scheduled jobs", n)
		}
		if got := testutil.ToFloat64(h.m.metrics.schedulerRuns); got < 6 {
			t.Fatalf("scheduler ran %v times in 72 s at a 10 s interval", got)
		}
	})
}

func TestCompactValidation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newMemStore()
		store.addCollection("a", 1, time.Now())
		h := start(t, store, newFakeExec(store, 100), testConfig())
		ctx := t.Context()
		if _, err := h.m.Compact(ctx, nil, false, ""); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("neither ids nor all: %v", err)
		}
		if _, err := h.m.Compact(ctx, []string{"a"}, true, ""); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("both ids and all: %v", err)
		}
		_, err := h.m.Compact(ctx, []string{"x", "a", "y"}, false, "")
		var nf *NotFoundError
		if !errors.As(err, &nf) || len(nf.IDs) != 2 || nf.IDs[0] != "x" || nf.IDs[1] != "y" {
			t.Fatalf("unknown ids: %v, want NotFoundError naming x and y", err)
		}
		if n := len(store.jobsOf("a")); n != 0 {
			t.Fatalf("a failed request enqueued %d jobs", n)
		}
		all, err := h.m.Compact(ctx, nil, true, "everything")
		if err != nil || len(all) != 1 || all[0].Job.Reason != "everything" {
			t.Fatalf("all: %+v, %v", all, err)
		}
	})
}

func TestWatchDeliversChangesAndProgressToTwoWatchers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newMemStore()
		store.addCollection("a", 20, time.Now())
		exec := newFakeExec(store, 100)
		gate := exec.setGate("a")
		h := start(t, store, exec, testConfig())
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		var wg sync.WaitGroup
		for i := range 2 {
			s, snap, err := h.m.Watch(ctx)
			if err != nil || len(snap) != 0 {
				t.Fatalf("Watch: %v, snapshot %d", err, len(snap))
			}
			wg.Go(func() {
				var states []catalog.JobState
				var progress int
				for ev := range s.Events() {
					if ev.Kind == EventProgress {
						progress++
						continue
					}
					if len(states) == 0 || states[len(states)-1] != ev.Job.State {
						states = append(states, ev.Job.State)
					}
					if ev.Job.State.Finished() {
						break
					}
				}
				got := strings.Join(toStrings(states), ",")
				if got != "QUEUED,RUNNING,SUCCEEDED" || progress == 0 {
					t.Errorf("watcher %d saw %s with %d progress events", i, got, progress)
				}
			})
		}
		j := h.compact("a")[0].Job
		h.wantState(j.ID, catalog.JobRunning)
		close(gate)
		h.wantState(j.ID, catalog.JobSucceeded)
		wg.Wait()
	})
}

func toStrings(s []catalog.JobState) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[i] = string(v)
	}
	return out
}

func TestConfigValidate(t *testing.T) {
	for name, mut := range map[string]func(*Config){
		"zero interval":    func(c *Config) { c.Interval = 0 },
		"zero workers":     func(c *Config) { c.Workers = 0 },
		"negative minimum": func(c *Config) { c.MinCompactionSize = -1 },
		"zero dead letter": func(c *Config) { c.DeadLetterAfter = 0 },
		"backoff over max": func(c *Config) { c.BackoffBase = time.Hour; c.BackoffMax = time.Minute },
		"aging under 1s":   func(c *Config) { c.PriorityAging = time.Millisecond },
		"bad window":       func(c *Config) { c.Windows = []string{"01:00-05:00", "Mon-Fry 01:00-05:00"} },
		"bad window close": func(c *Config) { c.WindowClose = "abort" },
	} {
		c := DefaultConfig()
		mut(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: Validate accepted it", name)
		}
	}
	c := DefaultConfig()
	c.Windows = []string{"Mon-Fry 01:00-05:00"}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "--compaction-window") || !strings.Contains(err.Error(), `unknown day "Fry"`) {
		t.Errorf("a bad window: %v; want an error naming the flag and the bad day", err)
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
}

func TestJobGaugesCountTheQueueInTheCatalogAndTheJobsRunningHere(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newMemStore()
		for _, id := range []string{"a", "b", "c"} {
			store.addCollection(id, 20, time.Now())
		}
		exec := newFakeExec(store, 100)
		gate := exec.setGate("a")
		cfg := testConfig()
		cfg.Workers = 1
		h := start(t, store, exec, cfg)
		h.compact("a", "b")
		store.put(catalog.Job{ID: "elsewhere", CollectionID: "c", Trigger: catalog.TriggerScheduled, State: catalog.JobQueued, CreatedAt: time.Now()})
		time.Sleep(cfg.PollInterval) // one status poll
		synctest.Wait()
		gauges := func() string {
			return fmt.Sprintf("queued %v, running %v",
				testutil.ToFloat64(h.m.metrics.states.WithLabelValues("queued")), testutil.ToFloat64(h.m.metrics.states.WithLabelValues("running")))
		}
		if got, want := gauges(), "queued 2, running 1"; got != want {
			t.Fatalf("with a running job and two queued (one by another replica): %s, want %s", got, want)
		}
		close(gate)
		synctest.Wait()
		time.Sleep(cfg.PollInterval)
		synctest.Wait()
		if got, want := gauges(), "queued 0, running 0"; got != want {
			t.Fatalf("after every job ran: %s, want %s", got, want)
		}
	})
}

func TestNodesAreShownGoneAfterThreeMissedHeartbeats(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newMemStore()
		cfg := testConfig()
		h := start(t, store, newFakeExec(store, 100), cfg)
		if err := store.Heartbeat(t.Context(), catalog.Node{Name: "other", StartedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
		alive := func() map[string]bool {
			t.Helper()
			synctest.Wait()
			nodes, err := h.m.Nodes(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			out := map[string]bool{}
			for _, n := range nodes {
				out[n.Name] = n.Alive
			}
			return out
		}
		if got := alive(); !got["test-node"] || !got["other"] {
			t.Fatalf("right after their heartbeats: %v, want both alive", got)
		}
		time.Sleep(3*cfg.HeartbeatInterval + time.Second)
		if got := alive(); !got["test-node"] || got["other"] {
			t.Fatalf("after three missed heartbeats of other: %v, want test-node alive and other gone", got)
		}
		if got := testutil.ToFloat64(h.m.metrics.nodes); got != 1 {
			t.Fatalf("compactor_nodes_alive = %v, want 1", got)
		}
	})
}

func TestPauseSkipsScheduledJobsButNotOneOffs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newMemStore()
		store.addCollection("a", 50, time.Now())
		store.addCollection("b", 50, time.Now())
		cfg := testConfig()
		cfg.Interval = 10 * time.Second
		h := start(t, store, newFakeExec(store, 1000), cfg)
		ctx := t.Context()
		if err := h.m.Pause(ctx, "", "storage maintenance", "ops"); err != nil {
			t.Fatal(err)
		}
		if err := h.m.Pause(ctx, "b", "reindexing", "alice"); err != nil {
			t.Fatal(err)
		}
		if err := h.m.Pause(ctx, "no-such", "", ""); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Pause of an unknown collection: %v, want ErrNotFound", err)
		}
		time.Sleep(3 * cfg.Interval)
		synctest.Wait()
		if n := len(store.jobsOf("a")) + len(store.jobsOf("b")); n != 0 {
			t.Fatalf("%d scheduled jobs while paused, want none", n)
		}
		if got := testutil.ToFloat64(h.m.metrics.schedulerPaused); got != 1 {
			t.Errorf("compactor_scheduler_paused = %v, want 1", got)
		}
		if got := testutil.ToFloat64(h.m.metrics.collectionsPaused); got != 1 {
			t.Errorf("compactor_collections_paused = %v, want 1", got)
		}
		// A one-off runs whatever the pauses: it is the operator's intent.
		h.wantState(h.compact("b")[0].Job.ID, catalog.JobSucceeded)

		// Resuming everything leaves b's own pause in place.
		if err := h.m.Resume(ctx, "", "ops"); err != nil {
			t.Fatal(err)
		}
		store.append("b", 50, time.Now())
		time.Sleep(2 * cfg.Interval)
		synctest.Wait()
		if jobs := store.jobsOf("a"); len(jobs) != 1 || jobs[0].Trigger != catalog.TriggerScheduled {
			t.Fatalf("a after the global resume: %+v, want one scheduled job", jobs)
		}
		if jobs := store.jobsOf("b"); len(jobs) != 1 {
			t.Fatalf("b, still paused: %d jobs, want only the one-off", len(jobs))
		}
		if err := h.m.Resume(ctx, "b", "alice"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * cfg.Interval)
		synctest.Wait()
		if jobs := store.jobsOf("b"); len(jobs) != 2 {
			t.Fatalf("b after its resume: %d jobs, want a scheduled one too", len(jobs))
		}
	})
}

func TestPlanSaysWhatTheSchedulerWouldDoAndWritesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		now := time.Now()
		store := newMemStore()
		store.addCollection("due", 50, now.Add(-time.Minute))
		store.addCollection("older", 50, now.Add(-time.Hour))
		store.addCollection("small", 2, now)
		store.addCollection("tuned", 2, now) // small, but its own minimum is 2
		store.addCollection("paused", 50, now)
		store.addCollection("dead", 50, now)
		store.addCollection("backoff", 50, now)
		store.addCollection("busy", 50, now)
		store.addCollection("empty", 0, now)
		exec := newFakeExec(store, 1000)
		gate := exec.setGate("busy")
		h := start(t, store, exec, testConfig())
		ctx := t.Context()
		if _, err := h.m.SetCollectionSettings(ctx, "tuned", catalog.CollectionSettings{MinCompactionSize: 2}); err != nil {
			t.Fatal(err)
		}
		if err := h.m.Pause(ctx, "paused", "", "bob"); err != nil {
			t.Fatal(err)
		}
		for range 5 {
			if _, _, err := store.RecordFailure(ctx, "dead", 5); err != nil {
				t.Fatal(err)
			}
		}
		until := now.Add(time.Hour)
		if err := store.SetRetry(ctx, "backoff", 2, until); err != nil {
			t.Fatal(err)
		}
		busy := h.compact("busy")[0].Job
		h.wantState(busy.ID, catalog.JobRunning)
		jobsBefore := len(store.order)

		p, err := h.m.Plan(ctx, false)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]Decision{}
		var order []string
		for _, e := range p.Entries {
			got[e.Collection.ID] = e.Decision
			if e.Decision == DecideRun {
				order = append(order, e.Collection.ID)
			}
		}
		want := map[string]Decision{
			"due": DecideRun, "older": DecideRun, "tuned": DecideRun, "small": DecideBelow, "paused": DecidePaused,
			"dead": DecideDeadLettered, "backoff": DecideBackingOff, "busy": DecideRunning, "empty": DecideEmpty,
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("decisions %v\nwant %v", got, want)
		}
		if fmt.Sprint(order) != fmt.Sprint([]string{"older", "due", "tuned"}) {
			t.Fatalf("planned order %v, want the oldest backlog first", order)
		}
		for _, e := range p.Entries {
			if e.Collection.ID == "backoff" && !e.RetryAfter.Equal(until) {
				t.Errorf("backoff until %v, want %v", e.RetryAfter, until)
			}
			if e.Collection.ID == "tuned" && (e.MinCompactionSize != 2 || !strings.Contains(e.Reason, "minimum 2")) {
				t.Errorf("tuned: minimum %d, reason %q; want its own minimum 2", e.MinCompactionSize, e.Reason)
			}
		}
		if len(store.order) != jobsBefore {
			t.Fatalf("Plan queued %d jobs; it must write nothing", len(store.order)-jobsBefore)
		}

		// The scheduler does what the plan said.
		if err := h.m.Schedule(ctx); err != nil {
			t.Fatal(err)
		}
		for id, d := range want {
			if n := len(store.jobsOf(id)); (d == DecideRun) != (n == 1) && id != "busy" {
				t.Errorf("%s (%s): %d jobs after Schedule", id, d, n)
			}
		}
		close(gate)

		if err := h.m.Pause(ctx, "", "freeze", "ops"); err != nil {
			t.Fatal(err)
		}
		p, err = h.m.Plan(ctx, false)
		if err != nil {
			t.Fatal(err)
		}
		if !p.Pause.Paused || p.Pause.Reason != "freeze" || p.Pause.By != "ops" {
			t.Fatalf("plan's pause %+v", p.Pause)
		}
		for _, e := range p.Entries {
			if e.Decision == DecideRun {
				t.Fatalf("%s planned while every collection is paused", e.Collection.ID)
			}
		}
	})
}

func TestThroughputCapFollowsTheFlagAndTheRunTimeOverride(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newMemStore()
		exec := newFakeExec(store, 100)
		cfg := testConfig()
		cfg.MaxThroughput = 8 << 20
		h := start(t, store, exec, cfg)
		ctx := t.Context()
		if got := exec.throughput(); got != 8<<20 {
			t.Fatalf("cap at start %d, want the flag's %d", got, 8<<20)
		}
		got, err := h.m.SetMaxThroughput(ctx, 2<<20, "ops")
		if err != nil || got.BytesPerSecond != 2<<20 || got.Override != 2<<20 || got.By != "ops" || exec.throughput() != 2<<20 {
			t.Fatalf("after SetMaxThroughput: %+v, %v; executor cap %d", got, err, exec.throughput())
		}
		if v := testutil.ToFloat64(h.m.metrics.maxThroughput); v != 2<<20 {
			t.Errorf("compactor_compaction_max_throughput_bytes = %v", v)
		}
		// Another replica changes it: this one follows within a poll.
		if _, err := store.PutSetting(ctx, catalog.Setting{Name: catalog.SettingMaxThroughput, Value: "1048576", UpdatedBy: "elsewhere"}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(cfg.PollInterval)
		synctest.Wait()
		if got := exec.throughput(); got != 1<<20 {
			t.Fatalf("cap after another replica set 1 MiB/s: %d", got)
		}
		// 0 removes the override: the flag applies again.
		if got, err := h.m.SetMaxThroughput(ctx, 0, "ops"); err != nil || got.BytesPerSecond != 8<<20 || exec.throughput() != 8<<20 {
			t.Fatalf("after removing the override: %+v, %v", got, err)
		}
		if _, err := h.m.SetMaxThroughput(ctx, -1, "ops"); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("a negative cap: %v", err)
		}
	})
}

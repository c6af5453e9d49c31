package manager_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/catalog/catalogtest"
	"github.com/compactorhq/compactor/internal/clock"
	"github.com/compactorhq/compactor/internal/jobtype"
	"github.com/compactorhq/compactor/internal/manager"
	"github.com/compactorhq/compactor/internal/materialize"
)

// classExec fails the jobs of a collection with the error and class set
// for it (a panic for "panic"), and otherwise commits like commitExec; it
// classifies its errors like the compaction executor (manager.Classifier)
// and prices its jobs (manager.Estimator).
type classExec struct {
	*commitExec
	mu    sync.Mutex
	fail  map[string]error
	class map[error]jobtype.FailureClass
	est   jobtype.Estimate
	// inline: the executor prices its jobs itself (manager.InlineEstimator),
	// reporting est from Prepare; estimates counts the calls of Estimate.
	inline    bool
	estimates int
}

var (
	errStoreDown = errors.New("blob store unavailable")
	errCorrupt   = errors.New("corrupt block")
	errPanic     = errors.New("panic")
)

func newClassExec(c *catalog.Catalog) *classExec {
	return &classExec{commitExec: newCommitExec(c), fail: map[string]error{},
		class: map[error]jobtype.FailureClass{errStoreDown: jobtype.FailureInfrastructure, errCorrupt: jobtype.FailureData}}
}

func (e *classExec) failWith(id string, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.fail[id] = err
}

func (e *classExec) Prepare(ctx context.Context, j catalog.Job, progress func(manager.Progress)) (manager.Prepared, error) {
	e.mu.Lock()
	err := e.fail[j.CollectionID]
	e.mu.Unlock()
	switch err {
	case nil:
		e.mu.Lock()
		est, inline := e.est, e.inline
		e.mu.Unlock()
		if inline {
			progress(manager.Progress{Estimate: &est})
		}
		p, err := e.commitExec.Prepare(ctx, j, progress)
		if cp, ok := p.(*commitPrepared); ok && err == nil {
			cp.o.BytesWritten = 1 << 20
			cp.o.Actual = &jobtype.Actual{BlobPuts: 3, BytesWritten: 1 << 20}
		}
		return p, err
	case errPanic:
		panic("a bug in the executor")
	}
	return nil, fmt.Errorf("compact %s: %w", j.CollectionID, err)
}

func (e *classExec) Classify(err error) jobtype.FailureClass {
	for target, c := range e.class {
		if errors.Is(err, target) {
			return c
		}
	}
	return "" // the manager's default: internal
}

func (e *classExec) Estimate(context.Context, string) (manager.Estimate, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.estimates++
	return e.est, nil
}

func (e *classExec) EstimatesInline() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.inline
}

// failuresEnv is one manager with a fake clock on a catalog (SQLite, and
// PostgreSQL when COMPACTOR_TEST_POSTGRES_DSN is set) timed by the same
// clock, so that backoffs and cool-offs pass when the test says.
type failuresEnv struct {
	cat   *catalog.Catalog
	clk   *clock.Fake
	exec  *classExec
	reg   *prometheus.Registry
	m     *manager.Manager
	stop  func()
	build string
	opts  []manager.Option // of every manager start runs
}

func forEachFakeClockCatalog(t *testing.T, fn func(t *testing.T, open func(clock.Clock) *catalog.Catalog)) {
	t.Run("sqlite", func(t *testing.T) {
		fn(t, func(c clock.Clock) *catalog.Catalog {
			cat, err := catalog.Open(t.Context(), catalog.Config{DSN: filepath.Join(t.TempDir(), "catalog.db"), Exclusive: true, Clock: c})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cat.Close() })
			return cat
		})
	})
	if base := catalogtest.PostgresBase(); base != "" {
		t.Run("postgres", func(t *testing.T) {
			dsn := catalogtest.PostgresSchema(t, base)
			fn(t, func(c clock.Clock) *catalog.Catalog {
				cat, err := catalog.Open(t.Context(), catalog.Config{Driver: "postgres", DSN: dsn, Clock: c})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = cat.Close() })
				return cat
			})
		})
	}
}

// start runs a manager of build on the env's catalog (replacing the one
// running, as an upgrade does).
func (e *failuresEnv) start(t *testing.T, build string) {
	t.Helper()
	if e.stop != nil {
		e.stop()
	}
	cfg := manager.DefaultConfig()
	cfg.Node, cfg.Workers, cfg.Interval, cfg.Version, cfg.Clock = "n1", 1, time.Hour, build, e.clk
	cfg.PollInterval, cfg.HeartbeatInterval = 20*time.Millisecond, time.Hour
	cfg.DeadLetterAfter, cfg.BackoffBase, cfg.BackoffMax, cfg.DeadLetterCoolOff = 2, time.Minute, 8*time.Minute, time.Hour
	e.reg = prometheus.NewRegistry()
	m, err := manager.New(e.cat, e.exec, cfg, e.reg, nil, e.opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	<-m.Started()
	e.m, e.build = m, build
	var once sync.Once
	e.stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
	t.Cleanup(e.stop)
}

// compact runs a one-off job of id to the end of its report (the failure
// policy applied), which the manager publishes last.
func (e *failuresEnv) compact(t *testing.T, id string) manager.Job {
	t.Helper()
	var jobID string
	return e.awaitEnd(t, func() string {
		enq, err := e.m.Compact(t.Context(), []string{id}, false, "test")
		if err != nil {
			t.Fatal(err)
		}
		jobID = enq[0].Job.ID
		return jobID
	})
}

// awaitEnd runs start, which queues a job and returns its id (or "" for
// the first job of any id to end), and waits for the published end of
// that job: the manager publishes it after its whole report (row, failure
// policy, dead-letter history), unlike the row, which the catalog holds
// finished from the commit or persist on.
func (e *failuresEnv) awaitEnd(t *testing.T, start func() string) manager.Job {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	sub, _, err := e.m.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	id := start()
	for ev := range sub.Events() {
		if (id == "" || ev.Job.ID == id) && ev.Job.State.Finished() {
			return ev.Job
		}
	}
	t.Fatalf("watch ended before job %s did (lagged %v)", id, sub.Lagged())
	return manager.Job{}
}

func (e *failuresEnv) collection(t *testing.T, id string) catalog.Collection {
	t.Helper()
	c, err := e.cat.GetCollection(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func newFailuresEnv(t *testing.T, open func(clock.Clock) *catalog.Catalog) *failuresEnv {
	clk := clock.NewFake(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	cat := open(clk)
	e := &failuresEnv{cat: cat, clk: clk, exec: newClassExec(cat)}
	e.start(t, "v1")
	return e
}

func TestInfrastructureFailuresBackOffExponentiallyAndNeverDeadLetter(t *testing.T) {
	forEachFakeClockCatalog(t, func(t *testing.T, open func(clock.Clock) *catalog.Catalog) {
		e := newFailuresEnv(t, open)
		id := collectionWithBacklog(t, e.cat, "flaky-store", 5)
		e.exec.failWith(id, errStoreDown)
		for n := 1; n <= 5; n++ { // past --dead-letter-after 2
			j := e.compact(t, id)
			if j.State != catalog.JobFailed || j.FailureClass != jobtype.FailureInfrastructure {
				t.Fatalf("failure %d: %s, class %q", n, j.State, j.FailureClass)
			}
			c := e.collection(t, id)
			if c.DeadLettered() || c.FailureCount != 0 || c.RetryCount != n {
				t.Fatalf("after %d infrastructure failures: dead-lettered %v, failures %d, retries %d", n, c.DeadLettered(), c.FailureCount, c.RetryCount)
			}
			// base·2^(n-1) with ±10 % jitter, capped at 8m.
			want := min(time.Minute<<(n-1), 8*time.Minute)
			got := c.RetryAfter.Sub(e.clk.Now())
			if got < want*9/10-time.Millisecond || got > want*11/10+time.Millisecond {
				t.Fatalf("backoff after %d failures: %s, want %s ±10 %%", n, got, want)
			}
		}
		if got := testutil.ToFloat64(counterOf(t, e.reg, "compactor_job_failures_total", "infrastructure")); got != 5 {
			t.Errorf("compactor_job_failures_total{class=infrastructure} = %v, want 5", got)
		}
	})
}

func TestDataAndInternalFailuresCountAndDeadLetterWithTheirHistory(t *testing.T) {
	forEachFakeClockCatalog(t, func(t *testing.T, open func(clock.Clock) *catalog.Catalog) {
		e := newFailuresEnv(t, open)
		data := collectionWithBacklog(t, e.cat, "corrupt", 5)
		bug := collectionWithBacklog(t, e.cat, "buggy", 5)
		e.exec.failWith(data, errCorrupt)
		e.exec.failWith(bug, errPanic)
		for _, tc := range []struct {
			id    string
			class jobtype.FailureClass
		}{{data, jobtype.FailureData}, {bug, jobtype.FailureInternal}} {
			var last manager.Job
			for n := 1; n <= 2; n++ {
				last = e.compact(t, tc.id)
				if last.State != catalog.JobFailed || last.FailureClass != tc.class {
					t.Fatalf("%s failure %d: %s, class %q (%s)", tc.class, n, last.State, last.FailureClass, last.Error)
				}
			}
			c := e.collection(t, tc.id)
			if !c.DeadLettered() || c.FailureCount != 2 {
				t.Fatalf("after 2 %s failures: dead-lettered %v, failures %d", tc.class, c.DeadLettered(), c.FailureCount)
			}
			evs, err := e.m.DeadLetterHistory(t.Context(), tc.id, 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(evs) != 1 || evs[0].Event != catalog.DeadLetterEntered || evs[0].Build != "v1" || evs[0].JobID != last.ID ||
				evs[0].Failures != 2 || !strings.Contains(evs[0].Reason, last.Error) {
				t.Fatalf("%s: dead-letter history %+v, want one dead-lettering by v1 naming job %s", tc.class, evs, last.ID)
			}
		}
		if err := e.m.RefreshBacklog(t.Context(), data); err != nil {
			t.Fatal(err)
		}
		if err := e.m.RefreshBacklog(t.Context(), bug); err != nil {
			t.Fatal(err)
		}
		if got := gaugeOf(t, e.reg, "compactor_collections_dead_lettered"); got != 2 {
			t.Errorf("compactor_collections_dead_lettered = %v, want 2", got)
		}
	})
}

func TestADeadLetteredCollectionIsRedrivenOnceAfterTheCoolOffAndOncePerUpgrade(t *testing.T) {
	forEachFakeClockCatalog(t, func(t *testing.T, open func(clock.Clock) *catalog.Catalog) {
		e := newFailuresEnv(t, open)
		id := collectionWithBacklog(t, e.cat, "stuck", 5)
		e.exec.failWith(id, errCorrupt)
		e.compact(t, id)
		e.compact(t, id)
		if !e.collection(t, id).DeadLettered() {
			t.Fatal("not dead-lettered after 2 data failures")
		}
		redrive := func(want int) {
			t.Helper()
			n, err := e.m.Redrive(t.Context())
			if err != nil || n != want {
				t.Fatalf("Redrive at %s under %s: %d jobs, %v; want %d", e.clk.Now().Format(time.TimeOnly), e.build, n, err, want)
			}
		}
		// redriveAndRun re-drives one job and waits for the end of its
		// report.
		redriveAndRun := func() manager.Job {
			t.Helper()
			return e.awaitEnd(t, func() string { redrive(1); return "" })
		}
		// queuedRedrive returns the job the last re-drive queued (the
		// newest of the collection; a worker may have claimed it already).
		queuedRedrive := func() catalog.Job {
			t.Helper()
			jobs, err := e.cat.ListJobs(t.Context(), catalog.JobFilter{CollectionID: id, Limit: 1})
			if err != nil || len(jobs) != 1 || jobs[0].Trigger != catalog.TriggerScheduled || !strings.Contains(jobs[0].Reason, "re-drive") {
				t.Fatalf("newest job after a re-drive: %+v, %v", jobs, err)
			}
			return jobs[0]
		}
		redrive(0) // the cool-off has not passed
		e.clk.Advance(59 * time.Minute)
		redrive(0)
		e.clk.Advance(time.Minute) // one hour since the dead-lettering; the backoff (2m) is long over
		j := redriveAndRun()
		if j.ID != queuedRedrive().ID {
			t.Fatalf("the job that ended is not the re-drive")
		}
		if j.State != catalog.JobFailed || !e.collection(t, id).DeadLettered() {
			t.Fatalf("re-drive that fails again: %s, dead-lettered %v", j.State, e.collection(t, id).DeadLettered())
		}
		e.clk.Advance(24 * time.Hour)
		redrive(0) // once after the cool-off, not again

		e.start(t, "v2") // an upgrade
		j = redriveAndRun()
		if !strings.Contains(j.Reason, "the server is now v2 (dead-lettered under v1)") {
			t.Errorf("upgrade re-drive reason %q", j.Reason)
		}
		redrive(0) // once per build

		e.exec.failWith(id, nil) // v3 fixes it
		// A re-drive is a scheduled job: it waits for the backoff of the
		// failure before it (8m, the cap, by now).
		e.clk.Advance(10 * time.Minute)
		e.start(t, "v3")
		j = redriveAndRun()
		if j.State != catalog.JobSucceeded || e.collection(t, id).DeadLettered() {
			t.Fatalf("re-drive under the fixed build: %s, dead-lettered %v", j.State, e.collection(t, id).DeadLettered())
		}
		// The commit finished the job's row; its report (the recovery event
		// among it) ends before the manager's shutdown returns.
		e.stop()
		evs, err := e.cat.ListDeadLetterEvents(t.Context(), id, 0)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for i := len(evs) - 1; i >= 0; i-- {
			got = append(got, strings.TrimSuffix(evs[i].Event+" "+evs[i].Cause+" "+evs[i].Build, " "))
		}
		want := []string{"dead-lettered  v1", "redriven cool-off v1", "redriven upgrade v2", "redriven upgrade v3", "recovered  v3"}
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Fatalf("dead-letter history, oldest first:\n got %q\nwant %q", got, want)
		}
		if got := testutil.ToFloat64(counterOf(t, e.reg, "compactor_dead_letter_redrives_total", "upgrade")); got != 1 {
			t.Errorf("compactor_dead_letter_redrives_total{cause=upgrade} of the v3 process = %v, want 1", got)
		}
	})
}

func TestClearDeadLetterByHandRecordsWhoAndWhy(t *testing.T) {
	forEachFakeClockCatalog(t, func(t *testing.T, open func(clock.Clock) *catalog.Catalog) {
		e := newFailuresEnv(t, open)
		id := collectionWithBacklog(t, e.cat, "cleared", 5)
		e.exec.failWith(id, errCorrupt)
		e.compact(t, id)
		e.compact(t, id)
		c, cleared, err := e.m.ClearDeadLetter(t.Context(), id, "ops@host", "restored the block from a backup")
		if err != nil || !cleared || c.DeadLettered() || c.FailureCount != 0 || c.RetryCount != 0 {
			t.Fatalf("ClearDeadLetter: cleared %v, %v; collection dead-lettered %v, failures %d, retries %d", cleared, err, c.DeadLettered(), c.FailureCount, c.RetryCount)
		}
		evs, err := e.m.DeadLetterHistory(t.Context(), id, 1)
		if err != nil || len(evs) != 1 || evs[0].Event != catalog.DeadLetterCleared || evs[0].Actor != "ops@host" ||
			evs[0].Reason != "restored the block from a backup" || evs[0].Failures != 2 {
			t.Fatalf("newest event %+v, %v", evs, err)
		}
		if _, cleared, err := e.m.ClearDeadLetter(t.Context(), id, "ops@host", "again"); err != nil || cleared {
			t.Fatalf("clearing a collection that is not dead-lettered: cleared %v, %v", cleared, err)
		}
		if _, _, err := e.m.ClearDeadLetter(t.Context(), "00000000-0000-4000-8000-000000000000", "", ""); !errors.Is(err, catalog.ErrNotFound) {
			t.Fatalf("clearing an unknown collection: %v", err)
		}
	})
}

func TestAJobIsPredictedWhenClaimedAndComparedWithItsRun(t *testing.T) {
	forEachFakeClockCatalog(t, func(t *testing.T, open func(clock.Clock) *catalog.Catalog) {
		e := newFailuresEnv(t, open)
		e.exec.est = jobtype.Estimate{OpRecords: 5, BytesWritten: 1 << 20, BlobPuts: 4}
		id := collectionWithBacklog(t, e.cat, "priced", 5)
		first := e.compact(t, id)
		if first.Predicted == nil || first.Predicted.SecondsKnown || first.Predicted.BlobPuts != 4 ||
			!strings.Contains(first.Predicted.Basis, "no measurement yet") {
			t.Fatalf("first job's prediction %+v: want one without a duration (nothing measured)", first.Predicted)
		}
		stored, err := e.cat.GetJob(t.Context(), first.ID)
		if err != nil || stored.Predicted == nil || stored.Actual == nil || stored.Actual.BlobPuts != 3 {
			t.Fatalf("stored job: predicted %+v, actual %+v, %v", stored.Predicted, stored.Actual, err)
		}
		// With the fake clock frozen a job takes no time, which measures
		// no rate: a cap gives a lower bound instead.
		if _, err := e.m.SetMaxThroughput(t.Context(), 1<<20, "test"); err != nil {
			t.Fatal(err)
		}
		if _, _, err := e.cat.AppendLog(t.Context(), id, stored2ops(5), catalog.AppendLimits{}); err != nil {
			t.Fatal(err)
		}
		second := e.compact(t, id)
		p := second.Predicted
		if p == nil || !p.SecondsKnown || p.Seconds != 1 || !strings.Contains(p.Basis, "lower bound") {
			t.Fatalf("second job's prediction under a 1 MiB/s cap: %+v; want 1 s", p)
		}
		// blob_puts: predicted 4, made 3: -25 %.
		if got := histogramCount(t, e.reg, "compactor_plan_prediction_error_ratio", "blob_puts"); got != 2 {
			t.Errorf("prediction errors observed for blob_puts: %d, want 2", got)
		}
	})
}

// An executor that prices its job from its own work is not estimated
// before it runs: the estimate it reports while it runs is priced and
// stored as the job's prediction, and compared with its actual figures.
func TestAJobThatEstimatesItselfIsPredictedFromItsReport(t *testing.T) {
	forEachFakeClockCatalog(t, func(t *testing.T, open func(clock.Clock) *catalog.Catalog) {
		e := newFailuresEnv(t, open)
		e.exec.est = jobtype.Estimate{OpRecords: 5, BytesWritten: 1 << 20, BlobPuts: 4}
		e.exec.inline = true
		id := collectionWithBacklog(t, e.cat, "self-priced", 5)
		j := e.compact(t, id)
		if j.State != catalog.JobSucceeded {
			t.Fatalf("job %s: %s", j.ID, j.State)
		}
		if n := func() int { e.exec.mu.Lock(); defer e.exec.mu.Unlock(); return e.exec.estimates }(); n != 0 {
			t.Errorf("Estimate called %d times for an executor that estimates inline", n)
		}
		stored, err := e.cat.GetJob(t.Context(), j.ID)
		if err != nil || stored.Predicted == nil || stored.Predicted.BlobPuts != 4 || stored.Predicted.OpRecords != 5 {
			t.Fatalf("stored job: predicted %+v, %v; want the reported estimate priced", stored.Predicted, err)
		}
		if got := histogramCount(t, e.reg, "compactor_plan_prediction_error_ratio", "blob_puts"); got != 1 {
			t.Errorf("prediction errors observed for blob_puts: %d, want 1", got)
		}
	})
}

// stored2ops is n more ADDs of new ids.
func stored2ops(n int) []materialize.OperationRecord {
	ops := make([]materialize.OperationRecord, n)
	for i := range ops {
		ops[i] = materialize.OperationRecord{Op: materialize.OpAdd, ID: fmt.Sprint("more-", i), Embedding: []float32{1, 2}}
	}
	return ops
}

// metricFamily returns the gathered family name.
func metricFamily(t *testing.T, reg *prometheus.Registry, name string) *dto.MetricFamily {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf
		}
	}
	t.Fatalf("no metric %s", name)
	return nil
}

// labelled returns the metric of mf whose only label has value v.
func labelled(t *testing.T, mf *dto.MetricFamily, v string) *dto.Metric {
	t.Helper()
	for _, m := range mf.GetMetric() {
		if len(m.GetLabel()) == 1 && m.GetLabel()[0].GetValue() == v {
			return m
		}
	}
	t.Fatalf("no %s{...=%q}", mf.GetName(), v)
	return nil
}

func counterOf(t *testing.T, reg *prometheus.Registry, name, label string) prometheus.Counter {
	t.Helper()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "copy"})
	c.Add(labelled(t, metricFamily(t, reg, name), label).GetCounter().GetValue())
	return c
}

func gaugeOf(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	return metricFamily(t, reg, name).GetMetric()[0].GetGauge().GetValue()
}

func histogramCount(t *testing.T, reg *prometheus.Registry, name, label string) uint64 {
	t.Helper()
	return labelled(t, metricFamily(t, reg, name), label).GetHistogram().GetSampleCount()
}

// verifyExec runs verify jobs that fail with the error set for their
// collection (none: they verify), classified as classExec classifies; its
// outcome names the collection's current version, as a verify job's does.
type verifyExec struct {
	*classExec
	mu   sync.Mutex
	errs map[string]error
}

func (v *verifyExec) failWith(id string, err error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.errs[id] = err
}

func (v *verifyExec) Prepare(ctx context.Context, j catalog.Job, _ func(manager.Progress)) (manager.Prepared, error) {
	c, err := v.cat.GetCollection(ctx, j.CollectionID)
	if err != nil {
		return nil, err
	}
	v.mu.Lock()
	err = v.errs[j.CollectionID]
	v.mu.Unlock()
	if err != nil {
		err = fmt.Errorf("verify %s version %d: %w", c.ID, c.SegmentVersion, err)
	}
	return &commitPrepared{o: manager.Outcome{VersionBefore: c.SegmentVersion, VersionAfter: c.SegmentVersion}}, err
}

// A verify job that finds its collection's current version damaged queues
// the compaction that repairs it, and neither backs off nor counts toward
// the dead-letter state (compactions are how the damage is repaired); one
// that fails otherwise is a failure like any job's; one that succeeds
// leaves the failures of the collection's compactions as they are.
func TestAVerifyJobThatFindsDamageQueuesARepairAndNeverStopsCompactions(t *testing.T) {
	forEachFakeClockCatalog(t, func(t *testing.T, open func(clock.Clock) *catalog.Catalog) {
		clk := clock.NewFake(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
		cat := open(clk)
		e := &failuresEnv{cat: cat, clk: clk, exec: newClassExec(cat)}
		verify := &verifyExec{classExec: e.exec, errs: map[string]error{}}
		e.opts = []manager.Option{manager.WithExecutor(jobtype.KindVerify, verify)}
		e.start(t, "v1")
		runVerify := func(t *testing.T, id string) manager.Job {
			t.Helper()
			return e.awaitEnd(t, func() string {
				enq, err := e.m.Verify(t.Context(), id, jobtype.VerifyParams{}, "test")
				if err != nil {
					t.Fatal(err)
				}
				return enq.Job.ID
			})
		}
		// compactions returns the compactions of a collection other than
		// first (the fake clock stands still: they are all created at
		// the same time, so the listing's order does not tell them apart).
		compactions := func(t *testing.T, id, first string) []catalog.Job {
			t.Helper()
			jobs, err := e.cat.ListJobs(t.Context(), catalog.JobFilter{CollectionID: id, Kinds: []catalog.JobKind{jobtype.KindCompaction}})
			if err != nil {
				t.Fatal(err)
			}
			var out []catalog.Job
			for _, j := range jobs {
				if j.ID != first {
					out = append(out, j)
				}
			}
			return out
		}
		for _, tc := range []struct {
			name              string
			err               error
			class             jobtype.FailureClass
			failures, retries int
			repair            bool
		}{
			{"damage found", errCorrupt, jobtype.FailureData, 0, 0, true},
			{"the blob store unreachable", errStoreDown, jobtype.FailureInfrastructure, 0, 1, false},
			{"an unclassified error", errors.New("unexpected"), jobtype.FailureInternal, 1, 1, false},
		} {
			t.Run(tc.name, func(t *testing.T) {
				id := collectionWithBacklog(t, e.cat, tc.name, 3)
				first := e.compact(t, id)
				if first.State != catalog.JobSucceeded || first.VersionAfter != 1 {
					t.Fatalf("setup compaction: %s, version %d", first.State, first.VersionAfter)
				}
				verify.failWith(id, tc.err)
				j := runVerify(t, id)
				if j.State != catalog.JobFailed || j.FailureClass != tc.class {
					t.Fatalf("verify job: %s, class %q (%s); want FAILED, %q", j.State, j.FailureClass, j.Error, tc.class)
				}
				if c := e.collection(t, id); c.FailureCount != tc.failures || c.RetryCount != tc.retries || c.DeadLettered() {
					t.Errorf("after the verify job: failures %d, retries %d, dead-lettered %v; want %d, %d, no", c.FailureCount, c.RetryCount, c.DeadLettered(), tc.failures, tc.retries)
				}
				more := compactions(t, id, first.ID)
				switch {
				case tc.repair && (len(more) != 1 || !strings.Contains(more[0].Reason, "repairs version 1, which verify job "+j.ID[:8]) || more[0].Trigger != catalog.TriggerOneOff):
					t.Errorf("after damage found, the compactions queued: %+v; want one one-off repair of version 1 queued by the verify job", more)
				case !tc.repair && len(more) != 0:
					t.Errorf("compactions %+v were queued after a verify job that found no damage", more)
				}
			})
		}

		t.Run("a success", func(t *testing.T) {
			id := collectionWithBacklog(t, e.cat, "failing compactions", 3)
			e.exec.failWith(id, errCorrupt)
			if j := e.compact(t, id); j.State != catalog.JobFailed {
				t.Fatalf("setup compaction: %s", j.State)
			}
			if j := runVerify(t, id); j.State != catalog.JobSucceeded {
				t.Fatalf("verify job: %s %s", j.State, j.Error)
			}
			if c := e.collection(t, id); c.FailureCount != 1 || c.RetryCount != 1 {
				t.Errorf("after a verify job that succeeded: failures %d, retries %d; want the failed compaction's 1 and 1", c.FailureCount, c.RetryCount)
			}
		})
	})
}

// Package manager is the compaction manager (DESIGN.md §5, §7a): the
// scheduler that turns backlogs into SCHEDULED jobs, the one-off requests of
// operators, workers that claim jobs from the queue in the catalog and run
// them under a lease, continuation of backlogs larger than one job, the
// failure policy (backoff with jitter, dead-letter), cancel, watch, and the
// persisted job history.
//
// The queue is the catalog's jobs table, shared by every replica: the
// database keeps at most one QUEUED job per collection and kind and one
// RUNNING job per collection of any kind, a
// worker claims a job with a lease that its lease keeper renews while the
// job runs (persisting progress), and a job's commit is fenced by that
// lease. The parts, after Mimir's compactor scheduler and River (Manager
// documents which service owns which state):
//   - runner.go: a worker's loop and a job's life: claim, prepare, commit
//     or abort, classify the end, report it;
//   - registry.go: this node's running jobs;
//   - lease.go: the lease keeper of a running job;
//   - policy.go: the failure policy;
//   - scheduler.go: the scheduler, run by the replica holding the leader
//     lease, and the history pruner it runs;
//   - rescuer.go: takes over jobs whose lease expired;
//   - status.go and watch.go: change events for watchers, from this node's
//     jobs at once and from other replicas' through the catalog;
//   - throughput.go: the throughput cap in force;
//   - enqueue.go: the group commit of one-off requests;
//   - nodes.go: this replica's registration and heartbeat.
//
// The manager knows nothing of HTTP, Connect or the segment format: it
// declares the Store and Executor it needs, and the binary wires them.
package manager

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/clock"
	"github.com/compactorhq/compactor/internal/jobtype"
	"github.com/compactorhq/compactor/internal/window"
)

// Store is what the manager needs from the catalog. *catalog.Catalog
// implements it; its methods' errors and semantics are the catalog's (see
// catalog/queue.go for the queue).
type Store interface {
	GetCollection(ctx context.Context, id string) (catalog.Collection, error)
	ListCollections(ctx context.Context) ([]catalog.Collection, error)
	GetJob(ctx context.Context, id string) (catalog.Job, error)
	ListJobs(ctx context.Context, f catalog.JobFilter) ([]catalog.Job, error)
	PruneJobs(ctx context.Context, keep int, olderThan time.Time) (int, error)

	EnqueueJob(ctx context.Context, r catalog.JobRequest) (catalog.Job, bool, error)
	EnqueueJobs(ctx context.Context, calls []catalog.EnqueueCall) ([]catalog.EnqueueOutcome, error)
	ClaimJob(ctx context.Context, node string, lease time.Duration) (catalog.Job, error)
	RenewLease(ctx context.Context, jobID, node string, lease time.Duration, p catalog.JobProgress) (bool, error)
	FinishJob(ctx context.Context, node string, j catalog.Job) error
	CancelJob(ctx context.Context, jobID, note string) (catalog.Job, error)
	ExpireLeases(ctx context.Context, renewing []string) ([]catalog.Job, error)
	ReleaseNode(ctx context.Context, node string) ([]catalog.Job, error)
	ListQueue(ctx context.Context, limit int) ([]catalog.Job, error)

	SetRetry(ctx context.Context, collectionID string, retries int, retryAfter time.Time) error
	RecordFailure(ctx context.Context, collectionID string, deadLetterAfter int) (int, bool, error)
	RecordSuccess(ctx context.Context, collectionID string) error
	RecordFailureOf(ctx context.Context, collectionID string, r catalog.FailureRecord) (int, bool, error)
	RecordRecovery(ctx context.Context, collectionID, jobID, build string) error
	DeadLetterStates(ctx context.Context) ([]catalog.DeadLetterState, error)
	RedriveDeadLetter(ctx context.Context, ev catalog.DeadLetterEvent, req catalog.JobRequest) (catalog.Job, bool, error)
	ClearDeadLetter(ctx context.Context, collectionID, actor, reason string) (catalog.Collection, bool, error)
	ListDeadLetterEvents(ctx context.Context, collectionID string, limit int) ([]catalog.DeadLetterEvent, error)
	SetJobPrediction(ctx context.Context, jobID, node string, p jobtype.Prediction) error

	SetCollectionPause(ctx context.Context, id string, paused bool, reason, by string) (catalog.Collection, error)
	SetCollectionSettings(ctx context.Context, id string, s catalog.CollectionSettings) (catalog.Collection, error)
	UpdateCollectionPolicy(ctx context.Context, id string, u catalog.PolicyUpdate) (catalog.Collection, error)
	RescheduleJob(ctx context.Context, jobID string, after, before time.Time) (bool, error)
	PutSetting(ctx context.Context, s catalog.Setting) (catalog.Setting, error)
	GetSetting(ctx context.Context, name string) (catalog.Setting, error)

	Heartbeat(ctx context.Context, n catalog.Node) error
	ListNodes(ctx context.Context) ([]catalog.Node, error)
	AcquireLeaderLease(ctx context.Context, name, owner string, ttl time.Duration) (bool, error)
	ReleaseLeaderLease(ctx context.Context, name, owner string) error
}

// The vocabulary of jobs (package jobtype), under the names the manager's
// callers have used; each is the same type as jobtype's, not a copy.
type (
	// Progress of a running job (jobtype.Progress): the executor reports
	// the phase, counters and plan; the manager adds Fraction and ETA
	// (see tracker), computed from the rates observed in this job.
	Progress = jobtype.Progress
	// Outcome is what an executor reports of one job (jobtype.Outcome).
	Outcome = jobtype.Outcome
	// Estimate is what one job of a collection would do (jobtype.Estimate).
	Estimate = jobtype.Estimate
	// Enqueued is one result of Compact.
	Enqueued = jobtype.Enqueued[Job]
)

// Notes of cancelled jobs (catalog.Job.Note).
const (
	NoteCancelled         = "cancelled by operator"
	NoteCollectionDeleted = "collection deleted"
	NoteShutdown          = "cancelled at shutdown"
)

// Executor runs jobs in two phases, after River's execute and report:
// Prepare does the work up to its commit, and the Prepared it returns is
// ended by the manager with Commit (the fenced transaction that also writes
// the job's row) or Abort. The manager calls Prepare from its workers, one
// job per collection at a time across every replica.
type Executor interface {
	// Prepare does job j's work up to its commit (for a compaction: read
	// the log slice, write the changed blocks and the manifest), calling
	// progress as it goes, from the calling goroutine. It must return
	// promptly (at a batch boundary) with ctx's error when ctx ends. On
	// error, what it wrote is removed, and the Prepared it returns (which
	// may be nil) has ended: its Outcome holds the figures so far.
	Prepare(ctx context.Context, j catalog.Job, progress func(Progress)) (Prepared, error)
	// Transient reports whether err says nothing about the collection
	// (storage unavailable, a lost compare-and-swap or lease, shutdown):
	// such failures back off but never count toward the dead-letter state.
	// An Executor that also implements Classifier classifies its failures
	// finer; Transient is then not asked.
	Transient(err error) bool
	// GC removes superseded versions and orphan blocks of a collection.
	GC(ctx context.Context, collectionID string) error
}

// Classifier is implemented by an Executor that tells the class of its
// failures (jobtype.FailureClass), from marks its errors got where they
// happened. Without it, a Transient error is infrastructure and any other
// internal.
type Classifier interface {
	Classify(err error) jobtype.FailureClass
}

// Prepared is a job's work done up to its commit. The manager calls
// exactly one of Commit and Abort, and Commit only when Outcome().Committed()
// (there is something to commit).
type Prepared interface {
	// Outcome is the job's figures: what Commit would commit until it is
	// called, then what was committed (VersionAfter == VersionBefore when
	// nothing was).
	Outcome() Outcome
	// Commit commits the work and writes the job's row j (SUCCEEDED,
	// finished) in the same transaction, fenced by j.LeaseOwner. It is not
	// interrupted by ctx's end. Errors: catalog.ErrLeaseLost,
	// catalog.ErrConflict (another commit won), storage errors; after an
	// error nothing is committed and what Prepare wrote is removed.
	Commit(ctx context.Context, j catalog.Job) error
	// Abort removes what Prepare wrote; nothing is committed. Its error is
	// the storage's (logged by the manager).
	Abort(ctx context.Context) error
}

// Sentinel errors of the manager; they match with errors.Is.
var (
	ErrInvalidArgument = errors.New("invalid argument")
	ErrNotFound        = catalog.ErrNotFound
	// ErrFinished: the job to cancel has already finished.
	ErrFinished = errors.New("job already finished")
	// ErrStopped: the manager is shutting down or not running.
	ErrStopped = errors.New("manager stopped")
)

// NotFoundError names every unknown collection id of a Compact request.
type NotFoundError struct{ IDs []string }

func (e *NotFoundError) Error() string {
	return fmt.Sprintf("collections not found: %v", e.IDs)
}

// Is reports whether target is ErrNotFound.
func (e *NotFoundError) Is(target error) bool { return target == ErrNotFound }

// Job is a job as surfaces see it: the persisted row plus the progress of a
// running job (this node's as it happens, another replica's as its owner
// last persisted it, at most Config.RenewInterval old).
type Job struct {
	catalog.Job
	Progress        *Progress // nil unless RUNNING
	CancelRequested bool      // RUNNING, and an operator asked to cancel it
}

// Manager schedules and runs compactions. Create it with New, start it with
// Run; Compact, Cancel, Get, List, Active and Watch may be called while it
// runs.
//
// It is the facade the adapters call over services that each own their
// state, under their own lock, with the slice of the Store they use and
// the one injected clock (after Mimir's compactor scheduler and River's
// maintenance services):
//   - runs (runRegistry): this node's running jobs and the workers' wake-up
//     signal; the workers (runner.go) and the lease keepers use it;
//   - events (eventHub): watchers, and the cross-replica status it polls
//     (seen, published, lastPoll);
//   - rescuer (leaseRescuer): takes over jobs whose lease expired;
//   - sched (scheduler): the leader lease, the plan, the scheduled
//     enqueues; it runs the pruner;
//   - pruner (historyPruner): the job history's retention;
//   - throughput (throughputApplier): the throughput cap in force;
//   - enq (enqueuer): the group commit of Compact calls.
//
// The Manager's own fields are set by New and never change, except
// started (closed once by Run). Lock order: the event hub's lock, then the
// run registry's; no other service calls another under its lock.
type Manager struct {
	store Store
	exec  Executor // the compaction jobs' executor, execs[jobtype.KindCompaction]
	// execs are the executors by kind of job, which the workers dispatch
	// each claimed job to (executorOf).
	execs  map[jobtype.Kind]Executor
	cfg    Config
	policy failurePolicy
	// owner holds this process's leases: the node's name and a token of
	// the process, so that two processes given one --node by mistake never
	// commit under each other's lease.
	owner   string
	logger  *slog.Logger
	metrics *metrics
	tracer  trace.Tracer
	// clk is the process's clock (Config.Clock), the one every service
	// is given: its wall time for what rows record and the plan, its
	// monotonic clock for durations. clock is its step-free time (the
	// wall time at New advanced by the monotonic clock), which times
	// running jobs' phases for their fraction and ETA.
	clk     clock.Clock
	clock   func() time.Time
	started chan struct{} // closed once Run has recovered and accepts work

	runs       *runRegistry
	events     *eventHub
	rescuer    *leaseRescuer
	sched      *scheduler
	redrive    *redriver
	pruner     *historyPruner
	throughput *throughputApplier
	enq        *enqueuer

	gate atomic.Pointer[func() error] // see SetClaimGate
	// rates are this node's recent successful jobs' throughput, which
	// predictions are priced with (measure).
	rates rateWindow
}

// Causes of a job's cancellation, told apart at its end.
var (
	errCancelRequested = errors.New("cancelled by operator")
	errLeaseLost       = errors.New("lease lost")
)

// New returns a Manager whose compaction jobs run on exec (more kinds of
// job are added with WithExecutor). reg receives its metrics (nil: not
// registered); logger nil discards logs.
func New(store Store, exec Executor, cfg Config, reg prometheus.Registerer, logger *slog.Logger, opts ...Option) (*Manager, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Node == "" {
		cfg.Node, _ = os.Hostname()
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	clk := cfg.Clock
	if clk == nil {
		clk = clock.System()
	}
	m := &Manager{
		store:   store,
		cfg:     cfg,
		policy:  failurePolicy{base: cfg.BackoffBase, max: cfg.BackoffMax, deadLetterAfter: cfg.DeadLetterAfter, build: cfg.Version},
		owner:   cfg.Node + "/" + uuid.NewString()[:8],
		logger:  logger,
		metrics: newMetrics(reg, cfg),
		tracer:  tracerOf(cfg.TracerProvider),
		clk:     clk,
		clock:   clock.StepFree(clk),
		started: make(chan struct{}),
		execs:   map[jobtype.Kind]Executor{jobtype.KindCompaction: exec},
	}
	for _, o := range opts {
		o(m)
	}
	m.exec = m.execs[jobtype.KindCompaction]
	m.runs = newRunRegistry(m.clock, clk.Mono)
	m.events = newEventHub(store, m.runs, clk.Now, logger, func(n int) {
		m.metrics.states.WithLabelValues(label(catalog.JobQueued)).Set(float64(n))
	})
	m.rescuer = &leaseRescuer{store: store, logger: logger, metrics: m.metrics, wake: m.runs.wake, renewing: m.runs.ids}
	m.pruner = &historyPruner{store: store, keep: cfg.HistoryKeep, maxAge: cfg.HistoryMaxAge, clock: m.now}
	windows, _ := window.ParseSet(cfg.Windows) // checked by Validate
	m.policy.now = m.now
	m.redrive = &redriver{store: store, coolOff: cfg.DeadLetterCoolOff, build: cfg.Version, clock: m.now, logger: logger,
		counter: m.metrics.redrives, queued: m.changedJob}
	m.sched = &scheduler{store: store, cfg: cfg, windows: windows, clock: m.now, metrics: m.metrics, logger: logger, pruner: m.pruner,
		stopping: m.runs.isStopping, queued: m.changedJob, redrive: m.redrive}
	th, _ := m.exec.(Throttler)
	m.throughput = &throughputApplier{store: store, configured: cfg.MaxThroughput, throttle: th, gauge: m.metrics.maxThroughput, logger: logger}
	m.enq = &enqueuer{store: store, timeout: cfg.PersistTimeout}
	return m, nil
}

// Option configures a Manager at New.
type Option func(*Manager)

// WithExecutor runs the jobs of kind k on exec (replacing the executor of
// that kind, if any): how a new kind of job plugs into the queue, the
// lease, the failure policy, watch and the history, which it shares with
// compactions.
func WithExecutor(k jobtype.Kind, exec Executor) Option {
	return func(m *Manager) { m.execs[k] = exec }
}

// ErrNoExecutor: a claimed job is of a kind no executor runs here. The job
// fails (not as a transient failure: retrying on this node cannot help).
var ErrNoExecutor = errors.New("no executor for the job's kind")

// kindOf is the kind of job j, as its row records it ("" is a compaction:
// rows written before jobs had kinds).
func kindOf(j catalog.Job) jobtype.Kind { return cmp.Or(j.Kind, jobtype.KindCompaction) }

// executorOf returns the executor of job j's kind; for a kind this node
// does not run, an error naming the kind and the kinds it runs.
func (m *Manager) executorOf(j catalog.Job) (Executor, error) {
	if e, ok := m.execs[kindOf(j)]; ok && e != nil {
		return e, nil
	}
	return nil, fmt.Errorf("job %s is of kind %q, which node %s does not run (it runs %s): %w",
		j.ID, kindOf(j), m.cfg.Node, strings.Join(m.Kinds(), ", "), ErrNoExecutor)
}

// Kinds returns the kinds of job this node runs, sorted.
func (m *Manager) Kinds() []string {
	out := make([]string, 0, len(m.execs))
	for k, e := range m.execs {
		if e != nil {
			out = append(out, string(k))
		}
	}
	slices.Sort(out)
	return out
}

// Node is the name of this replica on the jobs it runs.
func (m *Manager) Node() string { return m.cfg.Node }

// Run registers the node, ends the jobs a previous process of this node
// left RUNNING (FAILED "interrupted", with a follow-up queued), then runs
// the workers, the scheduler, the heartbeat and the status poller until ctx
// ends. At shutdown it stops claiming and scheduling, lets running jobs
// finish up to Config.ShutdownTimeout, then cancels them (they end
// CANCELLED, not counted as failures). It returns nil after a clean
// shutdown, or the error that prevented the start.
func (m *Manager) Run(ctx context.Context) error {
	startedAt := m.now()
	if err := m.heartbeat(ctx, startedAt); err != nil {
		return fmt.Errorf("register node %s: %w", m.cfg.Node, err)
	}
	interrupted, err := m.store.ReleaseNode(ctx, m.cfg.Node)
	if err != nil {
		return fmt.Errorf("release jobs of node %s: %w", m.cfg.Node, err)
	}
	m.rescuer.interrupted(interrupted)
	// The backlog gauges start from the catalog, not from the first
	// scheduler run an interval later.
	if colls, err := m.store.ListCollections(ctx); err == nil {
		m.metrics.backlogs.replace(colls)
	} else {
		m.logger.Warn("read backlogs", "err", err)
	}
	// Jobs run under their own context, cancelled only after the shutdown
	// grace period (or by Cancel).
	workCtx, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()

	m.events.start()
	close(m.started)
	m.events.runOnce(ctx) // the first snapshot, so that watchers start from it
	if _, err := m.throughput.runOnce(ctx); err != nil {
		m.logger.Warn("apply the throughput cap", "err", err)
	}

	var wg sync.WaitGroup
	for range m.cfg.Workers {
		wg.Go(func() { m.worker(ctx, workCtx) })
	}
	wg.Go(func() { m.schedulerLoop(ctx) })
	wg.Go(func() { m.heartbeatLoop(ctx, startedAt) })
	wg.Go(func() { m.statusLoop(ctx) })

	<-ctx.Done()
	m.events.stop()
	m.runs.stop()

	// Let running jobs finish, then cancel what is left.
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	timer := time.NewTimer(m.cfg.ShutdownTimeout)
	defer timer.Stop()
	select {
	case <-finished:
	case <-timer.C:
		m.logger.Info("shutdown timeout reached; cancelling running jobs")
		cancelWork()
		<-finished
	}
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), m.cfg.PersistTimeout)
	defer rcancel()
	if err := m.sched.release(rctx); err != nil {
		m.logger.Warn("release scheduler lease", "err", err)
	}
	m.events.closeAll() // a later publish (a Cancel after Run) sends to no one
	return nil
}

// now is the wall time, as job rows record it.
func (m *Manager) now() time.Time { return m.clk.Now().UTC().Truncate(time.Millisecond) }

// schedulerLoop runs the scheduler every Config.Interval (with jitter)
// until ctx ends.
func (m *Manager) schedulerLoop(ctx context.Context) {
	timer := time.NewTimer(jitter(m.cfg.Interval))
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		m.sched.runOnce(ctx)
		timer.Reset(jitter(m.cfg.Interval))
	}
}

// statusLoop keeps this replica's view of the other replicas fresh
// (DESIGN.md §7a: cross-replica status from the catalog, by bounded
// polling): every Config.PollInterval it runs the lease rescuer, the event
// hub's poll (waking the workers when another replica changed a job) and
// the throughput applier, until ctx ends.
func (m *Manager) statusLoop(ctx context.Context) {
	every(ctx, m.cfg.PollInterval, func() bool {
		m.rescuer.runOnce(ctx)
		if m.events.runOnce(ctx) {
			m.runs.wake() // jobs another replica queued may be claimable here
		}
		if _, err := m.throughput.runOnce(ctx); err != nil && ctx.Err() == nil {
			m.logger.Warn("apply the throughput cap", "err", err)
		}
		return true
	})
}

// every calls f every period d (the first call one period after the
// start) until ctx ends or f returns false: the loop of the status poll,
// the heartbeat and the lease keepers.
func every(ctx context.Context, d time.Duration, f func() bool) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !f() {
			return
		}
	}
}

// Started is closed once Run has recovered the previous process's jobs and
// accepts work.
func (m *Manager) Started() <-chan struct{} { return m.started }

// Compact requests one-off compactions of the given collections, or of all
// of them with all=true (exactly one of the two). One-offs bypass the minimum
// size and the dead-letter gate. Duplicate ids collapse. For a collection
// with a QUEUED compaction that job is returned (Created false) and claimed with
// the one-offs; with a RUNNING job, one follow-up job is queued. All or
// nothing for unknown ids: they fail the request with a *NotFoundError
// naming each, and nothing is enqueued. One transaction checks the ids and
// queues the jobs, shared with the concurrent calls (a group commit, see
// enqueuer). The actor ctx carries (audit.ActorFrom: the RPC's or the
// page's principal) becomes each new job's TriggeredBy, and the same
// transaction writes an audit event per collection (see enqueuer.enqueue);
// without one, nothing is audited. Errors: ErrInvalidArgument, *NotFoundError, ErrStopped (checked
// before the ids), ctx's error while the call waited for its turn (nothing
// queued), store errors (nothing queued).
func (m *Manager) Compact(ctx context.Context, ids []string, all bool, reason string) ([]Enqueued, error) {
	if all == (len(ids) > 0) {
		return nil, fmt.Errorf("give either collection ids or all, not both or neither: %w", ErrInvalidArgument)
	}
	call := catalog.EnqueueCall{SkipMissing: all}
	tp := traceParent(ctx) // the jobs' traces link to this request's
	if all {
		colls, err := m.store.ListCollections(ctx)
		if err != nil {
			return nil, fmt.Errorf("list collections: %w", err)
		}
		for _, c := range colls {
			call.Requests = append(call.Requests, catalog.JobRequest{CollectionID: c.ID, Kind: jobtype.KindCompaction, Trigger: catalog.TriggerOneOff, Reason: reason, TraceParent: tp})
		}
	} else {
		seen := make(map[string]bool, len(ids))
		for _, id := range ids {
			if seen[id] {
				continue
			}
			seen[id] = true
			call.Requests = append(call.Requests, catalog.JobRequest{CollectionID: id, Kind: jobtype.KindCompaction, Trigger: catalog.TriggerOneOff, Reason: reason, TraceParent: tp})
		}
	}
	if m.runs.isStopping() {
		return nil, ErrStopped
	}
	if len(call.Requests) == 0 {
		return []Enqueued{}, nil
	}
	// One transaction checks every id and queues every job, shared with
	// concurrent calls (see enqueuer).
	res := m.enq.enqueue(ctx, call)
	if missing := (*catalog.MissingCollectionsError)(nil); errors.As(res.Err, &missing) {
		return nil, &NotFoundError{IDs: missing.IDs}
	}
	if res.Err != nil {
		return nil, fmt.Errorf("queue one-off jobs: %w", res.Err)
	}
	out := make([]Enqueued, len(res.Jobs))
	for i, e := range res.Jobs {
		out[i] = Enqueued{Job: Job{Job: e.Job}, Created: e.Created}
		m.changedJob(e.Job)
	}
	return out, nil
}

// changedJob publishes a change this node made to a job that it does not
// run (queued, cancelled while queued) and wakes the workers.
func (m *Manager) changedJob(j catalog.Job) {
	m.events.changed(j)
	m.runs.wake()
}

// Cancel cancels a job on any replica: a QUEUED one ends CANCELLED at once;
// a RUNNING one stops at its next batch boundary (this node's at once,
// another replica's when its owner renews its lease), commits nothing and
// removes what it wrote. Cancel waits for that until ctx ends, then returns
// the job as it is, CancelRequested while it still runs. Errors:
// ErrNotFound; ErrFinished (wrapped, naming the state) when the job had
// finished, or finished otherwise than cancelled while Cancel waited (a
// commit is not interrupted).
func (m *Manager) Cancel(ctx context.Context, jobID string) (Job, error) {
	return m.cancel(ctx, jobID, NoteCancelled)
}

// cancel is Cancel with the note the job ends with.
func (m *Manager) cancel(ctx context.Context, jobID, note string) (Job, error) {
	r, first := m.runs.requestCancel(jobID, note, errCancelRequested)
	j, err := m.store.CancelJob(ctx, jobID, note)
	switch {
	case errors.Is(err, catalog.ErrJobFinished):
		if r != nil {
			<-r.done // it is ending here; report how it ended
		}
		got, gerr := m.Get(context.WithoutCancel(ctx), jobID)
		if gerr != nil {
			return Job{}, gerr
		}
		if first && got.State == catalog.JobCancelled {
			// This node's run, asked to cancel by this request first, ended
			// CANCELLED before the store's row took the request: the cancel
			// is done, not refused. (A run already asked by another, such
			// as a collection's deletion, ended by that request.)
			return got, nil
		}
		return got, fmt.Errorf("job %s is %s: %w", jobID, got.State, ErrFinished)
	case err != nil:
		return Job{}, err // the store's error names the job
	}
	if j.State == catalog.JobCancelled { // it was queued
		m.metrics.finished(j, nil)
		m.changedJob(j)
		return Job{Job: j}, nil
	}
	if err := m.waitEnd(ctx, jobID, r); err != nil {
		return Job{}, err
	}
	got, err := m.Get(context.WithoutCancel(ctx), jobID)
	if err == nil && got.State.Finished() && got.State != catalog.JobCancelled {
		// It ended (e.g. committed) before it reached a batch boundary.
		return got, fmt.Errorf("job %s finished %s before it could be cancelled: %w", jobID, got.State, ErrFinished)
	}
	return got, err
}

// waitEnd waits until job jobID has ended or ctx ends (which is not an
// error): for this node's run r, on its end; for another replica's job, by
// reading it every Config.PollInterval.
func (m *Manager) waitEnd(ctx context.Context, jobID string, r *run) error {
	if r != nil {
		select {
		case <-r.done:
		case <-ctx.Done():
		}
		return nil
	}
	t := time.NewTicker(m.cfg.PollInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		j, err := m.store.GetJob(ctx, jobID)
		if err != nil && ctx.Err() == nil {
			return err
		}
		if err != nil || j.State.Finished() {
			return nil
		}
	}
}

// RefreshBacklog reads one collection from the store and updates the backlog
// gauges (compactor_uncompacted_records, compactor_collections_dead_lettered)
// with it, so that they follow pushes and commits without waiting for the
// next scheduler run. The API calls it after every accepted push; the
// manager calls it at the end of every job. A collection that no longer
// exists drops out. Errors are the store's (the gauges are left as they
// were).
func (m *Manager) RefreshBacklog(ctx context.Context, collectionID string) error {
	c, err := m.store.GetCollection(ctx, collectionID)
	if errors.Is(err, catalog.ErrNotFound) {
		m.metrics.backlogs.drop(collectionID)
		return nil
	}
	if err != nil {
		return fmt.Errorf("read backlog of %s: %w", collectionID, err)
	}
	m.metrics.backlogs.update(c)
	return nil
}

// Get returns a job by id, with progress when it runs. ErrNotFound when
// unknown.
func (m *Manager) Get(ctx context.Context, jobID string) (Job, error) {
	j, err := m.store.GetJob(ctx, jobID)
	if err != nil {
		return Job{}, err // the store's error names the job
	}
	return m.runs.view(j), nil
}

// List returns jobs matching f from the history, newest first, with the
// state and progress of running ones.
func (m *Manager) List(ctx context.Context, f catalog.JobFilter) ([]Job, error) {
	rows, err := m.store.ListJobs(ctx, f)
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	out := make([]Job, len(rows))
	for i, j := range rows {
		out[i] = m.runs.view(j)
	}
	return out, nil
}

// Active returns the QUEUED and RUNNING jobs of every replica: running
// first (oldest start first), then queued in the order they will be claimed
// (catalog.ListQueue, the one place that order is written).
func (m *Manager) Active(ctx context.Context) ([]Job, error) {
	running, err := m.store.ListJobs(ctx, catalog.JobFilter{States: []catalog.JobState{catalog.JobRunning}})
	if err != nil {
		return nil, fmt.Errorf("list running jobs: %w", err)
	}
	queued, err := m.Queue(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Job, 0, len(running)+len(queued))
	for i := len(running) - 1; i >= 0; i-- { // ListJobs is newest first
		out = append(out, m.runs.view(running[i]))
	}
	return append(out, queued...), nil
}

// Queue returns the QUEUED jobs of every replica in the order they will be
// claimed (catalog.ListQueue, the one place that order is written).
func (m *Manager) Queue(ctx context.Context) ([]Job, error) {
	queued, err := m.store.ListQueue(ctx, 0)
	if err != nil {
		return nil, fmt.Errorf("list queue: %w", err)
	}
	out := make([]Job, len(queued))
	for i, j := range queued {
		out[i] = Job{Job: j}
	}
	return out, nil
}

// RebuildIndex queues a one-off job of kind jobtype.KindIndexRebuild for a
// collection, with params (jobtype.IndexRebuildParams, encoded as the
// job's params; "" keeps the collection's). A collection with a rebuild
// queued already gets that job back (Created false), with its own params
// (cancel it to queue another); a queued compaction of it is a different
// job. The caller checks the params against the collection (the executor
// checks them again when the job runs). Errors: ErrInvalidArgument (empty
// id), *NotFoundError, ErrStopped, store errors (nothing queued).
func (m *Manager) RebuildIndex(ctx context.Context, collectionID, params, reason string) (Enqueued, error) {
	if collectionID == "" {
		return Enqueued{}, fmt.Errorf("give the collection whose index to rebuild: %w", ErrInvalidArgument)
	}
	if m.runs.isStopping() {
		return Enqueued{}, ErrStopped
	}
	res := m.enq.enqueue(ctx, catalog.EnqueueCall{Requests: []catalog.JobRequest{{
		CollectionID: collectionID, Kind: jobtype.KindIndexRebuild, Params: params, Trigger: catalog.TriggerOneOff,
		Reason: reason, TraceParent: traceParent(ctx),
	}}})
	if missing := (*catalog.MissingCollectionsError)(nil); errors.As(res.Err, &missing) {
		return Enqueued{}, &NotFoundError{IDs: missing.IDs}
	}
	if res.Err != nil {
		return Enqueued{}, fmt.Errorf("queue index rebuild: %w", res.Err)
	}
	e := res.Jobs[0]
	m.changedJob(e.Job)
	return Enqueued{Job: Job{Job: e.Job}, Created: e.Created}, nil
}

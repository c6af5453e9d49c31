// Package manager is the compaction manager (DESIGN.md §5): the scheduler that
// turns backlogs into SCHEDULED jobs, the one-off requests of operators, a
// queue with dedupe (at most one QUEUED job per collection, one follow-up
// behind a RUNNING one), a bounded pool of workers, continuation of backlogs
// larger than one job, failure accounting with exponential backoff and a
// dead-letter state, cancel, watch, and the persisted job history.
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
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/compactorhq/compactor/internal/catalog"
)

// Store is what the manager needs from the catalog. *catalog.Catalog
// implements it; its methods' errors and semantics are the catalog's.
type Store interface {
	GetCollection(ctx context.Context, id string) (catalog.Collection, error)
	ListCollections(ctx context.Context) ([]catalog.Collection, error)
	InsertJob(ctx context.Context, j catalog.Job) error
	UpdateJob(ctx context.Context, j catalog.Job) error
	GetJob(ctx context.Context, id string) (catalog.Job, error)
	ListJobs(ctx context.Context, f catalog.JobFilter) ([]catalog.Job, error)
	MarkInterrupted(ctx context.Context) ([]catalog.Job, error)
	PruneJobs(ctx context.Context, keep int, olderThan time.Time) (int, error)
	RecordFailure(ctx context.Context, collectionID string, deadLetterAfter int) (int, bool, error)
	RecordSuccess(ctx context.Context, collectionID string) error
}

// Progress of a running job.
type Progress struct {
	Phase        string
	RecordsRead  int64 // log records read so far
	RecordsTotal int64 // log records the job reads
	BytesWritten int64
}

// Outcome is what an executor reports of one compaction.
type Outcome struct {
	OffsetStart, OffsetEnd int64 // log offsets (start, end] compacted
	RecordsRead            int64
	RecordsWritten         int64
	BytesWritten           int64
	VersionBefore          int64
	VersionAfter           int64 // == VersionBefore when nothing was committed
	// Remaining is the backlog (records) left beyond OffsetEnd: when
	// positive the manager queues a continuation job at once.
	Remaining int64
	Note      string
}

// Committed reports whether the compaction committed a new version.
func (o Outcome) Committed() bool { return o.VersionAfter != o.VersionBefore }

// Executor runs compactions. The manager calls Execute from its workers, one
// job per collection at a time.
type Executor interface {
	// Execute compacts collectionID, calling progress as it goes. When it
	// commits, it writes the job row finish(outcome) returns in the commit
	// transaction. It must return promptly (at a batch boundary) with ctx's
	// error when ctx ends, having committed nothing.
	Execute(ctx context.Context, collectionID string, progress func(Progress), finish func(Outcome) catalog.Job) (Outcome, error)
	// Transient reports whether err says nothing about the collection
	// (storage unavailable, a lost compare-and-swap, shutdown): such
	// failures back off but never count toward the dead-letter state.
	Transient(err error) bool
	// GC removes superseded versions and orphan blocks of a collection.
	GC(ctx context.Context, collectionID string) error
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
// running job.
type Job struct {
	catalog.Job
	Progress        *Progress // nil unless RUNNING
	CancelRequested bool      // RUNNING, and an operator asked to cancel it
}

// Enqueued is one result of Compact.
type Enqueued struct {
	Job     Job
	Created bool // false: an already queued job was returned
}

// entry is an active (QUEUED or RUNNING) job.
type entry struct {
	job        catalog.Job
	progress   *Progress
	oldest     time.Time // oldest uncompacted record at enqueue, for ordering
	oneOff     bool      // priority: a one-off was asked for this job
	cancel     context.CancelFunc
	cancelReq  bool          // an operator cancelled it
	done       chan struct{} // closed when the job ends
	enqueuedAt time.Time
	seq        uint64 // enqueue order, the last tie-break: first in, first out
	// pending: reserved (it holds its collection's queued slot, so dedupe
	// sees it) but its row is not inserted yet; not runnable, not in
	// m.active. See reserveLocked and persist.
	pending bool
}

// collState is the manager's in-memory state of one collection.
type collState struct {
	queued   *entry
	running  *entry
	failures int       // consecutive failures, transient included (backoff)
	retryAt  time.Time // no scheduled job before
}

// Manager schedules and runs compactions. Create it with New, start it with
// Run; Compact, Cancel, Get, List and Watch may be called while it runs.
type Manager struct {
	store   Store
	exec    Executor
	cfg     Config
	logger  *slog.Logger
	metrics *metrics
	tracer  trace.Tracer

	mu       sync.Mutex
	colls    map[string]*collState
	active   map[string]*entry // by job id
	changed  chan struct{}     // closed and replaced on every change of the queue
	watchers map[*watcher]struct{}
	running  bool          // Run is accepting work
	started  chan struct{} // closed once Run has recovered and accepts work
	stopping bool
	seq      uint64 // last entry.seq given
}

// New returns a Manager. reg receives its metrics (nil: not registered);
// logger nil discards logs.
func New(store Store, exec Executor, cfg Config, reg prometheus.Registerer, logger *slog.Logger) (*Manager, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Node == "" {
		cfg.Node, _ = os.Hostname()
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Manager{
		store:    store,
		exec:     exec,
		cfg:      cfg,
		logger:   logger,
		metrics:  newMetrics(reg, cfg),
		tracer:   tracerOf(cfg.TracerProvider),
		colls:    make(map[string]*collState),
		active:   make(map[string]*entry),
		changed:  make(chan struct{}),
		started:  make(chan struct{}),
		watchers: make(map[*watcher]struct{}),
	}, nil
}

func (m *Manager) coll(id string) *collState {
	cs := m.colls[id]
	if cs == nil {
		cs = &collState{}
		m.colls[id] = cs
	}
	return cs
}

// signal wakes the workers; m.mu must be held.
func (m *Manager) signal() {
	close(m.changed)
	m.changed = make(chan struct{})
}

// Run recovers the jobs of a previous process (RUNNING ones are marked FAILED
// "interrupted", QUEUED ones are queued again), then runs the scheduler and
// the workers until ctx ends. At shutdown it stops scheduling, lets running
// jobs finish up to Config.ShutdownTimeout, then cancels them (they end
// CANCELLED, not counted as failures). It returns nil after a clean shutdown,
// or the error that prevented the start.
func (m *Manager) Run(ctx context.Context) error {
	if err := m.recover(ctx); err != nil {
		return err
	}
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

	m.mu.Lock()
	m.running = true
	close(m.started)
	m.mu.Unlock()

	var wg sync.WaitGroup
	for range m.cfg.Workers {
		wg.Go(func() { m.worker(ctx, workCtx) })
	}
	wg.Go(func() { m.schedulerLoop(ctx) })

	<-ctx.Done()
	m.mu.Lock()
	m.stopping = true
	m.signal()
	m.mu.Unlock()

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
	m.mu.Lock()
	m.running = false
	for w := range m.watchers {
		delete(m.watchers, w) // a later publish (a Cancel after Run) sends to no one
		w.close()
	}
	m.mu.Unlock()
	return nil
}

// recover marks the jobs of a dead process and re-queues QUEUED ones.
func (m *Manager) recover(ctx context.Context) error {
	interrupted, err := m.store.MarkInterrupted(ctx)
	if err != nil {
		return fmt.Errorf("mark interrupted jobs: %w", err)
	}
	for _, j := range interrupted {
		m.logger.Warn("job interrupted by a previous stop", "job", j.ID, "collection", j.CollectionID)
		// Counted, but not timed: its "duration" would span the outage.
		m.metrics.jobs.WithLabelValues(label(j.Trigger), label(j.State)).Inc()
	}
	var queued []catalog.Job
	for f := (catalog.JobFilter{States: []catalog.JobState{catalog.JobQueued}, Limit: 1000}); ; {
		page, err := m.store.ListJobs(ctx, f)
		if err != nil {
			return fmt.Errorf("list queued jobs: %w", err)
		}
		queued = append(queued, page...)
		if len(page) < f.Limit {
			break
		}
		last := page[len(page)-1]
		f.Before = catalog.JobCursor{CreatedAt: last.CreatedAt, ID: last.ID}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	slices.Reverse(queued) // oldest first
	for _, j := range queued {
		cs := m.coll(j.CollectionID)
		if _, ok := m.active[j.ID]; ok || cs.queued != nil && cs.queued.job.ID == j.ID {
			continue // queued by a Compact that came in while this ran
		}
		if cs.queued != nil {
			// Dedupe across restarts: a second queued job is superfluous.
			j.State, j.FinishedAt, j.Note = catalog.JobCancelled, m.now(), "duplicate of a queued job after restart"
			if err := m.store.UpdateJob(ctx, j); err != nil {
				return fmt.Errorf("cancel duplicate queued job %s: %w", j.ID, err)
			}
			continue
		}
		m.seq++
		e := &entry{job: j, oneOff: j.Trigger == catalog.TriggerOneOff, done: make(chan struct{}), enqueuedAt: j.CreatedAt, seq: m.seq}
		cs.queued = e
		m.active[j.ID] = e
	}
	m.metrics.setStates(m.active)
	return nil
}

func (m *Manager) now() time.Time { return time.Now().UTC().Truncate(time.Millisecond) }

// Started is closed once Run has recovered the previous process's jobs and
// accepts work.
func (m *Manager) Started() <-chan struct{} { return m.started }

// Compact requests one-off compactions of the given collections, or of all
// of them with all=true (exactly one of the two). One-offs bypass the minimum
// size and the dead-letter gate. Duplicate ids collapse. For a collection
// with a QUEUED job that job is returned (Created false); with a RUNNING job,
// one follow-up job is queued. All or nothing: unknown ids fail the request
// with a *NotFoundError naming each, and nothing is enqueued. Errors:
// ErrInvalidArgument, *NotFoundError, ErrStopped, store errors.
func (m *Manager) Compact(ctx context.Context, ids []string, all bool, reason string) ([]Enqueued, error) {
	if all == (len(ids) > 0) {
		return nil, fmt.Errorf("give either collection ids or all, not both or neither: %w", ErrInvalidArgument)
	}
	var targets []string
	if all {
		colls, err := m.store.ListCollections(ctx)
		if err != nil {
			return nil, fmt.Errorf("list collections: %w", err)
		}
		for _, c := range colls {
			targets = append(targets, c.ID)
		}
	} else {
		seen := make(map[string]bool, len(ids))
		var unknown []string
		for _, id := range ids {
			if seen[id] {
				continue
			}
			seen[id] = true
			if _, err := m.store.GetCollection(ctx, id); errors.Is(err, catalog.ErrNotFound) {
				unknown = append(unknown, id)
				continue
			} else if err != nil {
				return nil, fmt.Errorf("get collection %s: %w", id, err)
			}
			targets = append(targets, id)
		}
		if len(unknown) > 0 {
			return nil, &NotFoundError{IDs: unknown}
		}
	}
	m.mu.Lock()
	if m.stopping {
		m.mu.Unlock()
		return nil, ErrStopped
	}
	out := make([]Enqueued, len(targets))
	var reserved []*entry
	slot := map[*entry]int{}
	for i, id := range targets {
		cs := m.coll(id)
		if cs.queued != nil {
			cs.queued.oneOff = true // the operator's request runs first
			out[i] = Enqueued{Job: m.snapshot(cs.queued)}
			continue
		}
		e := m.reserveLocked(id, catalog.TriggerOneOff, reason, time.Time{}, "")
		reserved = append(reserved, e)
		slot[e] = i
	}
	m.mu.Unlock()
	inserted, err := m.persist(ctx, reserved...)
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, e := range inserted {
		out[slot[e]] = Enqueued{Job: m.snapshot(e), Created: true}
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// reserveLocked creates a QUEUED job for a collection with no queued job and
// takes the collection's queued slot with it, pending; persist inserts its
// row. m.mu must be held. The row is inserted without the lock, so that a
// slow catalog write does not stall progress reports, reads and watches.
func (m *Manager) reserveLocked(collectionID string, trigger catalog.Trigger, reason string, oldest time.Time, continues string) *entry {
	cs := m.coll(collectionID)
	now := m.now()
	j := catalog.Job{
		ID:           uuid.NewString(),
		CollectionID: collectionID,
		Trigger:      trigger,
		State:        catalog.JobQueued,
		Reason:       reason,
		Attempt:      cs.failures + 1,
		CreatedAt:    now,
		Continues:    continues,
	}
	m.seq++
	e := &entry{job: j, oldest: oldest, oneOff: trigger == catalog.TriggerOneOff, done: make(chan struct{}), enqueuedAt: now, seq: m.seq, pending: true}
	cs.queued = e
	return e
}

// persist inserts the rows of reserved entries, then makes the inserted
// ones active (runnable, visible, published) and gives the queued slot of
// the others back. It returns the inserted entries and the insert errors.
// m.mu must not be held.
func (m *Manager) persist(ctx context.Context, es ...*entry) ([]*entry, error) {
	var errs []error
	ok := make([]bool, len(es))
	for i, e := range es {
		if err := m.store.InsertJob(ctx, e.job); err != nil {
			errs = append(errs, fmt.Errorf("insert job for collection %s: %w", e.job.CollectionID, err))
			continue
		}
		ok[i] = true
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var inserted []*entry
	for i, e := range es {
		cs := m.coll(e.job.CollectionID)
		if !ok[i] {
			if cs.queued == e {
				cs.queued = nil
			}
			continue
		}
		e.pending = false
		m.active[e.job.ID] = e
		inserted = append(inserted, e)
		m.publish(e)
	}
	m.metrics.setStates(m.active)
	m.signal()
	return inserted, errors.Join(errs...)
}

// next blocks until a queued job can run (its collection has no running
// job) and marks it RUNNING, or returns nil when ctx ends or the manager
// stops.
func (m *Manager) next(ctx context.Context) *entry {
	for {
		m.mu.Lock()
		if m.stopping {
			m.mu.Unlock()
			return nil
		}
		var best *entry
		for _, cs := range m.colls {
			e := cs.queued
			if e == nil || e.pending || cs.running != nil {
				continue
			}
			if best == nil || before(e, best) {
				best = e
			}
		}
		if best != nil {
			cs := m.colls[best.job.CollectionID]
			cs.queued, cs.running = nil, best
			best.job.State = catalog.JobRunning
			best.job.StartedAt = m.now()
			best.job.Node = m.cfg.Node
			best.progress = &Progress{Phase: "starting"}
			m.metrics.setStates(m.active)
			m.mu.Unlock()
			return best
		}
		ch := m.changed
		m.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil
		}
	}
}

// before orders the queue: one-offs first, then the oldest backlog, then
// first in, first out.
func before(a, b *entry) bool {
	if a.oneOff != b.oneOff {
		return a.oneOff
	}
	if c := cmpTime(a.oldest, b.oldest); c != 0 {
		return c < 0
	}
	return a.seq < b.seq
}

// cmpTime orders times with the zero time last.
func cmpTime(a, b time.Time) int {
	switch {
	case a.IsZero() && b.IsZero():
		return 0
	case a.IsZero():
		return 1
	case b.IsZero():
		return -1
	}
	return a.Compare(b)
}

func (m *Manager) worker(ctx, workCtx context.Context) {
	for {
		e := m.next(ctx)
		if e == nil {
			return
		}
		m.run(workCtx, e)
	}
}

// run executes one job and records its end.
func (m *Manager) run(workCtx context.Context, e *entry) {
	jobCtx, cancel := context.WithCancel(workCtx)
	defer cancel()
	jobCtx, span := m.startJobSpan(jobCtx, e.job)
	defer span.End()
	log := m.logger.With("job", e.job.ID, "collection", e.job.CollectionID)
	if sc := span.SpanContext(); sc.IsValid() {
		log = log.With("trace_id", sc.TraceID().String())
	}
	m.mu.Lock()
	e.cancel = cancel
	cancelled := e.cancelReq
	started := e.job
	m.mu.Unlock()
	if cancelled {
		cancel()
	}
	m.metrics.queueWait.Observe(started.StartedAt.Sub(e.enqueuedAt).Seconds())
	if err := m.store.UpdateJob(jobCtx, started); err != nil {
		log.Warn("persist running job", "err", err)
	}
	m.publishLocked(e)

	var committed catalog.Job // the row written with the commit, if any
	finish := func(o Outcome) catalog.Job {
		m.mu.Lock()
		defer m.mu.Unlock()
		j := e.job
		applyOutcome(&j, o)
		j.State = catalog.JobSucceeded
		j.FinishedAt = m.now()
		committed = j
		return j
	}
	outcome, err := m.execute(jobCtx, e, finish)

	m.mu.Lock()
	j := &e.job
	applyOutcome(j, outcome)
	j.FinishedAt = m.now()
	if err == nil && outcome.Committed() {
		j.FinishedAt = committed.FinishedAt // as persisted
	}
	cs := m.colls[j.CollectionID]
	var countFailure bool
	switch {
	case err == nil:
		j.State = catalog.JobSucceeded
		cs.failures, cs.retryAt = 0, time.Time{}
	case e.cancelReq:
		j.State, j.Note = catalog.JobCancelled, "cancelled by operator"
	case workCtx.Err() != nil:
		j.State, j.Note = catalog.JobCancelled, "cancelled at shutdown"
	default:
		j.State = catalog.JobFailed
		j.Error = err.Error()
		cs.failures++
		cs.retryAt = m.now().Add(m.backoff(cs.failures))
		countFailure = !m.exec.Transient(err)
		if !countFailure {
			j.Note = "transient failure"
		}
	}
	final := *j
	m.mu.Unlock()

	// Persist the end. A committed success already wrote the row in the
	// commit transaction; everything else is written here, with a context
	// that outlives shutdown.
	pctx, pcancel := context.WithTimeout(context.WithoutCancel(workCtx), 10*time.Second)
	defer pcancel()
	if !(err == nil && outcome.Committed()) {
		if perr := m.store.UpdateJob(pctx, final); perr != nil {
			log.Error("persist finished job", "err", perr)
		}
	}
	switch {
	case err == nil:
		if !outcome.Committed() {
			if perr := m.store.RecordSuccess(pctx, final.CollectionID); perr != nil {
				log.Warn("clear failure count", "err", perr)
			}
		}
	case countFailure:
		n, dead, ferr := m.store.RecordFailure(pctx, final.CollectionID, m.cfg.DeadLetterAfter)
		if ferr != nil {
			log.Error("record failure", "err", ferr)
		}
		if dead {
			log.Error("collection dead-lettered", "failures", n, "err", err)
		}
	}
	switch final.State {
	case catalog.JobFailed:
		log.Warn("compaction failed", "err", err, "transient", !countFailure)
	case catalog.JobSucceeded:
		log.Info("compaction succeeded", "records_read", final.RecordsRead, "version", final.VersionAfter,
			"duration", final.FinishedAt.Sub(final.StartedAt))
	default:
		log.Info("compaction cancelled", "note", final.Note)
	}
	endJobSpan(span, final, err)
	m.metrics.finished(final, err)
	// Before the end is published, so that whoever sees it reads the new
	// backlog too.
	if berr := m.RefreshBacklog(pctx, final.CollectionID); berr != nil {
		log.Warn("read backlog after job", "err", berr)
	}
	m.finish(pctx, e, cs, final, outcome)

	// GC after the continuation is queued (it may run on another worker
	// meanwhile: GC spares blobs younger than the grace period), with a
	// deadline of its own: a large listing must not starve the rest.
	if err == nil && outcome.Committed() {
		gctx, gcancel := context.WithTimeout(trace.ContextWithSpan(context.WithoutCancel(workCtx), span), gcTimeout)
		defer gcancel()
		if gerr := m.exec.GC(gctx, final.CollectionID); gerr != nil {
			log.Warn("gc after compaction", "err", gerr)
		}
	}
}

// gcTimeout bounds the GC pass after a compaction.
const gcTimeout = 5 * time.Minute

// finish removes a job that ended from the active set, queues its
// continuation, and publishes its end.
func (m *Manager) finish(ctx context.Context, e *entry, cs *collState, final catalog.Job, outcome Outcome) {
	m.mu.Lock()
	cs.running = nil
	e.progress = nil
	delete(m.active, final.ID)
	close(e.done)
	// Continuation: a backlog larger than one job goes on at once. It is
	// queued before the end of this job is published, so a watcher that
	// sees the end finds the continuation already there. At shutdown it is
	// still queued (persisted), and the next start runs it.
	var cont *entry
	if final.State == catalog.JobSucceeded && outcome.Remaining > 0 && cs.queued == nil {
		reason := fmt.Sprintf("continues job %.8s: %d records remain", final.ID, outcome.Remaining)
		cont = m.reserveLocked(final.CollectionID, final.Trigger, reason, time.Time{}, final.ID)
	}
	m.mu.Unlock()
	if cont != nil {
		if _, err := m.persist(ctx, cont); err != nil {
			m.logger.Error("queue continuation", "job", final.ID, "collection", final.CollectionID, "err", err)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.publish(e)
	m.metrics.setStates(m.active)
	m.signal()
}

// execute calls the executor, turning a panic into an error of this job.
func (m *Manager) execute(ctx context.Context, e *entry, finish func(Outcome) catalog.Job) (o Outcome, err error) {
	defer func() {
		if r := recover(); r != nil {
			m.logger.Error("compaction panicked", "job", e.job.ID, "collection", e.job.CollectionID, "panic", r)
			err = fmt.Errorf("compaction panicked: %v", r)
		}
	}()
	progress := func(p Progress) {
		m.mu.Lock()
		pp := p
		e.progress = &pp
		m.mu.Unlock()
		m.publishLocked(e)
	}
	return m.exec.Execute(ctx, e.job.CollectionID, progress, finish)
}

func applyOutcome(j *catalog.Job, o Outcome) {
	j.OffsetStart, j.OffsetEnd = o.OffsetStart, o.OffsetEnd
	j.RecordsRead, j.RecordsWritten, j.BytesWritten = o.RecordsRead, o.RecordsWritten, o.BytesWritten
	j.VersionBefore, j.VersionAfter = o.VersionBefore, o.VersionAfter
	if o.Note != "" {
		j.Note = o.Note
	}
}

// backoff is the delay before the n-th consecutive retry (n >= 1).
func (m *Manager) backoff(n int) time.Duration {
	d := m.cfg.BackoffBase
	for i := 1; i < n && d < m.cfg.BackoffMax; i++ {
		d *= 2
	}
	return min(d, m.cfg.BackoffMax)
}

// Cancel cancels a job: a QUEUED one ends CANCELLED at once; a RUNNING one
// stops at its next batch boundary, commits nothing and removes what it
// wrote (Cancel waits for that until ctx ends, then returns the job as it
// is, CancelRequested while it still runs). Errors: ErrNotFound;
// ErrFinished (wrapped, naming the state) when the job had finished, or
// finished otherwise than cancelled while Cancel waited (a commit is not
// interrupted).
func (m *Manager) Cancel(ctx context.Context, jobID string) (Job, error) {
	m.mu.Lock()
	e, ok := m.active[jobID]
	if !ok {
		m.mu.Unlock()
		j, err := m.store.GetJob(ctx, jobID)
		if err != nil {
			return Job{}, err // the store's error names the job
		}
		if !j.State.Finished() { // its row is in, it is being queued
			return Job{Job: j}, fmt.Errorf("job %s is being queued; retry: %w", jobID, ErrStopped)
		}
		return Job{Job: j}, fmt.Errorf("job %s is %s: %w", jobID, j.State, ErrFinished)
	}
	cs := m.colls[e.job.CollectionID]
	if e.job.State == catalog.JobQueued {
		cs.queued = nil
		delete(m.active, jobID)
		e.job.State, e.job.FinishedAt, e.job.Note = catalog.JobCancelled, m.now(), "cancelled by operator"
		j := e.job
		close(e.done)
		m.metrics.setStates(m.active)
		m.signal()
		m.publish(e)
		m.mu.Unlock()
		m.metrics.finished(j, nil)
		if err := m.store.UpdateJob(context.WithoutCancel(ctx), j); err != nil {
			return Job{Job: j}, fmt.Errorf("persist cancelled job %s: %w", jobID, err)
		}
		return Job{Job: j}, nil
	}
	e.cancelReq = true
	if e.cancel != nil {
		e.cancel()
	}
	done := e.done
	m.mu.Unlock()
	select {
	case <-done:
	case <-ctx.Done():
	}
	j, err := m.Get(context.WithoutCancel(ctx), jobID)
	if err == nil && j.State.Finished() && j.State != catalog.JobCancelled {
		// It ended (e.g. committed) before it reached a batch boundary.
		return j, fmt.Errorf("job %s finished %s before it could be cancelled: %w", jobID, j.State, ErrFinished)
	}
	return j, err
}

// Forget drops the manager's in-memory state of a deleted collection
// (backoff, failure streak). Its active jobs should be cancelled first; a
// collection with an active job is left alone.
func (m *Manager) Forget(collectionID string) {
	m.metrics.backlogs.drop(collectionID)
	m.mu.Lock()
	defer m.mu.Unlock()
	if cs := m.colls[collectionID]; cs != nil && cs.queued == nil && cs.running == nil {
		delete(m.colls, collectionID)
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
	m.mu.Lock()
	if e, ok := m.active[jobID]; ok {
		j := m.snapshot(e)
		m.mu.Unlock()
		return j, nil
	}
	m.mu.Unlock()
	j, err := m.store.GetJob(ctx, jobID)
	if err != nil {
		return Job{}, err // the store's error names the job
	}
	return Job{Job: j}, nil
}

// List returns jobs matching f from the history, newest first, with the
// live state and progress of active ones.
func (m *Manager) List(ctx context.Context, f catalog.JobFilter) ([]Job, error) {
	rows, err := m.store.ListJobs(ctx, f)
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	out := make([]Job, len(rows))
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, j := range rows {
		if e, ok := m.active[j.ID]; ok {
			out[i] = m.snapshot(e)
		} else {
			out[i] = Job{Job: j}
		}
	}
	return out, nil
}

// Active returns the QUEUED and RUNNING jobs, running first, then in the
// order they would run.
func (m *Manager) Active() []Job {
	m.mu.Lock()
	defer m.mu.Unlock()
	es := make([]*entry, 0, len(m.active))
	for _, e := range m.active {
		es = append(es, e)
	}
	slices.SortFunc(es, func(a, b *entry) int {
		if a.job.State != b.job.State {
			return cmp.Compare(stateRank(a.job.State), stateRank(b.job.State))
		}
		if before(a, b) {
			return -1
		}
		return 1
	})
	out := make([]Job, len(es))
	for i, e := range es {
		out[i] = m.snapshot(e)
	}
	return out
}

func stateRank(s catalog.JobState) int {
	if s == catalog.JobRunning {
		return 0
	}
	return 1
}

// snapshot copies an entry for callers; m.mu must be held.
func (m *Manager) snapshot(e *entry) Job {
	j := Job{Job: e.job, CancelRequested: e.cancelReq && e.job.State == catalog.JobRunning}
	if e.progress != nil && e.job.State == catalog.JobRunning {
		p := *e.progress
		j.Progress = &p
	}
	return j
}

// jitter returns d plus a random extra of up to 10%.
func jitter(d time.Duration) time.Duration {
	return d + time.Duration(rand.Int64N(int64(d)/10+1))
}

package manager

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/jobtype"
)

// A job's life on this node, after River's job executor (execute, then
// reportResult): a worker claims the job (worker), runs it under its lease
// (run: execute = prepare, then commit or abort), classifies how it ended
// (classifyEnd, a pure function), builds the row it ends with once
// (endRow), and reports the end in one ordered list of steps (report).

// worker claims jobs from the queue in the catalog and runs them, one at a
// time, until ctx ends. An idle worker wakes when this node queues a job,
// and every Config.PollInterval for jobs other replicas queued.
func (m *Manager) worker(ctx, workCtx context.Context) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		changed, stopping := m.runs.idle()
		if stopping || ctx.Err() != nil {
			return
		}
		j, err := m.claim(ctx)
		if err == nil {
			m.run(workCtx, j)
			continue
		}
		if !errors.Is(err, catalog.ErrNoJob) && ctx.Err() == nil {
			m.logger.Warn("claim job", "err", err)
		}
		timer.Reset(jitter(m.cfg.PollInterval))
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-timer.C:
		}
	}
}

// run executes one claimed job under its lease keeper, then reports its
// end. workCtx ends at the end of the shutdown grace period.
func (m *Manager) run(workCtx context.Context, j catalog.Job) {
	jobCtx, cancel := context.WithCancelCause(workCtx)
	defer cancel(nil)
	jobCtx, span := m.startJobSpan(jobCtx, j)
	defer span.End()
	log := m.logger.With("job", j.ID, "collection", j.CollectionID, "kind", string(kindOf(j)))
	if sc := span.SpanContext(); sc.IsValid() {
		log = log.With("trace_id", sc.TraceID().String())
	}
	r := m.begin(j, cancel)
	defer m.metrics.running.Dec()

	keeperCtx, stopKeeper := context.WithCancel(jobCtx)
	keeperDone := make(chan struct{})
	go func() { defer close(keeperDone); m.keepLease(keeperCtx, r) }()
	exec, err := m.executorOf(j)
	x := executed{err: err}
	if err == nil {
		m.predict(jobCtx, exec, r)
		x = m.execute(jobCtx, exec, r)
	}
	stopKeeper()
	<-keeperDone

	claimed, cancelReq, cancelNote := m.runs.job(r)
	class := classifyEnd(endFacts{
		Err:             x.err,
		Cause:           context.Cause(jobCtx),
		Committed:       x.committed != nil,
		CancelRequested: cancelReq,
		CancelNote:      cancelNote,
		Shutdown:        workCtx.Err() != nil,
		Class:           failureClass(exec, x),
		Node:            m.cfg.Node,
	})
	e := &jobEnd{r: r, exec: exec, class: class, outcome: x.outcome, err: x.err, log: log, span: span}
	if x.committed != nil {
		e.row = *x.committed // as persisted with the commit
	} else {
		e.row = endRow(claimed, x.outcome, class, m.runs.endTime(r))
	}
	m.report(workCtx, e)
}

// begin registers this node's run of job j and publishes its start.
func (m *Manager) begin(j catalog.Job, cancel context.CancelCauseFunc) *run {
	r, snap := m.runs.add(j, cancel)
	m.events.started(snap)
	m.metrics.queueWait.Observe(j.StartedAt.Sub(j.CreatedAt).Seconds())
	m.metrics.running.Inc()
	return r
}

// executed is what execute did.
type executed struct {
	outcome Outcome
	// committed is the row written with the commit, nil when nothing was
	// committed.
	committed *catalog.Job
	err       error
	panicked  bool // err is a recovered panic
}

// failureClass is the class of x's error (nil: ""): a recovered panic is
// internal; otherwise the executor's Classifier decides, or, without
// one, a Transient error is infrastructure and any other internal (an
// unclassified error is taken for a bug: it counts toward the dead-letter
// state, see compaction.Classify). A job that no executor runs here is
// internal too.
func failureClass(exec Executor, x executed) jobtype.FailureClass {
	switch {
	case x.err == nil:
		return ""
	case x.panicked || exec == nil:
		return jobtype.FailureInternal
	}
	if c, ok := exec.(Classifier); ok {
		if class := c.Classify(x.err); class != "" {
			return class
		}
	}
	if exec.Transient(x.err) {
		return jobtype.FailureInfrastructure
	}
	return jobtype.FailureInternal
}

// execute runs the job's work on exec, the executor of its kind: it
// prepares it; unless ctx ended meanwhile (then the prepared work is
// aborted), its commit writes the job's row SUCCEEDED in the same
// transaction, fenced by the lease. A panic fails the job with an error.
func (m *Manager) execute(ctx context.Context, exec Executor, r *run) (x executed) {
	defer func() {
		if p := recover(); p != nil {
			m.logger.Error("job panicked", "job", r.job.ID, "collection", r.job.CollectionID, "kind", string(kindOf(r.job)), "panic", p)
			x.err, x.panicked = fmt.Errorf("%s panicked: %v", kindOf(r.job), p), true
		}
	}()
	claimed, _, _ := m.runs.job(r)
	p, err := exec.Prepare(ctx, claimed, func(p Progress) { m.progressed(ctx, r, p) })
	if p != nil {
		x.outcome = p.Outcome()
	}
	if err != nil {
		x.err = err
		return x
	}
	if err := ctx.Err(); err != nil {
		// The last point where cancellation is honoured.
		if aerr := p.Abort(ctx); aerr != nil {
			m.logger.Warn("abort prepared job", "job", r.job.ID, "collection", r.job.CollectionID, "err", aerr)
		}
		x.outcome = p.Outcome()
		x.err = fmt.Errorf("before commit: %w", err)
		return x
	}
	if !x.outcome.Committed() {
		return x // nothing to commit: the end is persisted by report
	}
	planned, _, _ := m.runs.job(r)
	row := endRow(planned, x.outcome, endClass{State: catalog.JobSucceeded}, m.runs.endTime(r))
	x.err = p.Commit(ctx, row)
	x.outcome = p.Outcome()
	if x.err == nil {
		x.committed = &row
	}
	return x
}

// progressed takes a progress report of run r's executor: it keeps the
// plan on the job, publishes the progress and, once per phase, persists it;
// a report carrying the job's estimate (InlineEstimator) stores its
// prediction instead.
func (m *Manager) progressed(ctx context.Context, r *run, p Progress) {
	if p.Estimate != nil {
		m.storePrediction(ctx, r, *p.Estimate)
		return
	}
	snap, persisted, phase := m.runs.progressed(r, p)
	m.events.progress(snap)
	if p.Planned && phase {
		// What is known so far survives a crash or a lost lease (the row
		// ends FAILED "interrupted" keeping it). Once per phase: a few
		// writes per job, not one per batch; the lease keeper persists
		// the counts in between.
		if _, err := m.store.RenewLease(ctx, r.job.ID, m.owner, m.cfg.LeaseDuration, persisted); err != nil && ctx.Err() == nil {
			m.logger.Warn("persist progress of running job", "job", r.job.ID, "collection", r.job.CollectionID, "err", err)
		}
	}
}

// endFacts are what a job's end is classified by.
type endFacts struct {
	Err       error // the execution's error, nil on success
	Cause     error // the cause of the job context's end, nil while it runs
	Committed bool  // the commit took effect (and wrote the row)
	// CancelRequested: an operator cancelled the job (or its collection is
	// being deleted), ending with CancelNote ("" for NoteCancelled).
	CancelRequested bool
	CancelNote      string
	Shutdown        bool // the shutdown grace period ended
	// Class of Err (failureClass): an infrastructure failure backs off
	// without counting toward the dead-letter state.
	Class jobtype.FailureClass
	Node  string // this node's name, for the text of a lost lease
}

// endClass is how a job ended.
type endClass struct {
	State       catalog.JobState
	Note, Error string // set on the row when not empty
	// Class of a FAILED end (set on the row); Transient: an
	// infrastructure failure, which backs off but does not count toward
	// the dead-letter state.
	Class     jobtype.FailureClass
	Transient bool
	// Persist: report writes the row (FinishJob, fenced by the lease);
	// false when the commit wrote it, or the lease was lost.
	Persist bool
	// Lost: another replica took the job over (or it was deleted); this
	// node records nothing of it, and the job ends there.
	Lost bool
}

// classifyEnd decides how a job ended, from the facts of its run alone. A
// committed success is this node's whatever else happened: its commit was
// fenced by the lease, and a lease keeper that renews after the commit
// finds the job no longer RUNNING and reports the lease lost, which must
// not drop the job's end (its continuation, its success) on the floor.
func classifyEnd(f endFacts) endClass {
	var c endClass
	switch {
	case f.Err == nil:
		c.State = catalog.JobSucceeded
	case errors.Is(f.Cause, errLeaseLost):
		c.State, c.Error = catalog.JobFailed, fmt.Sprintf("interrupted: node %s lost the job's lease", f.Node)
	case f.CancelRequested || errors.Is(f.Cause, errCancelRequested):
		c.State, c.Note = catalog.JobCancelled, cmp.Or(f.CancelNote, NoteCancelled)
	case f.Shutdown:
		c.State, c.Note = catalog.JobCancelled, NoteShutdown
	default:
		c.State, c.Error, c.Class = catalog.JobFailed, f.Err.Error(), cmp.Or(f.Class, jobtype.FailureInternal)
		c.Transient = !c.Class.Counts()
		if c.Transient {
			c.Note = "transient failure"
		}
	}
	committed := f.Err == nil && f.Committed
	c.Lost = !committed && (errors.Is(f.Cause, errLeaseLost) || errors.Is(f.Err, catalog.ErrLeaseLost))
	c.Persist = !committed && !c.Lost
	return c
}

// endRow is the row a job ends with: the claimed row (with the plan its
// progress reported), the executor's outcome (an executor that failed
// early knows nothing: the plan stays), and the class of its end, finished
// at the given time.
func endRow(claimed catalog.Job, o Outcome, c endClass, at time.Time) catalog.Job {
	j := claimed
	if o != (Outcome{}) {
		j.OffsetStart, j.OffsetEnd = o.OffsetStart, o.OffsetEnd
		j.RecordsRead, j.RecordsWritten, j.BytesWritten = o.OpRecordsRead, o.RecordsWritten, o.BytesWritten
		j.VersionBefore, j.VersionAfter = o.VersionBefore, o.VersionAfter
		if o.Note != "" {
			j.Note = o.Note
		}
		if o.Actual != nil {
			a := *o.Actual
			j.Actual = &a
		}
	}
	j.State, j.FinishedAt, j.FailureClass = c.State, at, c.Class
	if c.Note != "" {
		j.Note = c.Note
	}
	if c.Error != "" {
		j.Error = c.Error
	}
	return j
}

// jobEnd is one job's end as report carries it through its steps.
type jobEnd struct {
	r       *run
	exec    Executor    // of the job's kind; nil when none runs it here
	row     catalog.Job // the row the job ends with
	class   endClass
	outcome Outcome
	err     error
	log     *slog.Logger
	span    trace.Span
}

// committed reports whether the job committed a new version.
func (e *jobEnd) committed() bool { return e.err == nil && e.outcome.Committed() }

// report reports a job's end, in order: persist the row (unless the commit
// did, or the lease was lost: then only this node's run ends); the failure
// policy; metrics, log and span; the backlog gauges; the continuation of a
// backlog larger than one job; publish the end; then garbage collection.
// The writes are bounded by Config.PersistTimeout (they may queue behind
// another job's commit) with a context that outlives shutdown.
func (m *Manager) report(workCtx context.Context, e *jobEnd) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(workCtx), m.cfg.PersistTimeout)
	defer cancel()
	if !m.persist(ctx, e) {
		e.log.Warn("job lease lost; the job is left to the replica that took it over", "err", e.err)
		m.ended(e.r, e.row, false)
		return
	}
	m.applyPolicy(ctx, e)
	m.observe(e)
	m.refreshBacklogAfter(ctx, e)
	m.queueContinuation(ctx, e)
	m.requeueForWindow(ctx, e)
	m.ended(e.r, e.row, true)
	m.collectGarbage(workCtx, e)
}

// persist writes the end's row when the commit did not, fenced by the
// lease; it reports false when the job is not this node's to end (the
// lease was lost, or the job or its collection is gone). A failure to
// write is logged: the end goes on (the lease expires, and the job ends
// "interrupted" on any replica).
func (m *Manager) persist(ctx context.Context, e *jobEnd) bool {
	if e.class.Lost {
		return false
	}
	if !e.class.Persist {
		return true
	}
	err := m.store.FinishJob(ctx, m.owner, e.row)
	if errors.Is(err, catalog.ErrLeaseLost) || errors.Is(err, catalog.ErrNotFound) {
		return false
	}
	if err != nil {
		e.log.Error("persist finished job", "err", err)
	}
	return true
}

// applyPolicy applies the failure policy to the job's collection, as
// effectOf decides it for the job's kind and end.
func (m *Manager) applyPolicy(ctx context.Context, e *jobEnd) {
	eff := effectOf(kindOf(e.row), e.row.State, e.class.Class)
	switch {
	case eff.Clears:
		m.policy.succeeded(ctx, m.store, e.row, e.outcome.Committed(), e.log)
	case eff.Backoff:
		m.policy.failed(ctx, m.store, e.row, e.class.Class, eff.Counts, e.log)
	}
	if eff.Repair {
		m.queueRepair(ctx, e)
	}
}

// queueRepair queues a compaction of the collection of e, a verify job
// that found a version damaged, when that version is still the current
// one and the collection's automatic compaction is not paused (an
// operator who paused it keeps it as it is): the compaction rebuilds the
// version from the newest earlier kept version that verifies and the log
// (compaction's repair), with the verify job's trigger, at once. A
// compaction queued already is that repair. An older kept version found
// damaged needs none: no compaction builds on it.
func (m *Manager) queueRepair(ctx context.Context, e *jobEnd) {
	c, err := m.store.GetCollection(ctx, e.row.CollectionID)
	if err != nil {
		e.log.Warn("read collection to repair", "err", err)
		return
	}
	if e.row.VersionBefore != c.SegmentVersion || c.SegmentVersion == 0 {
		return
	}
	if c.Paused() {
		e.log.Warn("repair not queued: automatic compaction of the collection is paused", "version", c.SegmentVersion)
		return
	}
	reason := fmt.Sprintf("repairs version %d, which verify job %.8s found damaged", c.SegmentVersion, e.row.ID)
	next, created, err := m.store.EnqueueJob(ctx, catalog.JobRequest{
		CollectionID: c.ID, Kind: jobtype.KindCompaction, Trigger: e.row.Trigger, Reason: reason, TraceParent: e.row.TraceParent,
		TriggeredBy: e.row.TriggeredBy,
	})
	if err != nil {
		e.log.Error("queue repair", "err", err)
		return
	}
	e.log.Warn("version failed verification: repair queued", "version", c.SegmentVersion, "repair_job", next.ID)
	if created {
		m.changedJob(next)
	}
}

// observe logs the end once, counts it and records it on the job's span.
func (m *Manager) observe(e *jobEnd) {
	switch e.row.State {
	case catalog.JobSucceeded:
		e.log.Info(logMsg(e.row, "succeeded"), "records_read", e.row.RecordsRead, "version", e.row.VersionAfter,
			"duration", e.row.FinishedAt.Sub(e.row.StartedAt))
	case catalog.JobFailed:
		e.log.Warn(logMsg(e.row, "failed"), "err", e.err, "class", string(e.class.Class), "transient", e.class.Transient)
	default:
		e.log.Info(logMsg(e.row, "cancelled"), "note", e.row.Note)
	}
	m.metrics.finished(e.row, e.err)
	endJobSpan(e.span, e.row, e.err)
}

// logMsg is the message of a job's end: "compaction succeeded" and the
// like for compactions (the messages operators search for), "job
// succeeded" for the other kinds, whose log lines carry their kind.
func logMsg(j catalog.Job, end string) string {
	if kindOf(j) == jobtype.KindCompaction {
		return "compaction " + end
	}
	return "job " + end
}

// refreshBacklogAfter updates the backlog gauges before the end is
// published, so that whoever sees it reads the new backlog too.
func (m *Manager) refreshBacklogAfter(ctx context.Context, e *jobEnd) {
	if err := m.RefreshBacklog(ctx, e.row.CollectionID); err != nil {
		e.log.Warn("read backlog after job", "err", err)
	}
}

// queueContinuation queues the follow-up of a success that left a backlog
// larger than one job, at once. It is queued before the end is published,
// so a watcher that sees the end finds the continuation already there. At
// shutdown it is still queued (persisted), and the next start runs it.
func (m *Manager) queueContinuation(ctx context.Context, e *jobEnd) {
	if e.row.State != catalog.JobSucceeded || e.outcome.Remaining <= 0 {
		return
	}
	reason := fmt.Sprintf("continues job %.8s: %d records remain", e.row.ID, e.outcome.Remaining)
	next, created, err := m.store.EnqueueJob(ctx, catalog.JobRequest{
		CollectionID: e.row.CollectionID, Kind: e.row.Kind, Trigger: e.row.Trigger, Reason: reason, Continues: e.row.ID, TraceParent: e.row.TraceParent,
		TriggeredBy: e.row.TriggeredBy,
	})
	if err != nil {
		e.log.Error("queue continuation", "err", err)
	} else if created {
		m.changedJob(next)
	}
}

// collectGarbage runs GC after a commit, once the continuation is queued
// (it may run on another worker meanwhile: GC spares blobs younger than
// the grace period), with a deadline of its own: a large listing must not
// starve the rest.
func (m *Manager) collectGarbage(workCtx context.Context, e *jobEnd) {
	if !e.committed() || e.exec == nil {
		return
	}
	ctx, cancel := context.WithTimeout(trace.ContextWithSpan(context.WithoutCancel(workCtx), e.span), gcTimeout)
	defer cancel()
	if err := e.exec.GC(ctx, e.row.CollectionID); err != nil {
		e.log.Warn("gc after compaction", "err", err)
	}
}

// gcTimeout bounds the GC pass after a compaction.
const gcTimeout = 5 * time.Minute

// ended publishes, when publish is set, the end of a run, then removes it
// from this node's running jobs (in that order: the status poller skips
// this node's runs, and then finds the end published).
func (m *Manager) ended(r *run, final catalog.Job, publish bool) {
	if publish {
		m.rates.ended(final, m.cfg.Node)
		m.events.changed(final)
	}
	m.runs.remove(r, final)
}

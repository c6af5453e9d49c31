package manager

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/compactorhq/compactor/internal/catalog"
)

// worker claims jobs from the queue in the catalog and runs them, one at a
// time, until ctx ends. An idle worker wakes when this node queues a job,
// and every Config.PollInterval for jobs other replicas queued.
func (m *Manager) worker(ctx, workCtx context.Context) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		m.mu.Lock()
		changed := m.changed
		stopping := m.stopping
		m.mu.Unlock()
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

// run executes one claimed job: execute under the lease keeper, decide the
// outcome, apply the failure policy, persist the end (fenced by the lease),
// queue a continuation, publish, and collect garbage after a commit.
func (m *Manager) run(workCtx context.Context, j catalog.Job) {
	jobCtx, cancel := context.WithCancelCause(workCtx)
	defer cancel(nil)
	jobCtx, span := m.startJobSpan(jobCtx, j)
	defer span.End()
	log := m.logger.With("job", j.ID, "collection", j.CollectionID)
	if sc := span.SpanContext(); sc.IsValid() {
		log = log.With("trace_id", sc.TraceID().String())
	}
	r := &run{job: j, progress: Progress{Phase: PhaseStarting}, cancel: cancel, done: make(chan struct{}), claimed: m.clk.Mono()}
	m.mu.Lock()
	r.tracker.observe(r.progress, m.clock())
	m.runs[j.ID] = r
	delete(m.seen, j.ID)
	m.publishRunLocked(r, EventChanged)
	m.mu.Unlock()
	m.metrics.queueWait.Observe(j.StartedAt.Sub(j.CreatedAt).Seconds())
	m.metrics.running.Inc()
	defer m.metrics.running.Dec()

	keeperCtx, stopKeeper := context.WithCancel(jobCtx)
	keeperDone := make(chan struct{})
	go func() { defer close(keeperDone); m.keepLease(keeperCtx, r) }()

	var committed catalog.Job // the row written with the commit, if any
	finish := func(o Outcome) catalog.Job {
		m.mu.Lock()
		defer m.mu.Unlock()
		c := r.job
		applyOutcome(&c, o)
		c.State, c.FinishedAt = catalog.JobSucceeded, m.endTime(r)
		committed = c
		return c
	}
	outcome, err := m.execute(jobCtx, r, finish)
	stopKeeper()
	<-keeperDone

	m.mu.Lock()
	final := r.job
	if outcome != (Outcome{}) { // an executor that failed early knows nothing: keep the plan
		applyOutcome(&final, outcome)
	}
	final.FinishedAt = m.endTime(r)
	if err == nil && outcome.Committed() {
		final.FinishedAt = committed.FinishedAt // as persisted
	}
	cause := context.Cause(jobCtx)
	var transient bool
	switch {
	case err == nil:
		final.State = catalog.JobSucceeded
	case errors.Is(cause, errLeaseLost):
		final.State, final.Error = catalog.JobFailed, fmt.Sprintf("interrupted: node %s lost the job's lease", m.cfg.Node)
	case r.cancelReq || errors.Is(cause, errCancelRequested):
		final.State, final.Note = catalog.JobCancelled, cmp.Or(r.cancelNote, NoteCancelled)
	case workCtx.Err() != nil:
		final.State, final.Note = catalog.JobCancelled, NoteShutdown
	default:
		final.State, final.Error = catalog.JobFailed, err.Error()
		transient = m.exec.Transient(err)
		if transient {
			final.Note = "transient failure"
		}
	}
	m.mu.Unlock()

	// Persist the end. A committed success already wrote the row in the
	// commit transaction; everything else is written here, fenced by the
	// lease, with a context that outlives shutdown.
	// Bounded by Config.PersistTimeout: these writes may queue behind
	// another job's commit.
	pctx, pcancel := context.WithTimeout(context.WithoutCancel(workCtx), m.cfg.PersistTimeout)
	defer pcancel()
	// A committed success is this node's: its commit was fenced by the
	// lease. A lease keeper that renews after the commit finds the job no
	// longer RUNNING and reports the lease lost; that must not drop the
	// job's end (its continuation, its success) on the floor.
	committedOK := err == nil && outcome.Committed()
	lost := !committedOK && (errors.Is(cause, errLeaseLost) || errors.Is(err, catalog.ErrLeaseLost))
	if !committedOK && !lost {
		if perr := m.store.FinishJob(pctx, m.owner, final); errors.Is(perr, catalog.ErrLeaseLost) || errors.Is(perr, catalog.ErrNotFound) {
			lost = true
		} else if perr != nil {
			log.Error("persist finished job", "err", perr)
		}
	}
	if lost {
		// Another replica took the job over (or its collection was
		// deleted): it ends there; this node records nothing of it.
		log.Warn("job lease lost; the job is left to the replica that took it over", "err", err)
		m.ended(r, final, false)
		return
	}
	switch final.State {
	case catalog.JobSucceeded:
		m.policy.succeeded(pctx, m.store, final, outcome.Committed(), log)
		log.Info("compaction succeeded", "records_read", final.RecordsRead, "version", final.VersionAfter,
			"duration", final.FinishedAt.Sub(final.StartedAt))
	case catalog.JobFailed:
		m.policy.failed(pctx, m.store, final, transient, log)
		log.Warn("compaction failed", "err", err, "transient", transient)
	default:
		log.Info("compaction cancelled", "note", final.Note)
	}
	m.metrics.finished(final, err)
	endJobSpan(span, final, err)
	// Before the end is published, so that whoever sees it reads the new
	// backlog too.
	if berr := m.RefreshBacklog(pctx, final.CollectionID); berr != nil {
		log.Warn("read backlog after job", "err", berr)
	}

	// Continuation: a backlog larger than one job goes on at once. It is
	// queued before the end of this job is published, so a watcher that
	// sees the end finds the continuation already there. At shutdown it is
	// still queued (persisted), and the next start runs it.
	if final.State == catalog.JobSucceeded && outcome.Remaining > 0 {
		reason := fmt.Sprintf("continues job %.8s: %d records remain", final.ID, outcome.Remaining)
		next, created, cerr := m.store.EnqueueJob(pctx, catalog.JobRequest{
			CollectionID: final.CollectionID, Trigger: final.Trigger, Reason: reason, Continues: final.ID, TraceParent: final.TraceParent,
		})
		if cerr != nil {
			log.Error("queue continuation", "err", cerr)
		} else if created {
			m.changedJob(next)
		}
	}
	m.ended(r, final, true)

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

// ended removes a run that ended from this node's running jobs and, when
// publish is set, publishes its end.
func (m *Manager) ended(r *run, final catalog.Job, publish bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r.job = final
	delete(m.runs, final.ID)
	close(r.done)
	if publish {
		m.seenLocked(final)
		m.sendLocked(Event{Kind: EventChanged, Job: Job{Job: final}})
	}
	m.signalLocked()
}

// execute calls the executor, turning a panic into an error of this job.
func (m *Manager) execute(ctx context.Context, r *run, finish func(Outcome) catalog.Job) (o Outcome, err error) {
	defer func() {
		if p := recover(); p != nil {
			m.logger.Error("compaction panicked", "job", r.job.ID, "collection", r.job.CollectionID, "panic", p)
			err = fmt.Errorf("compaction panicked: %v", p)
		}
	}()
	progress := func(p Progress) {
		m.mu.Lock()
		phase := r.progress.Phase != p.Phase
		r.progress = p
		r.tracker.observe(p, m.clock())
		if p.Planned {
			r.job.OffsetStart, r.job.OffsetEnd = p.OffsetStart, p.OffsetEnd
			r.job.VersionBefore, r.job.VersionAfter = p.VersionBefore, p.VersionBefore
			r.job.RecordsRead = p.RecordsRead
		}
		m.publishRunLocked(r, EventProgress)
		persisted := m.progressLocked(r)
		m.mu.Unlock()
		if p.Planned && phase {
			// What is known so far survives a crash or a lost lease (the
			// row ends FAILED "interrupted" keeping it). Once per phase: a
			// few writes per job, not one per batch; the lease keeper
			// persists the counts in between.
			if _, err := m.store.RenewLease(ctx, r.job.ID, m.owner, m.cfg.LeaseDuration, jobProgress(persisted)); err != nil && ctx.Err() == nil {
				m.logger.Warn("persist progress of running job", "job", r.job.ID, "collection", r.job.CollectionID, "err", err)
			}
		}
	}
	return m.exec.Execute(ctx, r.job.CollectionID, progress, finish)
}

func applyOutcome(j *catalog.Job, o Outcome) {
	j.OffsetStart, j.OffsetEnd = o.OffsetStart, o.OffsetEnd
	j.RecordsRead, j.RecordsWritten, j.BytesWritten = o.RecordsRead, o.RecordsWritten, o.BytesWritten
	j.VersionBefore, j.VersionAfter = o.VersionBefore, o.VersionAfter
	if o.Note != "" {
		j.Note = o.Note
	}
}

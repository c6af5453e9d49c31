package manager

import (
	"context"
	"sync"
	"time"

	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/jobtype"
)

// runRegistry holds this node's running jobs and the workers' wake-up
// signal. It owns, under mu:
//   - runs, and every field of each run but cancel, done and claimed (set
//     once at registration);
//   - changed, closed and replaced by wake;
//   - stopping, set once by stop.
//
// It calls no other service, so any service may call it under its own lock
// (the event hub does: hub.mu, then runRegistry.mu).
type runRegistry struct {
	clock func() time.Time     // times the runs' phases for fraction and ETA
	mono  func() time.Duration // the monotonic clock, for the runs' claim times

	mu       sync.Mutex
	runs     map[string]*run // this node's RUNNING jobs, by id
	changed  chan struct{}   // closed and replaced when a job may be claimable
	stopping bool            // shutting down: workers stop claiming
}

// run is one of this node's RUNNING jobs. Its fields are guarded by the
// registry's mu.
type run struct {
	job       catalog.Job // as claimed, with the plan its progress reported
	progress  Progress    // as the executor last reported it
	tracker   tracker     // times its phases for the fraction and the ETA
	cancel    context.CancelCauseFunc
	cancelReq bool // an operator cancelled it, or its collection is being deleted
	// cancelNote is the note it ends with when cancelReq: NoteCancelled or
	// NoteCollectionDeleted.
	cancelNote string
	done       chan struct{} // closed when the job has ended and is persisted
	claimed    time.Duration // the monotonic clock when it was claimed (see endTime)
}

func newRunRegistry(clock func() time.Time, mono func() time.Duration) *runRegistry {
	return &runRegistry{clock: clock, mono: mono, runs: make(map[string]*run), changed: make(chan struct{})}
}

// add registers a run of job j and returns it with its snapshot.
func (g *runRegistry) add(j catalog.Job, cancel context.CancelCauseFunc) (*run, Job) {
	r := &run{job: j, progress: Progress{Phase: jobtype.PhaseStarting}, tracker: tracker{kind: kindOf(j)}, cancel: cancel, done: make(chan struct{}), claimed: g.mono()}
	g.mu.Lock()
	defer g.mu.Unlock()
	r.tracker.observe(r.progress, g.clock())
	g.runs[j.ID] = r
	return r, g.snapshotLocked(r)
}

// remove drops run r, which ended with row final, and wakes the workers.
func (g *runRegistry) remove(r *run, final catalog.Job) {
	g.mu.Lock()
	defer g.mu.Unlock()
	r.job = final
	delete(g.runs, final.ID)
	close(r.done)
	g.wakeLocked()
}

// get returns this node's run of job id, nil when it runs elsewhere or not
// at all.
func (g *runRegistry) get(id string) *run {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.runs[id]
}

// job returns run r's row and its cancel request.
func (g *runRegistry) job(r *run) (j catalog.Job, cancelReq bool, cancelNote string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return r.job, r.cancelReq, r.cancelNote
}

// progressed records run r's progress report p, keeping the plan it carries
// on the job. It returns the run's snapshot, the progress as persisted
// (with fraction and ETA) and whether p began a phase.
func (g *runRegistry) progressed(r *run, p Progress) (snap Job, persisted Progress, phase bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	phase = r.progress.Phase != p.Phase
	r.progress = p
	r.tracker.observe(p, g.clock())
	if p.Planned {
		r.job.OffsetStart, r.job.OffsetEnd = p.OffsetStart, p.OffsetEnd
		r.job.VersionBefore, r.job.VersionAfter = p.VersionBefore, p.VersionBefore
		r.job.RecordsRead = p.OpRecordsRead
	}
	return g.snapshotLocked(r), g.progressLocked(r), phase
}

// progress is run r's progress with the fraction and the ETA at this
// instant.
func (g *runRegistry) progress(r *run) Progress {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.progressLocked(r)
}

// requestCancel marks job id's run (if this node runs it) cancelled with
// note (a deletion's note wins over an operator's) and cancels its context
// with cause; it returns the run, nil when this node does not run it, and
// whether this was the first cancel request the run got.
func (g *runRegistry) requestCancel(id, note string, cause error) (r *run, first bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	r = g.runs[id]
	if r != nil {
		first = !r.cancelReq
		g.cancelLocked(r, note, cause)
	}
	return r, first
}

// cancelRun is requestCancel of run r, with the note of a cancel request
// seen elsewhere ("": NoteCancelled unless one was given).
func (g *runRegistry) cancelRun(r *run, note string, cause error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.cancelLocked(r, note, cause)
}

func (g *runRegistry) cancelLocked(r *run, note string, cause error) {
	if note != "" && (!r.cancelReq || note == NoteCollectionDeleted) { // the deletion is the stronger reason
		r.cancelNote = note
	}
	r.cancelReq = true
	r.cancel(cause)
}

// view is j as surfaces see it: a RUNNING job of this node with its live
// progress, another's with the progress persisted with its lease.
func (g *runRegistry) view(j catalog.Job) Job {
	if j.State != catalog.JobRunning {
		return Job{Job: j}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if r, ok := g.runs[j.ID]; ok {
		return g.snapshotLocked(r)
	}
	p := persistedProgress(j.Progress, g.clock())
	return Job{Job: j, Progress: &p, CancelRequested: j.CancelRequested}
}

// ids returns the ids of the jobs this node runs, whose leases its lease
// keepers renew.
func (g *runRegistry) ids() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	ids := make([]string, 0, len(g.runs))
	for id := range g.runs {
		ids = append(ids, id)
	}
	return ids
}

// local reports whether this node runs job id.
func (g *runRegistry) local(id string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	_, ok := g.runs[id]
	return ok
}

// snapshotLocked copies a run for callers, with its fraction and ETA at
// this instant; g.mu must be held.
func (g *runRegistry) snapshotLocked(r *run) Job {
	p := g.progressLocked(r)
	j := Job{Job: r.job, CancelRequested: r.cancelReq || r.job.CancelRequested}
	if r.job.State == catalog.JobRunning {
		j.Progress = &p
	}
	return j
}

// progressLocked is run r's progress as surfaces see it: the executor's
// last report with the fraction and the ETA at this instant; g.mu must be
// held.
func (g *runRegistry) progressLocked(r *run) Progress {
	p := r.progress
	p.Fraction, p.ETA, p.ETAKnown = r.tracker.estimate(g.clock())
	return p
}

// wake wakes this node's idle workers: a job may be claimable.
func (g *runRegistry) wake() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.wakeLocked()
}

func (g *runRegistry) wakeLocked() {
	close(g.changed)
	g.changed = make(chan struct{})
}

// idle returns the channel closed at the next wake, and whether the
// workers are stopping.
func (g *runRegistry) idle() (changed <-chan struct{}, stopping bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.changed, g.stopping
}

// stop tells the workers to stop claiming, and wakes them.
func (g *runRegistry) stop() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.stopping = true
	g.wakeLocked()
}

// isStopping reports whether the workers are stopping.
func (g *runRegistry) isStopping() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.stopping
}

// predicted keeps prediction p on run r's job.
func (g *runRegistry) predicted(r *run, p *Prediction) {
	g.mu.Lock()
	defer g.mu.Unlock()
	r.job.Predicted = p
}

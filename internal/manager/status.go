package manager

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/compactorhq/compactor/internal/catalog"
)

// eventStore is the slice of the Store the event hub reads.
type eventStore interface {
	GetJob(ctx context.Context, id string) (catalog.Job, error)
	ListJobs(ctx context.Context, f catalog.JobFilter) ([]catalog.Job, error)
}

// eventHub delivers job changes to this node's watchers: this node's own
// as they happen (publish, published by whoever made the change), other
// replicas' from the catalog by bounded polling (runOnce, DESIGN.md §7a).
// It owns, under mu: watchers; open (Watch accepts subscriptions); seen,
// the last status of the active jobs read from the catalog, by id, so that
// runOnce publishes other replicas' changes; published, the jobs whose end
// was published, with their finish time, so that it is published once.
// lastPoll, the time of the last poll, is runOnce's own (one caller at a
// time: the status loop, and Run before it starts it).
//
// Lock order: mu, then the run registry's (runOnce skips and views this
// node's runs under mu, so that a run that starts meanwhile is either
// skipped or published after).
type eventHub struct {
	store  eventStore
	runs   *runRegistry
	clock  func() time.Time
	logger *slog.Logger
	queued func(n int) // sets the queued-jobs gauge

	lastPoll time.Time

	mu        sync.Mutex
	open      bool
	watchers  map[*watcher]struct{}
	seen      map[string]catalog.Job
	published map[string]time.Time
}

func newEventHub(store eventStore, runs *runRegistry, clock func() time.Time, logger *slog.Logger, queued func(int)) *eventHub {
	return &eventHub{store: store, runs: runs, clock: clock, logger: logger, queued: queued,
		watchers: make(map[*watcher]struct{}), seen: make(map[string]catalog.Job), published: make(map[string]time.Time)}
}

// start opens the hub to subscriptions; the next poll reads the jobs that
// finished from now on.
func (h *eventHub) start() {
	h.lastPoll = h.clock()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.open = true
}

// stop refuses new subscriptions (shutdown has begun).
func (h *eventHub) stop() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.open = false
}

// closeAll ends every subscription; later publishes reach no one.
func (h *eventHub) closeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.open = false
	for w := range h.watchers {
		delete(h.watchers, w)
		w.close()
	}
}

// subscribe adds a watcher, ErrStopped when the hub is not open.
func (h *eventHub) subscribe() (*watcher, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.open {
		return nil, ErrStopped
	}
	w := newWatcher()
	h.watchers[w] = struct{}{}
	return w, nil
}

// unsubscribe ends watcher w, if it has not ended.
func (h *eventHub) unsubscribe(w *watcher) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.watchers[w]; ok {
		delete(h.watchers, w)
		w.close()
	}
}

// started publishes the start of this node's run of j (snap) and forgets
// its polled status: the run's own events follow.
func (h *eventHub) started(snap Job) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.seen, snap.ID)
	h.sendLocked(Event{Kind: EventChanged, Job: snap})
}

// progress publishes a running job's progress (snap).
func (h *eventHub) progress(snap Job) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.sendLocked(Event{Kind: EventProgress, Job: snap})
}

// changed publishes a change this node made to job j (queued, cancelled
// while queued, ended) and records it, so that the poller does not publish
// it again.
func (h *eventHub) changed(j catalog.Job) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seenLocked(j)
	h.sendLocked(Event{Kind: EventChanged, Job: Job{Job: j}})
}

// seenLocked records a change this node published itself; h.mu must be
// held.
func (h *eventHub) seenLocked(j catalog.Job) {
	if j.State.Finished() {
		delete(h.seen, j.ID)
		h.published[j.ID] = j.FinishedAt
		return
	}
	h.seen[j.ID] = j
}

// sendLocked queues ev for every watcher without blocking; a watcher whose
// queue is full is dropped. h.mu must be held.
func (h *eventHub) sendLocked(ev Event) {
	for w := range h.watchers {
		if !w.push(ev) {
			delete(h.watchers, w)
			w.close()
		}
	}
}

// runOnce reads the active jobs of every replica and publishes the changes
// of those this node does not run: new jobs, state changes, progress
// persisted by their owner, and the end of jobs that left the active set.
// It also sets the queued-jobs gauge. It reports whether another replica
// changed a job (one may be claimable here).
func (h *eventHub) runOnce(ctx context.Context) (changed bool) {
	active, err := h.store.ListJobs(ctx, catalog.JobFilter{States: []catalog.JobState{catalog.JobQueued, catalog.JobRunning}})
	if err != nil {
		if ctx.Err() == nil {
			h.logger.Warn("read job status", "err", err)
		}
		return false
	}
	now := make(map[string]catalog.Job, len(active))
	queued := 0
	for _, j := range active {
		now[j.ID] = j
		if j.State == catalog.JobQueued {
			queued++
		}
	}
	h.queued(queued)

	h.mu.Lock()
	var gone []string
	for id := range h.seen {
		if _, ok := now[id]; !ok {
			gone = append(gone, id)
		}
	}
	var events []Event
	for id, j := range now {
		if h.runs.local(id) {
			continue
		}
		old, ok := h.seen[id]
		h.seen[id] = j
		switch {
		case !ok || old.State != j.State || old.CancelRequested != j.CancelRequested:
			events = append(events, Event{Kind: EventChanged, Job: h.runs.view(j)})
		case j.State == catalog.JobRunning && j.Progress != old.Progress:
			events = append(events, Event{Kind: EventProgress, Job: h.runs.view(j)})
		}
	}
	for _, e := range events {
		h.sendLocked(e)
	}
	h.mu.Unlock()
	// Jobs of other replicas that finished since the last poll, including
	// those queued and finished between two polls (never seen active here):
	// a watcher of their id must see the end. The window overlaps the last
	// one by a second (replica clocks; the jobs seen active are read by id
	// below, so a skewed clock cannot hide their ends); an end already
	// published is not published again.
	since := h.lastPoll.Add(-time.Second)
	h.lastPoll = h.clock()
	finished, err := h.store.ListJobs(ctx, catalog.JobFilter{FinishedSince: since})
	if err != nil {
		if ctx.Err() == nil {
			h.logger.Warn("read finished jobs", "err", err)
		}
		finished = nil
	}
	// A job seen active that left the active set has ended, whenever its
	// row says it finished: its finish time is taken before its commit,
	// which may take longer than the window's overlap (a busy catalog).
	var ends []catalog.Job
	for _, id := range gone {
		if slices.ContainsFunc(finished, func(j catalog.Job) bool { return j.ID == id }) {
			continue
		}
		if j, err := h.store.GetJob(ctx, id); err == nil && j.State.Finished() {
			ends = append(ends, j)
		}
	}
	finished = append(finished, ends...)
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, id := range gone {
		delete(h.seen, id)
	}
	for id, at := range h.published {
		if at.Before(since) {
			delete(h.published, id) // out of every window from now on
		}
	}
	for _, j := range finished {
		if h.runs.local(j.ID) {
			continue
		}
		if _, done := h.published[j.ID]; done {
			continue
		}
		h.published[j.ID] = j.FinishedAt
		h.sendLocked(Event{Kind: EventChanged, Job: Job{Job: j}})
	}
	return len(events) > 0
}

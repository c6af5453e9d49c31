package manager

import (
	"context"
	"fmt"
	"sync"
)

// EventKind says what an Event reports.
type EventKind int

// Event kinds.
const (
	// EventChanged: a job was created or changed state.
	EventChanged EventKind = iota + 1
	// EventProgress: a running job reported progress.
	EventProgress
)

// Event is one change delivered to watchers.
type Event struct {
	Kind EventKind
	Job  Job
}

// MaxPendingEvents is how many undelivered events a watcher may hold before
// it is dropped (its channel closed, Lagged reporting true). Progress is
// coalesced per job (a watcher holds at most one undelivered progress event
// per job, the latest), so only job changes (created, started, finished)
// count toward it in practice: a flood of progress reports never drops a
// watcher. The queue grows on demand; an idle watcher holds no buffer.
const MaxPendingEvents = 1024

// watcher is one subscription's queue. Events are appended by the event
// hub's send (under the hub's lock, then w.mu) and handed to the reader's channel by the
// watcher's pump goroutine, which ends with the watcher.
type watcher struct {
	out    chan Event    // unbuffered; closed by the pump when the watcher ends
	notify chan struct{} // capacity 1: the queue has events
	done   chan struct{} // closed by close
	once   sync.Once

	mu     sync.Mutex
	queue  []Event // undelivered, oldest first; Kind 0: superseded, skipped
	head   uint64  // sequence number of queue[0]
	latest map[string]uint64
	lagged bool
}

func newWatcher() *watcher {
	w := &watcher{out: make(chan Event), notify: make(chan struct{}, 1), done: make(chan struct{})}
	go w.pump()
	return w
}

func (w *watcher) close() { w.once.Do(func() { close(w.done) }) }

// push queues ev, replacing the job's undelivered progress event if there
// is one: a progress event is superseded by a later progress event (which
// takes its place in the queue) or by a later change (which carries the
// whole job and comes later, so the progress event is dropped). It reports
// false when the queue is full.
func (w *watcher) push(ev Event) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	id := ev.Job.ID
	if seq, ok := w.latest[id]; ok {
		i := seq - w.head
		if ev.Kind == EventProgress {
			w.queue[i] = ev
			return true
		}
		w.queue[i] = Event{} // superseded by this change
		delete(w.latest, id)
	}
	if len(w.queue) >= MaxPendingEvents {
		w.lagged = true
		return false
	}
	if ev.Kind == EventProgress {
		if w.latest == nil {
			w.latest = make(map[string]uint64)
		}
		w.latest[id] = w.head + uint64(len(w.queue))
	}
	w.queue = append(w.queue, ev)
	select {
	case w.notify <- struct{}{}:
	default:
	}
	return true
}

// pop takes the oldest undelivered event.
func (w *watcher) pop() (Event, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for len(w.queue) > 0 {
		ev := w.queue[0]
		w.queue[0] = Event{}
		w.queue = w.queue[1:]
		if len(w.queue) == 0 {
			w.queue = nil // let the backing array go
		}
		if ev.Kind == EventProgress {
			delete(w.latest, ev.Job.ID)
		}
		w.head++
		if ev.Kind != 0 {
			return ev, true
		}
	}
	return Event{}, false
}

// pump delivers the queue to out in order until the watcher ends; events
// still queued then are dropped (their reader has gone away).
func (w *watcher) pump() {
	defer close(w.out)
	for {
		ev, ok := w.pop()
		if !ok {
			select {
			case <-w.notify:
				continue
			case <-w.done:
				return
			}
		}
		select {
		case w.out <- ev:
		case <-w.done:
			return
		}
	}
}

// Subscription is a stream of Events from Watch.
type Subscription struct {
	w *watcher
}

// Events delivers the events in the order they happened, progress
// coalesced per job (see MaxPendingEvents); it is closed when the
// subscription ends: its context ended, the manager stopped, or the
// watcher fell more than MaxPendingEvents events behind (then Lagged
// reports true). Events not yet delivered when it ends are dropped.
func (s *Subscription) Events() <-chan Event { return s.w.out }

// Lagged reports whether the subscription ended because its reader fell
// behind. Read it after Events is closed.
func (s *Subscription) Lagged() bool {
	s.w.mu.Lock()
	defer s.w.mu.Unlock()
	return s.w.lagged
}

// Watch subscribes to job changes and progress until ctx ends: this node's
// jobs as they happen, other replicas' within Config.PollInterval. The
// snapshot of active jobs (Active) taken after the subscription is returned
// with it, so no change between the two is missed. Errors: ErrStopped when
// the manager is not running, the store's error of the snapshot. Each
// subscription costs one goroutine and its queue; callers that serve
// untrusted clients bound how many they open.
func (m *Manager) Watch(ctx context.Context) (*Subscription, []Job, error) {
	w, err := m.events.subscribe()
	if err != nil {
		return nil, nil, err
	}
	// Events between registration and the snapshot are in the queue too;
	// a reader sees them as changes after the snapshot, which is harmless
	// (each carries the full job).
	snapshot, err := m.Active(ctx)
	if err != nil {
		m.events.unsubscribe(w)
		return nil, nil, err
	}
	context.AfterFunc(ctx, func() { m.events.unsubscribe(w) })
	return &Subscription{w: w}, snapshot, nil
}

// Recorded publishes to this node's watchers, at once, the end of a job
// this node recorded finished without running it: a rollback's job, which
// the rollback's own transaction writes SUCCEEDED (compaction.Rollback).
// Watchers of its collection or of every job see it as they see the end
// of a job the workers ran (other replicas' watchers, at their next poll),
// and it is not published again by the poll. The backlog gauges take its
// collection as it is now (a rollback moves the compaction offset back:
// the records after it are backlog again). Errors: the store's reading the
// job (ErrNotFound when unknown), ErrInvalidArgument for a job that has
// not finished; nothing is published then.
func (m *Manager) Recorded(ctx context.Context, jobID string) (Job, error) {
	j, err := m.store.GetJob(ctx, jobID)
	if err != nil {
		return Job{}, err // the store's error names the job
	}
	if !j.State.Finished() {
		return Job{}, fmt.Errorf("job %s is %s, not finished: %w", jobID, j.State, ErrInvalidArgument)
	}
	if c, err := m.store.GetCollection(ctx, j.CollectionID); err == nil {
		m.metrics.backlogs.set(c)
	}
	m.events.changed(j)
	return Job{Job: j}, nil
}

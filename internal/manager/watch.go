package manager

import (
	"context"
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

// watchBuffer is how many events a watcher may lag behind before it is
// dropped (its channel closed, Lagged reporting true).
const watchBuffer = 1024

type watcher struct {
	ch     chan Event
	once   sync.Once
	lagged bool
}

func (w *watcher) close() { w.once.Do(func() { close(w.ch) }) }

// Subscription is a stream of Events from Watch.
type Subscription struct {
	m *Manager
	w *watcher
}

// Events delivers the events; it is closed when the subscription ends: its
// context ended, the manager stopped, or the watcher fell more than 1,024
// events behind (then Lagged reports true).
func (s *Subscription) Events() <-chan Event { return s.w.ch }

// Lagged reports whether the subscription ended because its reader fell
// behind. Read it after Events is closed.
func (s *Subscription) Lagged() bool {
	s.m.mu.Lock()
	defer s.m.mu.Unlock()
	return s.w.lagged
}

// Watch subscribes to job changes and progress until ctx ends: this node's
// jobs as they happen, other replicas' within Config.PollInterval. The
// snapshot of active jobs (Active) taken after the subscription is returned
// with it, so no change between the two is missed. Errors: ErrStopped when
// the manager is not running, the store's error of the snapshot.
func (m *Manager) Watch(ctx context.Context) (*Subscription, []Job, error) {
	m.mu.Lock()
	if !m.running || m.stopping {
		m.mu.Unlock()
		return nil, nil, ErrStopped
	}
	w := &watcher{ch: make(chan Event, watchBuffer)}
	m.watchers[w] = struct{}{}
	m.mu.Unlock()
	// Events between registration and the snapshot are in the channel
	// too; a reader sees them as changes after the snapshot, which is
	// harmless (each carries the full job).
	snapshot, err := m.Active(ctx)
	if err != nil {
		m.mu.Lock()
		delete(m.watchers, w)
		w.close()
		m.mu.Unlock()
		return nil, nil, err
	}
	context.AfterFunc(ctx, func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		if _, ok := m.watchers[w]; ok {
			delete(m.watchers, w)
			w.close()
		}
	})
	return &Subscription{m: m, w: w}, snapshot, nil
}

// publishRun sends a change or the progress of this node's running job r
// to every watcher; m.mu must be held.
func (m *Manager) publishRun(r *run, kind EventKind) { m.send(Event{Kind: kind, Job: m.snapshot(r)}) }

// send delivers ev without blocking; a watcher whose buffer is full is
// dropped. m.mu must be held.
func (m *Manager) send(ev Event) {
	for w := range m.watchers {
		select {
		case w.ch <- ev:
		default:
			w.lagged = true
			delete(m.watchers, w)
			w.close()
		}
	}
}

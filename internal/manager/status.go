package manager

import (
	"context"
	"time"

	"github.com/compactorhq/compactor/internal/catalog"
)

// statusLoop keeps this replica's view of the other replicas' jobs fresh
// (DESIGN.md §7a: cross-replica status from the catalog, by bounded
// polling): every Config.PollInterval it reads the active jobs, publishes
// what changed since the last read to this node's watchers, and takes over
// jobs whose lease expired (any replica may; the catalog skips rows another
// is taking over).
func (m *Manager) statusLoop(ctx context.Context) {
	t := time.NewTicker(m.cfg.PollInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		expired, err := m.store.ExpireLeases(ctx, m.renewing())
		if err != nil && ctx.Err() == nil {
			m.logger.Warn("expire job leases", "err", err)
		}
		m.interrupted(expired)
		m.pollStatus(ctx)
		if _, err := m.applyThroughput(ctx); err != nil && ctx.Err() == nil {
			m.logger.Warn("apply the throughput cap", "err", err)
		}
	}
}

// renewing returns the ids of the jobs this node runs, whose leases its
// lease keepers renew: a replica never expires a lease it is renewing (its
// keeper stops the job by the monotonic clock when it cannot renew).
func (m *Manager) renewing() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	ids := make([]string, 0, len(m.runs))
	for id := range m.runs {
		ids = append(ids, id)
	}
	return ids
}

// pollStatus reads the active jobs of every replica and publishes the
// changes of those this node does not run: new jobs, state changes,
// progress persisted by their owner, and the end of jobs that left the
// active set. It also sets the queued-jobs gauge.
func (m *Manager) pollStatus(ctx context.Context) {
	active, err := m.store.ListJobs(ctx, catalog.JobFilter{States: []catalog.JobState{catalog.JobQueued, catalog.JobRunning}})
	if err != nil {
		if ctx.Err() == nil {
			m.logger.Warn("read job status", "err", err)
		}
		return
	}
	now := make(map[string]catalog.Job, len(active))
	queued := 0
	for _, j := range active {
		now[j.ID] = j
		if j.State == catalog.JobQueued {
			queued++
		}
	}
	m.metrics.states.WithLabelValues(label(catalog.JobQueued)).Set(float64(queued))

	m.mu.Lock()
	var gone []string
	for id := range m.seen {
		if _, ok := now[id]; !ok {
			gone = append(gone, id)
		}
	}
	var events []Event
	for id, j := range now {
		if _, local := m.runs[id]; local {
			continue
		}
		old, ok := m.seen[id]
		m.seen[id] = j
		switch {
		case !ok || old.State != j.State || old.CancelRequested != j.CancelRequested:
			events = append(events, Event{Kind: EventChanged, Job: m.viewLocked(j)})
		case j.State == catalog.JobRunning && j.Progress != old.Progress:
			events = append(events, Event{Kind: EventProgress, Job: m.viewLocked(j)})
		}
	}
	for _, e := range events {
		m.sendLocked(e)
	}
	m.mu.Unlock()
	if len(events) > 0 {
		m.mu.Lock()
		m.signalLocked() // jobs another replica queued may be claimable here
		m.mu.Unlock()
	}
	// Jobs of other replicas that finished since the last poll, including
	// those queued and finished between two polls (never seen active here):
	// a watcher of their id must see the end. The window overlaps the last
	// one by a second (replica clocks; the jobs seen active are read by id
	// below, so a skewed clock cannot hide their ends); an end already
	// published is not published again.
	since := m.lastPoll.Add(-time.Second)
	m.lastPoll = time.Now()
	finished, err := m.store.ListJobs(ctx, catalog.JobFilter{FinishedSince: since})
	if err != nil {
		if ctx.Err() == nil {
			m.logger.Warn("read finished jobs", "err", err)
		}
		finished = nil
	}
	// Jobs seen active that left the active set ended: their ends are
	// published from their rows, whatever clock wrote their finish times.
	have := make(map[string]bool, len(finished))
	for _, j := range finished {
		have[j.ID] = true
	}
	for _, id := range gone {
		if have[id] {
			continue
		}
		if j, err := m.store.GetJob(ctx, id); err == nil && j.State.Finished() {
			finished = append(finished, j)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, id := range gone {
		delete(m.seen, id)
	}
	for id, at := range m.published {
		if at.Before(since) {
			delete(m.published, id) // out of every window from now on
		}
	}
	for _, j := range finished {
		if _, local := m.runs[j.ID]; local {
			continue
		}
		if _, done := m.published[j.ID]; done {
			continue
		}
		m.published[j.ID] = j.FinishedAt
		m.sendLocked(Event{Kind: EventChanged, Job: Job{Job: j}})
	}
}

// seenLocked records a change this node published itself, so that the
// poller does not publish it again; m.mu must be held.
func (m *Manager) seenLocked(j catalog.Job) {
	if j.State.Finished() {
		delete(m.seen, j.ID)
		m.published[j.ID] = j.FinishedAt
		return
	}
	m.seen[j.ID] = j
}

package manager

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/compactorhq/compactor/internal/catalog"
)

// schedulerLease names the leader lease in the catalog: the replica that
// holds it runs the scheduler; the others stand by and take it over when it
// expires (its holder stopped renewing) or is released (a clean shutdown).
const schedulerLease = "scheduler"

// schedulerLoop runs the scheduler every Config.Interval (with jitter) while
// this replica holds the leader lease, until ctx ends. The lease lasts three
// intervals and is renewed on every run.
func (m *Manager) schedulerLoop(ctx context.Context) {
	timer := time.NewTimer(jitter(m.cfg.Interval))
	defer timer.Stop()
	leader := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		held, err := m.store.AcquireLease(ctx, schedulerLease, m.cfg.Node, 3*m.cfg.Interval)
		switch {
		case err != nil:
			if ctx.Err() == nil {
				m.logger.Warn("acquire scheduler lease", "err", err)
			}
		case held != leader:
			leader = held
			m.logger.Info("scheduler leadership changed", "leader", leader)
		}
		m.metrics.leader.Set(boolGauge(leader && err == nil))
		if leader && err == nil {
			if err := m.Schedule(ctx); err != nil && ctx.Err() == nil {
				m.logger.Warn("scheduler run", "err", err)
			}
		}
		timer.Reset(jitter(m.cfg.Interval))
	}
}

// Schedule runs the scheduler once: every collection that is not
// dead-lettered, has no queued or running job, is past its retry backoff,
// and whose backlog reaches Config.MinCompactionSize or whose oldest
// uncompacted record is older than Config.MaxAge gets a SCHEDULED job,
// oldest backlog first. It also refreshes the backlog gauges and prunes the
// job history. Running it on two replicas at once queues no duplicate (the
// catalog keeps one QUEUED job per collection), so it is safe to call
// outside the leader lease. It returns the store's error, having queued
// what it could.
func (m *Manager) Schedule(ctx context.Context) error {
	m.metrics.schedulerRuns.Inc()
	colls, err := m.store.ListCollections(ctx)
	if err != nil {
		return fmt.Errorf("list collections: %w", err)
	}
	active, err := m.store.ListJobs(ctx, catalog.JobFilter{States: []catalog.JobState{catalog.JobQueued, catalog.JobRunning}})
	if err != nil {
		return fmt.Errorf("list active jobs: %w", err)
	}
	busy := make(map[string]bool, len(active))
	for _, j := range active {
		busy[j.CollectionID] = true
	}
	var backlog int64
	var dead int
	due := make([]catalog.Collection, 0)
	now := m.now()
	for _, c := range colls {
		backlog += c.Backlog()
		if c.DeadLettered() {
			dead++
			continue
		}
		if c.Backlog() <= 0 || busy[c.ID] || now.Before(c.RetryAfter) {
			continue
		}
		if c.Backlog() >= m.cfg.MinCompactionSize ||
			(!c.OldestUncompactedAt.IsZero() && now.Sub(c.OldestUncompactedAt) >= m.cfg.MaxAge) {
			due = append(due, c)
		}
	}
	m.metrics.backlog.Set(float64(backlog))
	m.metrics.deadLettered.Set(float64(dead))
	slices.SortFunc(due, func(a, b catalog.Collection) int { return cmpTime(a.OldestUncompactedAt, b.OldestUncompactedAt) })

	for _, c := range due {
		if m.isStopping() {
			break
		}
		reason := fmt.Sprintf("backlog of %d records (minimum %d)", c.Backlog(), m.cfg.MinCompactionSize)
		if c.Backlog() < m.cfg.MinCompactionSize {
			reason = fmt.Sprintf("oldest record waited %s (maximum %s)", now.Sub(c.OldestUncompactedAt).Round(time.Second), m.cfg.MaxAge)
		}
		j, created, err := m.store.EnqueueJob(ctx, catalog.JobRequest{
			CollectionID: c.ID, Trigger: catalog.TriggerScheduled, Reason: reason, OldestAt: c.OldestUncompactedAt,
		})
		if err != nil {
			return fmt.Errorf("queue job for collection %s: %w", c.ID, err)
		}
		if created {
			m.changedJob(j)
		}
	}

	if _, err := m.store.PruneJobs(ctx, m.cfg.HistoryKeep, now.Add(-m.cfg.HistoryMaxAge)); err != nil {
		return fmt.Errorf("prune job history: %w", err)
	}
	return nil
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

// jitter returns d plus a random extra of up to 10%.
func jitter(d time.Duration) time.Duration {
	return d + time.Duration(rand.Int64N(int64(d)/10+1))
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

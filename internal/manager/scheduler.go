package manager

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/compactorhq/compactor/internal/catalog"
)

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
		if err := m.Schedule(ctx); err != nil && ctx.Err() == nil {
			m.logger.Warn("scheduler run", "err", err)
		}
		timer.Reset(jitter(m.cfg.Interval))
	}
}

// Schedule runs the scheduler once: every collection that is not
// dead-lettered, has no queued or running job, is past its retry backoff,
// and whose backlog reaches Config.MinCompactionSize or whose oldest
// uncompacted record is older than Config.MaxAge gets a SCHEDULED job,
// oldest backlog first. It also refreshes the backlog gauges and prunes the
// job history. It returns the store's error, having queued what it could.
func (m *Manager) Schedule(ctx context.Context) error {
	m.metrics.schedulerRuns.Inc()
	colls, err := m.store.ListCollections(ctx)
	if err != nil {
		return fmt.Errorf("list collections: %w", err)
	}
	m.metrics.backlogs.replace(colls)
	due := make([]catalog.Collection, 0)
	now := m.now()
	for _, c := range colls {
		if c.DeadLettered() {
			continue
		}
		if c.Backlog() <= 0 {
			continue
		}
		if c.Backlog() >= m.cfg.MinCompactionSize ||
			(!c.OldestUncompactedAt.IsZero() && now.Sub(c.OldestUncompactedAt) >= m.cfg.MaxAge) {
			due = append(due, c)
		}
	}
	slices.SortFunc(due, func(a, b catalog.Collection) int { return cmpTime(a.OldestUncompactedAt, b.OldestUncompactedAt) })

	m.mu.Lock()
	var reserved []*entry
	for _, c := range due {
		if m.stopping {
			break
		}
		cs := m.coll(c.ID)
		if cs.queued != nil || cs.running != nil || now.Before(cs.retryAt) {
			continue
		}
		reason := fmt.Sprintf("backlog of %d records (minimum %d)", c.Backlog(), m.cfg.MinCompactionSize)
		if c.Backlog() < m.cfg.MinCompactionSize {
			reason = fmt.Sprintf("oldest record waited %s (maximum %s)", now.Sub(c.OldestUncompactedAt).Round(time.Second), m.cfg.MaxAge)
		}
		reserved = append(reserved, m.reserveLocked(c.ID, catalog.TriggerScheduled, reason, c.OldestUncompactedAt, ""))
	}
	m.mu.Unlock()
	if _, err := m.persist(ctx, reserved...); err != nil {
		return err
	}

	if _, err := m.store.PruneJobs(ctx, m.cfg.HistoryKeep, now.Add(-m.cfg.HistoryMaxAge)); err != nil {
		return fmt.Errorf("prune job history: %w", err)
	}
	return nil
}

package manager

import (
	"context"
	"fmt"
	"math/rand/v2"
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
		held, err := m.store.AcquireLeaderLease(ctx, schedulerLease, m.cfg.Node, 3*m.cfg.Interval)
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
		} else if colls, err := m.store.ListCollections(ctx); err == nil {
			// Not the leader: the backlog gauges still follow the catalog,
			// including other replicas' pushes and commits.
			m.metrics.backlogs.replace(colls)
		}
		timer.Reset(jitter(m.cfg.Interval))
	}
}

// Schedule runs the scheduler once: it queues a SCHEDULED job for every
// collection the plan decides to run (DecideRun: a backlog that reaches its
// minimum compaction size, or an oldest uncompacted record older than its
// maximum age; not paused, dead-lettered, backing off, or with a job queued
// or running), oldest backlog first. It also refreshes the backlog, pause
// and dead-letter gauges and prunes the job history. Running it on two
// replicas at once queues no duplicate (the catalog keeps one QUEUED job
// per collection), so it is safe outside the leader lease. It returns the
// store's error, having queued what it could.
func (m *Manager) Schedule(ctx context.Context) error {
	m.metrics.schedulerRuns.Inc()
	p, err := m.plan(ctx)
	if err != nil {
		return err
	}
	colls := make([]catalog.Collection, len(p.Entries))
	var paused int
	for i, e := range p.Entries {
		colls[i] = e.Collection
		if e.Collection.Paused() {
			paused++
		}
	}
	m.metrics.backlogs.replace(colls)
	m.metrics.collectionsPaused.Set(float64(paused))
	m.metrics.schedulerPaused.Set(boolGauge(p.Pause.Paused))

	for _, e := range p.Entries {
		if e.Decision != DecideRun || m.isStopping() {
			continue
		}
		j, created, err := m.store.EnqueueJob(ctx, catalog.JobRequest{
			CollectionID: e.Collection.ID, Trigger: catalog.TriggerScheduled, Reason: e.Reason, OldestAt: e.Collection.OldestUncompactedAt,
		})
		if err != nil {
			return fmt.Errorf("queue job for collection %s: %w", e.Collection.ID, err)
		}
		if created {
			m.changedJob(j)
		}
	}

	if _, err := m.store.PruneJobs(ctx, m.cfg.HistoryKeep, p.At.Add(-m.cfg.HistoryMaxAge)); err != nil {
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

package manager

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/jobtype"
)

// schedulerLease names the leader lease in the catalog: the replica that
// holds it runs the scheduler; the others stand by and take it over when it
// expires (its holder stopped renewing) or is released (a clean shutdown).
const schedulerLease = "scheduler"

// scheduleStore is the slice of the Store the scheduler uses.
type scheduleStore interface {
	ListCollections(ctx context.Context) ([]catalog.Collection, error)
	ListJobs(ctx context.Context, f catalog.JobFilter) ([]catalog.Job, error)
	GetSetting(ctx context.Context, name string) (catalog.Setting, error)
	EnqueueJob(ctx context.Context, r catalog.JobRequest) (catalog.Job, bool, error)
	AcquireLeaderLease(ctx context.Context, name, owner string, ttl time.Duration) (bool, error)
	ReleaseLeaderLease(ctx context.Context, name, owner string) error
}

// scheduler turns backlogs into SCHEDULED jobs, on the replica that holds
// the leader lease (after River's maintenance services under the leader):
// runOnce renews the lease and, while it is held, plans and queues, then
// runs the history pruner. It owns leader (under mu); the rest is set at
// construction.
type scheduler struct {
	store    scheduleStore
	cfg      Config // Interval, Node, MinCompactionSize, MaxAge
	clock    func() time.Time
	metrics  *metrics
	logger   *slog.Logger
	pruner   *historyPruner
	stopping func() bool         // the manager is shutting down: queue nothing more
	queued   func(j catalog.Job) // publishes a job it queued and wakes the workers

	mu     sync.Mutex
	leader bool // this replica held the leader lease at the last run
}

// runOnce renews or acquires the leader lease (it lasts three intervals),
// then, as the leader, runs the scheduler; a replica that is not the leader
// refreshes the backlog gauges from the catalog (other replicas' pushes and
// commits included).
func (s *scheduler) runOnce(ctx context.Context) {
	held, err := s.store.AcquireLeaderLease(ctx, schedulerLease, s.cfg.Node, 3*s.cfg.Interval)
	s.mu.Lock()
	switch {
	case err != nil:
		if ctx.Err() == nil {
			s.logger.Warn("acquire scheduler lease", "err", err)
		}
	case held != s.leader:
		s.leader = held
		s.logger.Info("scheduler leadership changed", "leader", held)
	}
	leader := s.leader && err == nil
	s.mu.Unlock()
	s.metrics.leader.Set(boolGauge(leader))
	if leader {
		if err := s.schedule(ctx); err != nil && ctx.Err() == nil {
			s.logger.Warn("scheduler run", "err", err)
		}
	} else if colls, err := s.store.ListCollections(ctx); err == nil {
		s.metrics.backlogs.replace(colls)
	}
}

// release gives up the leader lease (a clean shutdown), so that another
// replica takes it at once.
func (s *scheduler) release(ctx context.Context) error {
	return s.store.ReleaseLeaderLease(ctx, schedulerLease, s.cfg.Node)
}

// schedule is Manager.Schedule.
func (s *scheduler) schedule(ctx context.Context) error {
	s.metrics.schedulerRuns.Inc()
	p, err := s.plan(ctx)
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
	s.metrics.backlogs.replace(colls)
	s.metrics.collectionsPaused.Set(float64(paused))
	s.metrics.schedulerPaused.Set(boolGauge(p.Pause.Paused))

	for _, e := range p.Entries {
		if e.Decision != DecideRun || s.stopping() {
			continue
		}
		j, created, err := s.store.EnqueueJob(ctx, catalog.JobRequest{
			CollectionID: e.Collection.ID, Kind: jobtype.KindCompaction, Trigger: catalog.TriggerScheduled, Reason: e.Reason, OldestAt: e.Collection.OldestUncompactedAt,
		})
		if err != nil {
			return fmt.Errorf("queue job for collection %s: %w", e.Collection.ID, err)
		}
		if created {
			s.queued(j)
		}
	}
	if _, err := s.pruner.runOnce(ctx); err != nil {
		return err
	}
	return nil
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
func (m *Manager) Schedule(ctx context.Context) error { return m.sched.schedule(ctx) }

// pruneStore is the slice of the Store the history pruner uses.
type pruneStore interface {
	PruneJobs(ctx context.Context, keep int, olderThan time.Time) (int, error)
}

// historyPruner keeps the job history within its retention: the newest
// keep finished jobs, none older than maxAge. It has no state of its own.
type historyPruner struct {
	store  pruneStore
	keep   int
	maxAge time.Duration
	clock  func() time.Time
}

// runOnce prunes the history once and returns how many jobs it removed.
func (p *historyPruner) runOnce(ctx context.Context) (int, error) {
	n, err := p.store.PruneJobs(ctx, p.keep, p.clock().Add(-p.maxAge))
	if err != nil {
		return n, fmt.Errorf("prune job history: %w", err)
	}
	return n, nil
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

package manager_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/catalog/catalogtest"
	"github.com/compactorhq/compactor/internal/clock"
	"github.com/compactorhq/compactor/internal/manager"
)

// observed is a store that reports every lease expiry pass and every
// successful lease renewal.
type observed struct {
	manager.Store
	expired, renewed chan struct{}
}

func (o observed) ExpireLeases(ctx context.Context, renewing []string) ([]catalog.Job, error) {
	jobs, err := o.Store.ExpireLeases(ctx, renewing)
	select {
	case o.expired <- struct{}{}:
	default:
	}
	return jobs, err
}

func (o observed) RenewLease(ctx context.Context, jobID, node string, lease time.Duration, p catalog.JobProgress) (bool, error) {
	cancel, err := o.Store.RenewLease(ctx, jobID, node, lease, p)
	if err == nil {
		select {
		case o.renewed <- struct{}{}:
		default:
		}
	}
	return cancel, err
}

// waitFor takes n reports from ch.
func waitFor(ch chan struct{}, n int) {
	for range n {
		<-ch
	}
}

// TestAWallClockStepNeitherFailsALiveJobNorMakesADurationNegative sets the
// system time of a single node (SQLite) a day ahead while its job runs, then
// 25 hours back: the node keeps its job's lease through both steps (its
// lease keeper renews it, its lease expiry passes leave it alone), the job
// succeeds, and its recorded duration is the time that elapsed, not a day
// or minus an hour.
func TestAWallClockStepNeitherFailsALiveJobNorMakesADurationNegative(t *testing.T) {
	wall := clock.Shift(clock.System(), 0)
	c, err := catalog.Open(t.Context(), catalog.Config{DSN: filepath.Join(t.TempDir(), "catalog.db"), Exclusive: true, Clock: wall})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	id := collectionWithBacklog(t, c, "stepped", 5)
	exec := newCommitExec(c)
	release := make(chan struct{})
	exec.hold[id] = release
	store := observed{Store: c, expired: make(chan struct{}, 1), renewed: make(chan struct{}, 1)}
	r := startReplica(t, store, exec, "solo", func(cfg *manager.Config) {
		cfg.LeaseDuration, cfg.RenewInterval, cfg.Clock = 5*time.Second, 100*time.Millisecond, wall
	})
	enq, err := r.m.Compact(t.Context(), []string{id}, false, "test")
	if err != nil {
		t.Fatal(err)
	}
	<-exec.started
	begun := time.Now()

	wall.Step(24 * time.Hour)
	// Passes of the status loop and renewals that started after the step
	// (a report already buffered may predate it: one more of each).
	waitFor(store.expired, 3)
	waitFor(store.renewed, 3)
	wall.Step(-25 * time.Hour)
	waitFor(store.expired, 3)
	waitFor(store.renewed, 3)
	close(release)

	j := waitJob(t, r.m, enq[0].Job.ID)
	elapsed := time.Since(begun)
	if j.State != catalog.JobSucceeded {
		t.Fatalf("job after the wall-clock steps: %s (%q), want SUCCEEDED", j.State, j.Error)
	}
	if d := j.FinishedAt.Sub(j.StartedAt); d < 0 || d > elapsed+time.Minute {
		t.Fatalf("recorded duration %s (started %s, finished %s); want the %s that elapsed", d, j.StartedAt, j.FinishedAt, elapsed.Round(time.Millisecond))
	}
	stored, err := c.GetJob(t.Context(), j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if stored.State != catalog.JobSucceeded || stored.FinishedAt.Before(stored.StartedAt) {
		t.Fatalf("stored job: %s, started %s, finished %s", stored.State, stored.StartedAt, stored.FinishedAt)
	}
}

// TestReplicasWithSkewedClocksNeitherStealNorKeepLeases runs two replicas
// whose clocks are 5 minutes ahead and 5 minutes behind on one catalog
// (PostgreSQL's own clock when COMPACTOR_TEST_POSTGRES_DSN is set; on
// SQLite, one database clock for both): each keeps its live job through
// renewals and the other's passes for expired leases, each sees the other
// alive, and once the replica ahead is cut off from the catalog, the one
// behind takes its job over after the lease, not 5 minutes later.
func TestReplicasWithSkewedClocksNeitherStealNorKeepLeases(t *testing.T) {
	run := func(t *testing.T, open func(clock.Clock) *catalog.Catalog) {
		system := clock.System()
		aheadClock, behindClock := clock.Shift(system, 5*time.Minute), clock.Shift(system, -5*time.Minute)
		ca, cb := open(aheadClock), open(behindClock)
		idA := collectionWithBacklog(t, ca, "on-ahead", 5)
		idB := collectionWithBacklog(t, ca, "on-behind", 5)
		ea, eb := newCommitExec(ca), newCommitExec(cb)
		holdA, holdB := make(chan struct{}), make(chan struct{})
		// The job ahead ignores cancellation until released: a process cut
		// off from the catalog that cannot record its job's end.
		ea.hold[idA], ea.frozen[idA], eb.hold[idB] = holdA, true, holdB
		// Long enough that a loaded machine renews in time: an expiry here
		// would be the clock's doing.
		const lease = 5 * time.Second
		tune := func(c clock.Clock) func(*manager.Config) {
			return func(cfg *manager.Config) {
				cfg.LeaseDuration, cfg.RenewInterval, cfg.Clock = lease, 100*time.Millisecond, c
				cfg.HeartbeatInterval = time.Second
			}
		}
		cut := make(chan struct{})
		sa := observed{Store: ca, expired: make(chan struct{}, 1), renewed: make(chan struct{}, 1)}
		sb := observed{Store: cb, expired: make(chan struct{}, 1), renewed: make(chan struct{}, 1)}
		ahead := startReplica(t, partitioned{Store: sa, cut: cut}, ea, "ahead", tune(aheadClock))
		var releaseA sync.Once
		unfreeze := func() { releaseA.Do(func() { close(holdA) }) }
		t.Cleanup(unfreeze) // before the replica's shutdown, which waits for the job
		jobA, err := ahead.m.Compact(t.Context(), []string{idA}, false, "test")
		if err != nil {
			t.Fatal(err)
		}
		<-ea.started // ahead's one worker runs it: the next job is behind's
		behind := startReplica(t, sb, eb, "behind", tune(behindClock))
		jobB, err := behind.m.Compact(t.Context(), []string{idB}, false, "test")
		if err != nil {
			t.Fatal(err)
		}
		<-eb.started
		// Renewals and lease expiry passes on both replicas, started after
		// both jobs run (a buffered report may predate: one more of each).
		for _, s := range []observed{sa, sb} {
			waitFor(s.renewed, 4)
			waitFor(s.expired, 4)
		}
		for _, id := range []string{jobA[0].Job.ID, jobB[0].Job.ID} {
			if j, err := cb.GetJob(t.Context(), id); err != nil || j.State != catalog.JobRunning {
				t.Fatalf("live job %s after renewals and expiry passes: %+v, %v; want RUNNING", id, j, err)
			}
		}
		for _, r := range []*replica{ahead, behind} {
			nodes, err := r.m.Nodes(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range nodes {
				if !n.Alive {
					t.Fatalf("%s shows %s gone (silent %s)", r.m.Node(), n.Name, n.Silence)
				}
			}
		}
		close(holdB)
		if j := waitJob(t, behind.m, jobB[0].Job.ID); j.State != catalog.JobSucceeded || j.Node != "behind" {
			t.Fatalf("the job of the replica behind: %s on %s (%q), want SUCCEEDED on behind", j.State, j.Node, j.Error)
		}

		close(cut) // the replica ahead can no longer renew
		cutAt := time.Now()
		lost := waitJob(t, behind.m, jobA[0].Job.ID)
		if took := time.Since(cutAt); took > time.Minute {
			t.Fatalf("the dead job was taken over %s after its owner was cut off, want about its %s lease", took, lease)
		}
		if lost.State != catalog.JobFailed || lost.Error != "interrupted: lease of node ahead expired" {
			t.Fatalf("the job of the replica cut off: %s (%q), want FAILED interrupted by its lease", lost.State, lost.Error)
		}
		unfreeze()
	}
	t.Run("sqlite", func(t *testing.T) {
		dsn := filepath.Join(t.TempDir(), "catalog.db")
		db := clock.StepFree(clock.System()) // the one database clock of both
		run(t, func(c clock.Clock) *catalog.Catalog {
			cat, err := catalog.Open(t.Context(), catalog.Config{DSN: dsn, Clock: c, DatabaseClock: db})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cat.Close() })
			return cat
		})
	})
	if base := catalogtest.PostgresBase(); base != "" {
		t.Run("postgres", func(t *testing.T) {
			dsn := catalogtest.PostgresSchema(t, base)
			run(t, func(c clock.Clock) *catalog.Catalog {
				cat, err := catalog.Open(t.Context(), catalog.Config{Driver: "postgres", DSN: dsn, Clock: c})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = cat.Close() })
				return cat
			})
		})
	}
}

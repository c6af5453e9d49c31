package manager_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/compactorhq/compactor/internal/catalog"
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
		cfg.LeaseDuration, cfg.RenewInterval, cfg.Clock = time.Second, 100*time.Millisecond, wall
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

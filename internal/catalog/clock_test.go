package catalog_test

import (
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/clock"
)

// skew is how far the skewed replicas' clocks are off, each way.
const skew = 5 * time.Minute

// openSkewed opens e's database a second time as a replica whose process
// clock is off by offset from e.clock, the database's clock.
func openSkewed(t *testing.T, e *env, offset time.Duration, dbClock func() time.Time) *catalog.Catalog {
	t.Helper()
	c, err := catalog.Open(ctx, catalog.Config{Driver: e.driver, DSN: e.dsn,
		Clock: clock.Shift(clock.Func(e.clock.Now), offset), DatabaseClock: dbClock})
	if err != nil {
		t.Fatalf("open a replica %s off: %v", offset, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestSkewedReplicaClocksDecideNoLease runs two replicas whose clocks are
// 5 minutes ahead and 5 minutes behind on one database: the database's
// clock alone decides job leases, the commit fence, the leader lease and
// node liveness, so neither replica steals a live lease or keeps a dead
// one, and a dead replica's job is taken over as soon as its lease ends.
func TestSkewedReplicaClocksDecideNoLease(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		e.open(t) // migrations
		ahead := openSkewed(t, e, skew, e.clock.Now)
		behind := openSkewed(t, e, -skew, e.clock.Now)
		live := mustCreate(t, ahead, "live", 0)
		dead := mustCreate(t, ahead, "dead", 0)

		mustEnqueue(t, behind, catalog.JobRequest{CollectionID: live.ID, Trigger: catalog.TriggerOneOff})
		kept := mustClaim(t, behind, "behind/1")
		mustEnqueue(t, ahead, catalog.JobRequest{CollectionID: dead.ID, Trigger: catalog.TriggerOneOff})
		lost := mustClaim(t, ahead, "ahead/1")
		for _, j := range []catalog.Job{kept, lost} {
			if want := ms(e.clock.Now()).Add(lease); !j.LeaseExpiresAt.Equal(want) {
				t.Fatalf("lease of %s ends %s, want %s (the database's clock plus the lease)", j.LeaseOwner, j.LeaseExpiresAt, want)
			}
		}
		for _, c := range []*catalog.Catalog{ahead, behind} {
			if got, err := c.ExpireLeases(ctx, nil); err != nil || len(got) != 0 {
				t.Fatalf("ExpireLeases of fresh leases took %+v, %v", got, err)
			}
		}

		// The replica behind keeps renewing; the one ahead has died.
		e.clock.Advance(lease / 2)
		if _, err := behind.RenewLease(ctx, kept.ID, "behind/1", lease, catalog.JobProgress{Phase: "reading log"}); err != nil {
			t.Fatalf("renewal by the replica behind: %v", err)
		}
		e.clock.Advance(lease / 2) // the dead lease ends now: still held
		for _, c := range []*catalog.Catalog{ahead, behind} {
			if got, err := c.ExpireLeases(ctx, nil); err != nil || len(got) != 0 {
				t.Fatalf("ExpireLeases at the last instant of a lease took %+v, %v", got, err)
			}
		}
		e.clock.Advance(time.Millisecond)
		got, err := behind.ExpireLeases(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0].ID != lost.ID {
			t.Fatalf("the replica behind took over %+v, want only the dead replica's job %s, at once", got, lost.ID)
		}
		if s, _ := ahead.GetJob(ctx, kept.ID); s.State != catalog.JobRunning {
			t.Fatalf("the live job is %s, want RUNNING", s.State)
		}
		done := lost
		done.State, done.FinishedAt = catalog.JobSucceeded, ms(e.clock.Now())
		wantErr(t, "FinishJob of a job taken over", ahead.FinishJob(ctx, "ahead/1", done), catalog.ErrLeaseLost)
		done = kept
		done.State, done.FinishedAt = catalog.JobSucceeded, ms(e.clock.Now())
		if err := behind.FinishJob(ctx, "behind/1", done); err != nil {
			t.Fatalf("FinishJob under a live lease by the replica behind: %v", err)
		}

		// The leader lease.
		const ttl = 10 * time.Second
		acquire := func(c *catalog.Catalog, owner string) bool {
			t.Helper()
			held, err := c.AcquireLeaderLease(ctx, "scheduler", owner, ttl)
			if err != nil {
				t.Fatal(err)
			}
			return held
		}
		if !acquire(behind, "behind") || acquire(ahead, "ahead") {
			t.Fatal("the replica ahead took the leader lease of the one behind")
		}
		e.clock.Advance(ttl)
		if acquire(ahead, "ahead") || !acquire(behind, "behind") {
			t.Fatal("the leader lease changed hands before it expired")
		}
		e.clock.Advance(ttl + time.Millisecond)
		if !acquire(ahead, "ahead") {
			t.Fatal("the replica ahead could not take an expired leader lease")
		}

		// Node liveness: both heartbeat now; each sees both silent for 0.
		for _, n := range []struct {
			c    *catalog.Catalog
			name string
		}{{ahead, "ahead"}, {behind, "behind"}} {
			if err := n.c.Heartbeat(ctx, catalog.Node{Name: n.name}); err != nil {
				t.Fatal(err)
			}
		}
		e.clock.Advance(time.Second)
		for _, c := range []*catalog.Catalog{ahead, behind} {
			nodes, err := c.ListNodes(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range nodes {
				if n.Silence != time.Second {
					t.Fatalf("node %s silent for %s, want 1s on every replica", n.Name, n.Silence)
				}
			}
		}
	})
}

// TestLeaseTimesComeFromThePostgresClock runs the replicas of
// TestSkewedReplicaClocksDecideNoLease on PostgreSQL's own clock (no
// stand-in): a lease ends its length after the server's clock_timestamp()
// whatever the claiming replica's clock says, the replica ahead takes over
// nothing live, and the replica behind takes over a dead job once its lease
// ends by the server's clock, not 5 minutes later.
func TestLeaseTimesComeFromThePostgresClock(t *testing.T) {
	base := postgresBase()
	if base == "" {
		t.Skipf("set %s to run against PostgreSQL", "COMPACTOR_TEST_POSTGRES_DSN")
	}
	e := &env{backend: "postgres", driver: "postgres", dsn: postgresSchema(t, base), clock: newClock()}
	e.open(t)
	system := clock.System()
	open := func(offset time.Duration) *catalog.Catalog {
		c, err := catalog.Open(ctx, catalog.Config{Driver: e.driver, DSN: e.dsn, Clock: clock.Shift(system, offset)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	ahead, behind := open(skew), open(-skew)
	db, err := sql.Open("pgx", e.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	serverNow := func() time.Time {
		t.Helper()
		var now time.Time
		if err := db.QueryRowContext(ctx, `SELECT clock_timestamp()`).Scan(&now); err != nil {
			t.Fatal(err)
		}
		return now
	}

	live := mustCreate(t, ahead, "live", 0)
	mustEnqueue(t, behind, catalog.JobRequest{CollectionID: live.ID, Trigger: catalog.TriggerOneOff})
	const long = time.Hour
	before := serverNow()
	kept, err := behind.ClaimJob(ctx, "behind/1", long)
	if err != nil {
		t.Fatal(err)
	}
	after := serverNow()
	if lo, hi := before.Add(long).Truncate(time.Millisecond), after.Add(long); kept.LeaseExpiresAt.Before(lo) || kept.LeaseExpiresAt.After(hi) {
		t.Fatalf("lease claimed by the replica behind ends %s, want within [%s, %s] by the server's clock", kept.LeaseExpiresAt, lo, hi)
	}
	if got, err := ahead.ExpireLeases(ctx, nil); err != nil || len(got) != 0 {
		t.Fatalf("the replica ahead took over %+v, %v", got, err)
	}
	if held, err := behind.AcquireLeaderLease(ctx, "scheduler", "behind", long); err != nil || !held {
		t.Fatalf("AcquireLeaderLease by the replica behind: %v, %v", held, err)
	}
	if held, err := ahead.AcquireLeaderLease(ctx, "scheduler", "ahead", long); err != nil || held {
		t.Fatalf("the replica ahead took a live leader lease: %v, %v", held, err)
	}
	if err := behind.Heartbeat(ctx, catalog.Node{Name: "behind"}); err != nil {
		t.Fatal(err)
	}
	nodes, err := ahead.ListNodes(ctx)
	if err != nil || len(nodes) != 1 || nodes[0].Silence > time.Minute {
		t.Fatalf("nodes seen by the replica ahead: %+v, %v; want behind silent well under a minute", nodes, err)
	}

	// A dead replica's short lease: the replica behind takes the job over
	// once the server's clock passes its end.
	dead := mustCreate(t, ahead, "dead", 0)
	mustEnqueue(t, ahead, catalog.JobRequest{CollectionID: dead.ID, Trigger: catalog.TriggerOneOff})
	const short = 500 * time.Millisecond
	lost, err := ahead.ClaimJob(ctx, "ahead/1", short)
	if err != nil {
		t.Fatal(err)
	}
	// Bounded well under the 5 minutes the skew would add.
	deadline := time.Now().Add(time.Minute)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		got, err := behind.ExpireLeases(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) > 0 {
			if len(got) != 1 || got[0].ID != lost.ID {
				t.Fatalf("the replica behind took over %+v, want only %s", got, lost.ID)
			}
			if at := serverNow(); at.Before(lost.LeaseExpiresAt) {
				t.Fatalf("taken over at %s by the server's clock, before the lease ended at %s", at, lost.LeaseExpiresAt)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the dead job's lease (%s, ending %s) was not taken over within a minute", short, lost.LeaseExpiresAt)
		}
		<-tick.C
	}
	if s, err := behind.GetJob(ctx, kept.ID); err != nil || s.State != catalog.JobRunning {
		t.Fatalf("the live job: %+v, %v", s, err)
	}
	if err := ahead.FinishJob(ctx, "ahead/1", catalog.Job{ID: lost.ID, CollectionID: dead.ID, State: catalog.JobSucceeded, Trigger: catalog.TriggerOneOff}); !errors.Is(err, catalog.ErrLeaseLost) {
		t.Fatalf("FinishJob of the job taken over: %v, want ErrLeaseLost", err)
	}
}

// TestExpireLeasesLeavesTheLeasesItsCallerRenews: a replica never takes
// over a job it runs itself, even past the lease's end by the database's
// clock; its own lease keeper decides by the monotonic clock.
func TestExpireLeasesLeavesTheLeasesItsCallerRenews(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		c := e.open(t)
		mine := mustCreate(t, c, "mine", 0)
		other := mustCreate(t, c, "other", 0)
		mustEnqueue(t, c, catalog.JobRequest{CollectionID: mine.ID, Trigger: catalog.TriggerOneOff})
		own := mustClaim(t, c, "n1/1")
		mustEnqueue(t, c, catalog.JobRequest{CollectionID: other.ID, Trigger: catalog.TriggerOneOff})
		dead := mustClaim(t, c, "n2/1")
		e.clock.Advance(lease + time.Millisecond)
		got, err := c.ExpireLeases(ctx, []string{own.ID})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0].ID != dead.ID {
			t.Fatalf("ExpireLeases renewing %s took over %+v, want only %s", own.ID, got, dead.ID)
		}
		if s, _ := c.GetJob(ctx, own.ID); s.State != catalog.JobRunning {
			t.Fatalf("the caller's own job is %s, want RUNNING", s.State)
		}
	})
}

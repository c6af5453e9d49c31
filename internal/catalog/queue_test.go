package catalog_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/compactorhq/compactor/internal/catalog"
)

const lease = 30 * time.Second

func mustEnqueue(t testing.TB, c *catalog.Catalog, r catalog.JobRequest) (catalog.Job, bool) {
	t.Helper()
	j, created, err := c.EnqueueJob(ctx, r)
	if err != nil {
		t.Fatalf("EnqueueJob(%+v): %v", r, err)
	}
	return j, created
}

func mustClaim(t testing.TB, c *catalog.Catalog, node string) catalog.Job {
	t.Helper()
	j, err := c.ClaimJob(ctx, node, lease)
	if err != nil {
		t.Fatalf("ClaimJob(%s): %v", node, err)
	}
	return j
}

func TestEnqueueJobKeepsOneQueuedJobPerCollection(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		c := e.open(t)
		col := mustCreate(t, c, "dedupe", 0)
		first, created := mustEnqueue(t, c, catalog.JobRequest{CollectionID: col.ID, Trigger: catalog.TriggerScheduled, Reason: "backlog"})
		if !created || first.State != catalog.JobQueued || first.Attempt != 1 || first.Expedited {
			t.Fatalf("first enqueue: created %v, job %+v", created, first)
		}
		again, created := mustEnqueue(t, c, catalog.JobRequest{CollectionID: col.ID, Trigger: catalog.TriggerOneOff, Reason: "operator"})
		if created || again.ID != first.ID || !again.Expedited || again.Reason != "backlog" {
			t.Fatalf("second enqueue: created %v, job %+v; want the queued job, expedited", created, again)
		}
		stored, err := c.GetJob(ctx, first.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !stored.Expedited {
			t.Error("the expedited priority was not stored")
		}

		// The database refuses a second QUEUED job however it is inserted.
		dup := first
		dup.ID = "another"
		wantErr(t, "InsertJob of a second queued job", c.InsertJob(ctx, dup), catalog.ErrAlreadyExists)

		_, _, err = c.EnqueueJob(ctx, catalog.JobRequest{CollectionID: "no-such-collection", Trigger: catalog.TriggerOneOff})
		wantErr(t, "EnqueueJob of an unknown collection", err, catalog.ErrNotFound)
		_, _, err = c.EnqueueJob(ctx, catalog.JobRequest{CollectionID: col.ID, Trigger: "NOW"})
		wantErr(t, "EnqueueJob with an unknown trigger", err, catalog.ErrInvalidArgument)
	})
}

func TestClaimJobOrder(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		c := e.open(t)
		t0 := ms(e.clock.Now())
		var cols []catalog.Collection
		for i := range 6 {
			cols = append(cols, mustCreate(t, c, fmt.Sprint("order-", i), 0))
		}
		// Enqueued in this order; claimed one-offs first (with the
		// scheduled job an operator expedited), then the oldest backlog
		// (an unknown age last), then enqueue order: jobs enqueued within
		// one millisecond keep their order.
		reqs := []catalog.JobRequest{
			{CollectionID: cols[0].ID, Trigger: catalog.TriggerScheduled, OldestAt: t0.Add(-time.Minute)},
			{CollectionID: cols[1].ID, Trigger: catalog.TriggerScheduled},
			{CollectionID: cols[2].ID, Trigger: catalog.TriggerScheduled, OldestAt: t0.Add(-time.Hour)},
			{CollectionID: cols[3].ID, Trigger: catalog.TriggerOneOff},
			{CollectionID: cols[4].ID, Trigger: catalog.TriggerScheduled, OldestAt: t0.Add(-time.Second)},
			{CollectionID: cols[5].ID, Trigger: catalog.TriggerOneOff},
		}
		ids := make([]string, len(reqs))
		for i, r := range reqs {
			j, _ := mustEnqueue(t, c, r)
			ids[i] = j.ID
		}
		mustEnqueue(t, c, catalog.JobRequest{CollectionID: cols[4].ID, Trigger: catalog.TriggerOneOff}) // expedites job 4
		want := []string{ids[4], ids[3], ids[5], ids[2], ids[0], ids[1]}

		queue, err := c.ListQueue(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		var listed []string
		for _, j := range queue {
			listed = append(listed, j.ID)
		}
		equal(t, "ListQueue order", listed, want)

		var claimed []string
		for range want {
			claimed = append(claimed, mustClaim(t, c, "n1").ID)
		}
		equal(t, "claim order", claimed, want)
		_, err = c.ClaimJob(ctx, "n1", lease)
		wantErr(t, "ClaimJob of an empty queue", err, catalog.ErrNoJob)
	})
}

func TestClaimJobWaitsForRunningJobAndBackoff(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		c := e.open(t)
		busy := mustCreate(t, c, "busy", 0)
		backoff := mustCreate(t, c, "backing-off", 0)
		mustEnqueue(t, c, catalog.JobRequest{CollectionID: busy.ID, Trigger: catalog.TriggerOneOff})
		running, err := c.ClaimJob(ctx, "n1", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if running.State != catalog.JobRunning || running.LeaseOwner != "n1" || running.Node != "n1" ||
			!running.LeaseExpiresAt.Equal(ms(e.clock.Now()).Add(time.Hour)) || running.Progress.Phase != "starting" {
			t.Fatalf("claimed job %+v", running)
		}
		stored, err := c.GetJob(ctx, running.ID)
		if err != nil {
			t.Fatal(err)
		}
		equal(t, "stored claimed job", stored, running)

		followUp, _ := mustEnqueue(t, c, catalog.JobRequest{CollectionID: busy.ID, Trigger: catalog.TriggerOneOff})
		retryAfter := ms(e.clock.Now()).Add(time.Minute)
		if err := c.SetRetry(ctx, backoff.ID, 3, retryAfter); err != nil {
			t.Fatal(err)
		}
		got := mustGet(t, c, backoff.ID)
		if got.RetryCount != 3 || !got.RetryAfter.Equal(retryAfter) {
			t.Fatalf("retry state %d, %v; want 3, %v", got.RetryCount, got.RetryAfter, retryAfter)
		}
		scheduled, _ := mustEnqueue(t, c, catalog.JobRequest{CollectionID: backoff.ID, Trigger: catalog.TriggerScheduled})
		if scheduled.Attempt != 4 {
			t.Errorf("attempt %d after 3 failures, want 4", scheduled.Attempt)
		}
		_, err = c.ClaimJob(ctx, "n2", lease)
		wantErr(t, "ClaimJob with a running collection and a backoff", err, catalog.ErrNoJob)

		e.clock.Advance(time.Minute)
		if j := mustClaim(t, c, "n2"); j.ID != scheduled.ID {
			t.Fatalf("claimed %s after the backoff, want the scheduled job %s", j.ID, scheduled.ID)
		}
		done := running
		done.State, done.FinishedAt = catalog.JobSucceeded, ms(e.clock.Now())
		if err := c.FinishJob(ctx, "n1", done); err != nil {
			t.Fatal(err)
		}
		if j := mustClaim(t, c, "n2"); j.ID != followUp.ID {
			t.Fatalf("claimed %s once the running job finished, want its follow-up %s", j.ID, followUp.ID)
		}
	})
}

func TestLeaseRenewCancelAndFencing(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		c := e.open(t)
		col := mustCreate(t, c, "leased", 4)
		mustAppend(t, c, col.ID, adds("a", 10, 4))
		mustEnqueue(t, c, catalog.JobRequest{CollectionID: col.ID, Trigger: catalog.TriggerOneOff})
		job := mustClaim(t, c, "n1")

		e.clock.Advance(lease / 2)
		p := catalog.JobProgress{Phase: "writing blocks", OpRecordsRead: 6, OpRecordsTotal: 10, BytesWritten: 4096,
			BlocksWritten: 1, BlocksTotal: 3, Fraction: 0.55, ETA: 2500 * time.Millisecond, ETAKnown: true}
		cancel, err := c.RenewLease(ctx, job.ID, "n1", lease, p)
		if err != nil || cancel {
			t.Fatalf("RenewLease: cancel %v, err %v", cancel, err)
		}
		_, err = c.RenewLease(ctx, job.ID, "n2", lease, p)
		wantErr(t, "RenewLease by another node", err, catalog.ErrLeaseLost)
		stored, err := c.GetJob(ctx, job.ID)
		if err != nil {
			t.Fatal(err)
		}
		p.UpdatedAt = ms(e.clock.Now())
		equal(t, "persisted progress", stored.Progress, p)
		// An unknown ETA is stored as unknown (NULL), not as 0.
		p.ETA, p.ETAKnown = 0, false
		if _, err := c.RenewLease(ctx, job.ID, "n1", lease, p); err != nil {
			t.Fatal(err)
		}
		if stored, err = c.GetJob(ctx, job.ID); err != nil || stored.Progress.ETAKnown {
			t.Fatalf("progress with an unknown ETA persisted as %+v (err %v)", stored.Progress, err)
		}
		if want := ms(e.clock.Now()).Add(lease); !stored.LeaseExpiresAt.Equal(want) {
			t.Errorf("lease expires %v, want %v", stored.LeaseExpiresAt, want)
		}

		// Cancel from any replica: the owner sees it at its next renewal.
		got, err := c.CancelJob(ctx, job.ID, "cancelled by operator")
		if err != nil || got.State != catalog.JobRunning || !got.CancelRequested {
			t.Fatalf("CancelJob of a running job: %+v, %v", got, err)
		}
		if cancel, err := c.RenewLease(ctx, job.ID, "n1", lease, p); err != nil || !cancel {
			t.Fatalf("RenewLease after a cancel request: cancel %v, err %v", cancel, err)
		}

		// A commit by a node that does not hold the lease writes nothing.
		done := stored
		done.State, done.FinishedAt, done.VersionAfter = catalog.JobSucceeded, ms(e.clock.Now()), 1
		cm := catalog.Commit{CollectionID: col.ID, BaseVersion: 0, NewVersion: 1, ManifestKey: "m1", CompactionOffset: 10,
			RecordCount: 10, Job: &done, LeaseOwner: "n2"}
		wantErr(t, "CommitCompaction by another node", c.CommitCompaction(ctx, cm), catalog.ErrLeaseLost)
		if v := mustGet(t, c, col.ID).SegmentVersion; v != 0 {
			t.Fatalf("segment version %d after a fenced commit, want 0", v)
		}
		// Nor does one by the owner once its lease expired.
		e.clock.Advance(lease + time.Millisecond)
		cm.LeaseOwner = "n1"
		wantErr(t, "CommitCompaction with an expired lease", c.CommitCompaction(ctx, cm), catalog.ErrLeaseLost)
		_, err = c.RenewLease(ctx, job.ID, "n1", lease, p)
		wantErr(t, "RenewLease of an expired lease", err, catalog.ErrLeaseLost)
		if v := mustGet(t, c, col.ID).SegmentVersion; v != 0 {
			t.Fatalf("segment version %d after a commit with an expired lease, want 0", v)
		}
	})
}

func TestFencedCommitByTheOwner(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		c := e.open(t)
		col := mustCreate(t, c, "owned", 4)
		mustAppend(t, c, col.ID, adds("a", 10, 4))
		mustEnqueue(t, c, catalog.JobRequest{CollectionID: col.ID, Trigger: catalog.TriggerOneOff})
		job := mustClaim(t, c, "n1")
		done := job
		done.State, done.FinishedAt, done.VersionAfter, done.RecordsRead = catalog.JobSucceeded, ms(e.clock.Now()), 1, 10
		cm := catalog.Commit{CollectionID: col.ID, BaseVersion: 0, NewVersion: 1, ManifestKey: "m1", CompactionOffset: 10,
			RecordCount: 10, Job: &done, LeaseOwner: "n1"}
		if err := c.CommitCompaction(ctx, cm); err != nil {
			t.Fatal(err)
		}
		stored, err := c.GetJob(ctx, job.ID)
		if err != nil {
			t.Fatal(err)
		}
		if stored.State != catalog.JobSucceeded || stored.LeaseOwner != "" || !stored.LeaseExpiresAt.IsZero() || stored.RecordsRead != 10 {
			t.Fatalf("committed job %+v: want SUCCEEDED, lease released", stored)
		}
		wantErr(t, "FinishJob of a finished job", c.FinishJob(ctx, "n1", done), catalog.ErrLeaseLost)
	})
}

func TestExpireLeasesTakesJobsOver(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		c := e.open(t)
		dead := mustCreate(t, c, "dead-node", 0)
		alive := mustCreate(t, c, "live-node", 0)
		mustEnqueue(t, c, catalog.JobRequest{CollectionID: dead.ID, Trigger: catalog.TriggerScheduled, Reason: "backlog"})
		lost := mustClaim(t, c, "n1")
		plan := catalog.JobProgress{Phase: "reading log", OpRecordsRead: 40, OpRecordsTotal: 50, Planned: true, OffsetStart: 100, OffsetEnd: 150, VersionBefore: 3}
		if _, err := c.RenewLease(ctx, lost.ID, "n1", lease, plan); err != nil {
			t.Fatal(err)
		}
		e.clock.Advance(lease / 2)
		mustEnqueue(t, c, catalog.JobRequest{CollectionID: alive.ID, Trigger: catalog.TriggerOneOff})
		kept := mustClaim(t, c, "n2")

		e.clock.Advance(lease/2 + time.Millisecond)
		got, err := c.ExpireLeases(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0].ID != lost.ID || got[0].State != catalog.JobFailed || got[0].Error != "interrupted: lease of node n1 expired" {
			t.Fatalf("expired %+v, want only job %s FAILED with the lease note", got, lost.ID)
		}
		// It keeps what its owner persisted: offsets, base version, records read.
		stored, err := c.GetJob(ctx, lost.ID)
		if err != nil {
			t.Fatal(err)
		}
		if stored.OffsetStart != 100 || stored.OffsetEnd != 150 || stored.VersionBefore != 3 || stored.VersionAfter != 3 || stored.RecordsRead != 40 {
			t.Fatalf("interrupted job keeps offsets (%d, %d], version %d -> %d, %d records read; want (100, 150], 3 -> 3, 40",
				stored.OffsetStart, stored.OffsetEnd, stored.VersionBefore, stored.VersionAfter, stored.RecordsRead)
		}
		if got[0].VersionAfter != 3 || got[0].RecordsRead != 40 {
			t.Errorf("returned interrupted job: version after %d, records read %d", got[0].VersionAfter, got[0].RecordsRead)
		}
		stored, err = c.GetJob(ctx, kept.ID)
		if err != nil || stored.State != catalog.JobRunning {
			t.Fatalf("job with a live lease: %+v, %v", stored, err)
		}
		queue, err := c.ListQueue(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(queue) != 1 || queue[0].CollectionID != dead.ID || queue[0].Continues != lost.ID || queue[0].Attempt != lost.Attempt+1 ||
			queue[0].Trigger != catalog.TriggerScheduled || queue[0].Reason != "backlog" {
			t.Fatalf("queue after the takeover: %+v; want one follow-up of %s", queue, lost.ID)
		}
		if again, err := c.ExpireLeases(ctx, nil); err != nil || len(again) != 0 {
			t.Fatalf("second ExpireLeases: %+v, %v", again, err)
		}
		// The restarted owner cannot finish the job it lost.
		done := lost
		done.State, done.FinishedAt = catalog.JobSucceeded, ms(e.clock.Now())
		wantErr(t, "FinishJob after a takeover", c.FinishJob(ctx, "n1", done), catalog.ErrLeaseLost)
	})
}

func TestReleaseNodeAndCancelQueued(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		c := e.open(t)
		a := mustCreate(t, c, "a", 0)
		b := mustCreate(t, c, "b", 0)
		d := mustCreate(t, c, "d", 0)
		// Leases as ClaimJob's callers write them: the node's name and the
		// token of the process. n10 is another node whose name n1 prefixes.
		mustEnqueue(t, c, catalog.JobRequest{CollectionID: a.ID, Trigger: catalog.TriggerOneOff})
		mine := mustClaim(t, c, "n1/0f3a9c2e")
		mustEnqueue(t, c, catalog.JobRequest{CollectionID: b.ID, Trigger: catalog.TriggerOneOff})
		theirs := mustClaim(t, c, "n2/77aa01bc")
		mustEnqueue(t, c, catalog.JobRequest{CollectionID: d.ID, Trigger: catalog.TriggerOneOff})
		prefixed := mustClaim(t, c, "n10/5e5e5e5e")
		got, err := c.ReleaseNode(ctx, "n1")
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0].ID != mine.ID || got[0].State != catalog.JobFailed || got[0].Error != "interrupted: the process stopped while the job ran" {
			t.Fatalf("released %+v, want job %s FAILED with the documented error", got, mine.ID)
		}
		if s, _ := c.GetJob(ctx, mine.ID); s.State != catalog.JobFailed || s.Error != got[0].Error || s.LeaseOwner != "" {
			t.Fatalf("released job stored as %s %q (lease %q)", s.State, s.Error, s.LeaseOwner)
		}
		for _, j := range []catalog.Job{theirs, prefixed} {
			if s, _ := c.GetJob(ctx, j.ID); s.State != catalog.JobRunning {
				t.Fatalf("job of %s is %s, want RUNNING", j.LeaseOwner, s.State)
			}
		}
		queue, err := c.ListQueue(ctx, 0)
		if err != nil || len(queue) != 1 || queue[0].Continues != mine.ID || queue[0].CollectionID != a.ID {
			t.Fatalf("queue %+v, %v: want the follow-up of %s", queue, err, mine.ID)
		}
		cancelled, err := c.CancelJob(ctx, queue[0].ID, "cancelled by operator")
		if err != nil || cancelled.State != catalog.JobCancelled || cancelled.Note != "cancelled by operator" || cancelled.FinishedAt.IsZero() {
			t.Fatalf("CancelJob of a queued job: %+v, %v", cancelled, err)
		}
		_, err = c.CancelJob(ctx, queue[0].ID, "again")
		wantErr(t, "CancelJob of a cancelled job", err, catalog.ErrJobFinished)
		_, err = c.CancelJob(ctx, "no-such-job", "")
		wantErr(t, "CancelJob of an unknown job", err, catalog.ErrNotFound)
	})
}

// TestReleaseNodeOnAnExclusiveCatalogEndsEveryRunningJob: a process that
// holds a SQLite catalog's process lock knows that every RUNNING job
// belongs to a process that died, whatever node name it ran under.
func TestReleaseNodeOnAnExclusiveCatalogEndsEveryRunningJob(t *testing.T) {
	dsn := filepath.Join(t.TempDir(), "catalog.db")
	open := func(node string) *catalog.Catalog {
		c, err := catalog.Open(ctx, catalog.Config{DSN: dsn, Exclusive: true, Holder: "node " + node})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	c := open("old")
	var running []string
	for _, name := range []string{"a", "b"} {
		col := mustCreate(t, c, name, 0)
		mustEnqueue(t, c, catalog.JobRequest{CollectionID: col.ID, Trigger: catalog.TriggerScheduled})
		running = append(running, mustClaim(t, c, "old-"+name+"/1234abcd").ID)
	}
	if err := c.Close(); err != nil { // the process died
		t.Fatal(err)
	}
	c = open("new")
	defer c.Close()
	got, err := c.ReleaseNode(ctx, "new")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].ID != running[0] || got[1].ID != running[1] {
		t.Fatalf("released %+v, want jobs %v", got, running)
	}
	for _, j := range got {
		if j.State != catalog.JobFailed || j.Error != "interrupted: the process stopped while the job ran" {
			t.Fatalf("released job %s: %s %q", j.ID, j.State, j.Error)
		}
	}
	if queue, err := c.ListQueue(ctx, 0); err != nil || len(queue) != 2 {
		t.Fatalf("queue %+v, %v: want both follow-ups", queue, err)
	}
}

func TestNodesAndLeaderLease(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		c := e.open(t)
		started := ms(e.clock.Now())
		for _, n := range []catalog.Node{{Name: "n2", Address: "10.0.0.2:7070", Version: "v1", StartedAt: started}, {Name: "n1", Address: "10.0.0.1:7070", Version: "v1", StartedAt: started}} {
			if err := c.Heartbeat(ctx, n); err != nil {
				t.Fatal(err)
			}
		}
		beat := ms(e.clock.Advance(time.Second))
		if err := c.Heartbeat(ctx, catalog.Node{Name: "n1", Address: "10.0.0.1:7070", Version: "v2", StartedAt: started}); err != nil {
			t.Fatal(err)
		}
		nodes, err := c.ListNodes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		equal(t, "nodes", nodes, []catalog.Node{
			{Name: "n1", Address: "10.0.0.1:7070", Version: "v2", StartedAt: started, HeartbeatAt: beat},
			{Name: "n2", Address: "10.0.0.2:7070", Version: "v1", StartedAt: started, HeartbeatAt: started, Silence: time.Second},
		})
		wantErr(t, "Heartbeat without a name", c.Heartbeat(ctx, catalog.Node{}), catalog.ErrInvalidArgument)

		const ttl = 10 * time.Second
		acquire := func(owner string) bool {
			t.Helper()
			held, err := c.AcquireLeaderLease(ctx, "scheduler", owner, ttl)
			if err != nil {
				t.Fatal(err)
			}
			return held
		}
		if !acquire("n1") || acquire("n2") || !acquire("n1") {
			t.Fatal("n1 must take and keep the lease while n2 is refused")
		}
		e.clock.Advance(ttl + time.Millisecond)
		if !acquire("n2") || acquire("n1") {
			t.Fatal("n2 must take the lease once n1's expired")
		}
		if err := c.ReleaseLeaderLease(ctx, "scheduler", "n1"); err != nil { // not the holder: no effect
			t.Fatal(err)
		}
		if acquire("n1") {
			t.Fatal("a release by a non-holder freed the lease")
		}
		if err := c.ReleaseLeaderLease(ctx, "scheduler", "n2"); err != nil {
			t.Fatal(err)
		}
		if !acquire("n1") {
			t.Fatal("n1 must take a released lease at once")
		}
	})
}

// TestConcurrentClaimsNeverShareAJob has several workers (on PostgreSQL,
// several connections: the shape of several replicas) claim and finish jobs
// of a few collections while others enqueue: every job runs once, and no two
// jobs of a collection ever run at once.
func TestConcurrentClaimsNeverShareAJob(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		c := e.open(t)
		var cols []string
		for i := range 4 {
			cols = append(cols, mustCreate(t, c, fmt.Sprint("busy-", i), 0).ID)
		}
		const perCollection = 15
		var (
			mu       sync.Mutex
			running  = map[string]string{} // collection -> job
			finished = map[string]int{}    // job -> times finished
			failures []string
			created  int
			progress = make(chan struct{}, 1) // a job finished
			wg       sync.WaitGroup
		)
		fail := func(format string, args ...any) {
			mu.Lock()
			failures = append(failures, fmt.Sprintf(format, args...))
			mu.Unlock()
			select {
			case progress <- struct{}{}:
			default:
			}
		}
		for _, col := range cols {
			wg.Go(func() {
				for range perCollection {
					_, ok, err := c.EnqueueJob(ctx, catalog.JobRequest{CollectionID: col, Trigger: catalog.TriggerOneOff})
					if err != nil {
						fail("enqueue: %v", err)
					}
					if ok {
						mu.Lock()
						created++
						mu.Unlock()
					}
				}
			})
		}
		stop := make(chan struct{})
		var workers sync.WaitGroup
		for w := range 4 {
			node := fmt.Sprint("n", w)
			workers.Go(func() {
				for {
					j, err := c.ClaimJob(ctx, node, time.Hour)
					if errors.Is(err, catalog.ErrNoJob) || errors.Is(err, catalog.ErrUnavailable) {
						select {
						case <-stop:
							return
						default:
							continue
						}
					}
					if err != nil {
						fail("claim: %v", err)
						return
					}
					mu.Lock()
					if other, ok := running[j.CollectionID]; ok {
						failures = append(failures, fmt.Sprintf("jobs %s and %s of one collection run at once", other, j.ID))
					}
					running[j.CollectionID] = j.ID
					mu.Unlock()
					j.State, j.FinishedAt = catalog.JobSucceeded, j.StartedAt
					mu.Lock()
					delete(running, j.CollectionID)
					finished[j.ID]++
					mu.Unlock()
					if err := c.FinishJob(ctx, node, j); err != nil {
						fail("finish %s: %v", j.ID, err)
					}
					select {
					case progress <- struct{}{}:
					default:
					}
				}
			})
		}
		wg.Wait()
		// Every job created must be claimed and finished; then the workers stop.
		for {
			mu.Lock()
			n, want, failed := len(finished), created, len(failures) > 0
			mu.Unlock()
			if n == want || failed {
				break
			}
			<-progress
		}
		close(stop)
		workers.Wait()
		for _, f := range failures {
			t.Error(f)
		}
		done, err := c.ListJobs(ctx, catalog.JobFilter{States: []catalog.JobState{catalog.JobSucceeded}})
		if err != nil {
			t.Fatal(err)
		}
		if len(done) != len(finished) {
			t.Errorf("%d jobs SUCCEEDED in the catalog, %d finished by the workers", len(done), len(finished))
		}
		for id, n := range finished {
			if n != 1 {
				t.Errorf("job %s finished %d times", id, n)
			}
		}
		if len(done) == 0 {
			t.Error("no job ran")
		}
	})
}

func TestALeaseBelongsToOneProcessOfANode(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		c := e.open(t)
		col := mustCreate(t, c, "twins", 0)
		mustEnqueue(t, c, catalog.JobRequest{CollectionID: col.ID, Trigger: catalog.TriggerOneOff})
		j, err := c.ClaimJob(ctx, "n1/process-a", lease)
		if err != nil {
			t.Fatal(err)
		}
		if j.Node != "n1" || j.LeaseOwner != "n1/process-a" {
			t.Fatalf("claimed job node %q, lease owner %q; want n1 and n1/process-a", j.Node, j.LeaseOwner)
		}
		// Another process started with the same --node holds nothing.
		_, err = c.RenewLease(ctx, j.ID, "n1/process-b", lease, catalog.JobProgress{})
		wantErr(t, "RenewLease by the node's other process", err, catalog.ErrLeaseLost)
		done := j
		done.State, done.FinishedAt = catalog.JobSucceeded, ms(e.clock.Now())
		wantErr(t, "FinishJob by the node's other process", c.FinishJob(ctx, "n1/process-b", done), catalog.ErrLeaseLost)
		if err := c.FinishJob(ctx, "n1/process-a", done); err != nil {
			t.Fatal(err)
		}
	})
}

package manager_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/catalog/catalogtest"
	"github.com/compactorhq/compactor/internal/manager"
	"github.com/compactorhq/compactor/internal/materialize"
)

// These tests run several managers (the shape of several replicas) against
// one real catalog: SQLite in a temp dir, and PostgreSQL as well when
// COMPACTOR_TEST_POSTGRES_DSN is set (a schema per test). The executor
// commits through the catalog for real, so claims, leases and the fenced
// commit are the catalog's.

func forEachCatalog(t *testing.T, fn func(t *testing.T, open func() *catalog.Catalog)) {
	t.Run("sqlite", func(t *testing.T) {
		dsn := filepath.Join(t.TempDir(), "catalog.db")
		fn(t, func() *catalog.Catalog { return openCatalog(t, "sqlite", dsn) })
	})
	base := catalogtest.PostgresBase()
	if base == "" {
		return
	}
	t.Run("postgres", func(t *testing.T) {
		dsn := catalogtest.PostgresSchema(t, base)
		fn(t, func() *catalog.Catalog { return openCatalog(t, "postgres", dsn) })
	})
}

func openCatalog(t *testing.T, driver, dsn string) *catalog.Catalog {
	t.Helper()
	c, err := catalog.Open(context.Background(), catalog.Config{Driver: driver, DSN: dsn})
	if err != nil {
		t.Fatalf("open %s catalog: %v", driver, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// commitExec compacts by committing the whole backlog through the catalog
// (no blobs). hold, when set for a collection, is waited for before the
// commit, ignoring cancellation when frozen is set: a process that stopped
// and came back.
type commitExec struct {
	cat *catalog.Catalog

	mu      sync.Mutex
	hold    map[string]chan struct{}
	frozen  map[string]bool
	started chan string // collection ids, as jobs start
	commits map[string]error
}

func newCommitExec(cat *catalog.Catalog) *commitExec {
	return &commitExec{cat: cat, hold: map[string]chan struct{}{}, frozen: map[string]bool{},
		started: make(chan string, 100), commits: map[string]error{}}
}

func (e *commitExec) Prepare(ctx context.Context, j catalog.Job, progress func(manager.Progress)) (manager.Prepared, error) {
	id := j.CollectionID
	e.mu.Lock()
	hold, frozen := e.hold[id], e.frozen[id]
	e.mu.Unlock()
	e.started <- id
	c, err := e.cat.GetCollection(ctx, id)
	if err != nil {
		return nil, err
	}
	progress(manager.Progress{Phase: "reading log", OpRecordsTotal: c.Backlog()})
	if hold != nil && !frozen {
		select {
		case <-hold:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	o := manager.Outcome{OffsetStart: c.CompactionOffset, OffsetEnd: c.LogPosition, OpRecordsRead: c.Backlog(),
		VersionBefore: c.SegmentVersion, VersionAfter: c.SegmentVersion}
	if c.Backlog() == 0 {
		o.Note = "nothing to compact"
		return &commitPrepared{o: o}, nil
	}
	o.VersionAfter++
	return &commitPrepared{o: o, commit: func(j catalog.Job) error {
		if hold != nil { // frozen: a process that stopped and came back
			<-hold
		}
		err := e.cat.CommitCompaction(context.WithoutCancel(ctx), catalog.Commit{
			CollectionID: id, BaseVersion: c.SegmentVersion, NewVersion: o.VersionAfter, ManifestKey: fmt.Sprint(id, "/v", o.VersionAfter),
			CompactionOffset: c.LogPosition, RecordCount: c.Backlog(), Job: &j, LeaseOwner: j.LeaseOwner,
		})
		e.mu.Lock()
		e.commits[id] = err
		e.mu.Unlock()
		return err
	}}, nil
}

// commitPrepared is commitExec's Prepared.
type commitPrepared struct {
	o      manager.Outcome
	commit func(catalog.Job) error
}

func (p *commitPrepared) Outcome() manager.Outcome { return p.o }

func (p *commitPrepared) Commit(_ context.Context, j catalog.Job) error {
	if p.commit == nil {
		return nil
	}
	if err := p.commit(j); err != nil {
		p.o = manager.Outcome{VersionBefore: p.o.VersionBefore, VersionAfter: p.o.VersionBefore}
		return err
	}
	return nil
}

func (p *commitPrepared) Abort(context.Context) error {
	p.o.VersionAfter = p.o.VersionBefore
	return nil
}

func (e *commitExec) Transient(err error) bool {
	return errors.Is(err, catalog.ErrLeaseLost) || errors.Is(err, catalog.ErrConflict) || errors.Is(err, context.Canceled)
}

func (e *commitExec) GC(context.Context, string) error { return nil }

// replica is one manager on the shared catalog.
type replica struct {
	m    *manager.Manager
	stop context.CancelFunc
	done chan error
}

func startReplica(t *testing.T, store manager.Store, exec manager.Executor, node string, tune func(*manager.Config)) *replica {
	t.Helper()
	cfg := manager.DefaultConfig()
	cfg.Node, cfg.Workers, cfg.Interval = node, 1, time.Hour
	cfg.PollInterval, cfg.HeartbeatInterval = 50*time.Millisecond, 100*time.Millisecond
	if tune != nil {
		tune(&cfg)
	}
	m, err := manager.New(store, exec, cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &replica{m: m, stop: cancel, done: make(chan error, 1)}
	go func() { r.done <- m.Run(ctx) }()
	<-m.Started()
	t.Cleanup(func() { r.shutdown(t) })
	return r
}

func (r *replica) shutdown(t *testing.T) {
	r.stop()
	if err := <-r.done; err != nil {
		t.Errorf("Run: %v", err)
	}
	r.done <- nil // later shutdowns return at once
}

func collectionWithBacklog(t *testing.T, c *catalog.Catalog, name string, n int) string {
	t.Helper()
	col, err := c.CreateCollection(context.Background(), name, 2)
	if err != nil {
		t.Fatal(err)
	}
	ops := make([]materialize.OperationRecord, n)
	for i := range ops {
		ops[i] = materialize.OperationRecord{Op: materialize.OpAdd, ID: fmt.Sprint("r", i), Embedding: []float32{1, 2}}
	}
	if _, _, err := c.AppendLog(context.Background(), col.ID, ops, catalog.AppendLimits{}); err != nil {
		t.Fatal(err)
	}
	return col.ID
}

// waitJob watches m until job id has finished, and returns it.
func waitJob(t *testing.T, m *manager.Manager, id string) manager.Job {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	sub, _, err := m.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if j, err := m.Get(ctx, id); err == nil && j.State.Finished() {
		return j
	}
	for ev := range sub.Events() {
		if ev.Job.ID == id && ev.Job.State.Finished() {
			return ev.Job
		}
	}
	t.Fatalf("watch of job %s ended before the job did (lagged %v)", id, sub.Lagged())
	return manager.Job{}
}

func TestReplicasShareTheQueue(t *testing.T) {
	forEachCatalog(t, func(t *testing.T, open func() *catalog.Catalog) {
		c1, c2 := open(), open() // one connection pool per replica
		const n = 8
		var ids []string
		for i := range n {
			ids = append(ids, collectionWithBacklog(t, c1, fmt.Sprint("shared-", i), 5))
		}
		e1, e2 := newCommitExec(c1), newCommitExec(c2)
		// The first job each replica takes waits until the other replica
		// has one running too: the work is spread over both.
		release := make(chan struct{})
		for _, id := range ids {
			e1.hold[id], e2.hold[id] = release, release
		}
		r1 := startReplica(t, c1, e1, "n1", nil)
		r2 := startReplica(t, c2, e2, "n2", nil)
		enq, err := r1.m.Compact(t.Context(), nil, true, "test")
		if err != nil {
			t.Fatal(err)
		}
		<-e1.started
		<-e2.started
		close(release)

		byNode := map[string]int{}
		for _, e := range enq {
			j := waitJob(t, r2.m, e.Job.ID) // watched on the other replica
			if j.State != catalog.JobSucceeded {
				t.Fatalf("job %s is %s (%s), want SUCCEEDED", j.ID, j.State, j.Error)
			}
			byNode[j.Node]++
		}
		if byNode["n1"] == 0 || byNode["n2"] == 0 || byNode["n1"]+byNode["n2"] != n {
			t.Fatalf("jobs by node %v: want %d jobs spread over n1 and n2", byNode, n)
		}
		for _, id := range ids {
			col, err := c1.GetCollection(t.Context(), id)
			if err != nil {
				t.Fatal(err)
			}
			if col.Backlog() != 0 || col.SegmentVersion != 1 {
				t.Errorf("collection %s: backlog %d, version %d; want 0 and 1 (compacted once)", id, col.Backlog(), col.SegmentVersion)
			}
		}
		nodes, err := r1.m.Nodes(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if len(nodes) != 2 || nodes[0].Name != "n1" || nodes[1].Name != "n2" || !nodes[0].Self || nodes[1].Self {
			t.Fatalf("nodes seen by n1: %+v; want n1 (self) and n2", nodes)
		}
	})
}

// partitioned is a store through which lease renewals fail once cut is
// closed: a replica cut off from the catalog (or paused) while its job runs.
type partitioned struct {
	manager.Store
	cut chan struct{}
}

func (p partitioned) RenewLease(ctx context.Context, jobID, node string, lease time.Duration, pr catalog.JobProgress) (bool, error) {
	select {
	case <-p.cut:
		return false, fmt.Errorf("renew lease: %w", catalog.ErrUnavailable)
	default:
		return p.Store.RenewLease(ctx, jobID, node, lease, pr)
	}
}

func TestAJobWhoseLeaseExpiredIsTakenOverAndItsOwnerCannotCommit(t *testing.T) {
	forEachCatalog(t, func(t *testing.T, open func() *catalog.Catalog) {
		c1, c2 := open(), open()
		id := collectionWithBacklog(t, c1, "taken-over", 5)
		e1, e2 := newCommitExec(c1), newCommitExec(c2)
		resume := make(chan struct{})
		e1.hold[id], e1.frozen[id] = resume, true // n1's job ignores cancellation until resumed
		cut := make(chan struct{})
		lease := func(c *manager.Config) { c.LeaseDuration, c.RenewInterval = time.Second, 200*time.Millisecond }
		r1 := startReplica(t, partitioned{Store: c1, cut: cut}, e1, "n1", lease)
		enq, err := r1.m.Compact(t.Context(), []string{id}, false, "test")
		if err != nil {
			t.Fatal(err)
		}
		<-e1.started // n1 runs the job...
		close(cut)   // ...and loses the catalog
		r2 := startReplica(t, c2, e2, "n2", lease)

		lost := waitJob(t, r2.m, enq[0].Job.ID)
		if lost.State != catalog.JobFailed || lost.Error != "interrupted: lease of node n1 expired" {
			t.Fatalf("n1's job is %s (%q), want FAILED interrupted by its lease", lost.State, lost.Error)
		}
		var followUp manager.Job
		for _, j := range mustList(t, r2.m, id) {
			if j.Continues == lost.ID {
				followUp = waitJob(t, r2.m, j.ID)
			}
		}
		if followUp.State != catalog.JobSucceeded || followUp.Node != "n2" {
			t.Fatalf("follow-up %+v: want SUCCEEDED on n2", followUp)
		}
		close(resume) // n1 comes back and tries to commit
		r1.shutdown(t)
		e1.mu.Lock()
		commitErr, tried := e1.commits[id]
		e1.mu.Unlock()
		if tried && !errors.Is(commitErr, catalog.ErrLeaseLost) {
			t.Fatalf("n1's commit after losing its lease: %v, want ErrLeaseLost", commitErr)
		}
		col, err := c2.GetCollection(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if col.SegmentVersion != 1 {
			t.Fatalf("segment version %d, want 1: only the follow-up committed", col.SegmentVersion)
		}
		if j, _ := r2.m.Get(t.Context(), lost.ID); j.State != catalog.JobFailed {
			t.Fatalf("n1 rewrote the job it lost: %s", j.State)
		}
	})
}

func TestCancelOnAnotherReplica(t *testing.T) {
	forEachCatalog(t, func(t *testing.T, open func() *catalog.Catalog) {
		c1, c2 := open(), open()
		id := collectionWithBacklog(t, c1, "cancelled-elsewhere", 5)
		e1 := newCommitExec(c1)
		e1.hold[id] = make(chan struct{}) // runs until cancelled
		fast := func(c *manager.Config) { c.RenewInterval = 50 * time.Millisecond }
		r1 := startReplica(t, c1, e1, "n1", fast)
		enq, err := r1.m.Compact(t.Context(), []string{id}, false, "test")
		if err != nil {
			t.Fatal(err)
		}
		<-e1.started // n1 runs the job; n2 starts after, so it cannot claim it first
		r2 := startReplica(t, c2, newCommitExec(c2), "n2", func(c *manager.Config) { fast(c); c.Workers = 1 })
		j, err := r2.m.Cancel(t.Context(), enq[0].Job.ID)
		if err != nil || j.State != catalog.JobCancelled || j.Node != "n1" {
			t.Fatalf("Cancel on n2 of n1's job: %s on %s, %v; want CANCELLED", j.State, j.Node, err)
		}
		if col, _ := c1.GetCollection(t.Context(), id); col.SegmentVersion != 0 {
			t.Fatalf("the cancelled job committed version %d", col.SegmentVersion)
		}
	})
}

func mustList(t *testing.T, m *manager.Manager, collectionID string) []manager.Job {
	t.Helper()
	jobs, err := m.List(t.Context(), catalog.JobFilter{CollectionID: collectionID})
	if err != nil {
		t.Fatal(err)
	}
	return jobs
}

// TestARestartedNodeEndsItsDeadJobsAtOnce: a node killed while its job ran
// and restarted under the same name ends that job at its start, without
// waiting for the job's lease, and the follow-up runs. On SQLite the
// restarted process holds the process lock, so every RUNNING job is a dead
// process's; on PostgreSQL the job is recognised by its lease owner, the
// node's name and the dead process's token.
func TestARestartedNodeEndsItsDeadJobsAtOnce(t *testing.T) {
	run := func(t *testing.T, c *catalog.Catalog) {
		id := collectionWithBacklog(t, c, "killed", 5)
		if _, _, err := c.EnqueueJob(t.Context(), catalog.JobRequest{CollectionID: id, Trigger: catalog.TriggerScheduled}); err != nil {
			t.Fatal(err)
		}
		// The killed process's claim, with a lease far from expiring.
		dead, err := c.ClaimJob(t.Context(), "n1/0dead0ff", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		r := startReplica(t, c, newCommitExec(c), "n1", nil)
		// Started means the start has ended the dead jobs: no waiting.
		got, err := c.GetJob(t.Context(), dead.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.State != catalog.JobFailed || got.Error != "interrupted: the process stopped while the job ran" {
			t.Fatalf("the dead process's job is %s (%q) once the node restarted, want FAILED with the documented error", got.State, got.Error)
		}
		var followUp manager.Job
		for _, j := range mustList(t, r.m, id) {
			if j.Continues == dead.ID {
				followUp = waitJob(t, r.m, j.ID)
			}
		}
		if followUp.State != catalog.JobSucceeded || followUp.Node != "n1" {
			t.Fatalf("follow-up %+v: want SUCCEEDED on n1", followUp)
		}
	}
	t.Run("sqlite", func(t *testing.T) {
		c, err := catalog.Open(t.Context(), catalog.Config{DSN: filepath.Join(t.TempDir(), "catalog.db"), Exclusive: true, Holder: "node n1"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		run(t, c)
	})
	if base := catalogtest.PostgresBase(); base != "" {
		t.Run("postgres", func(t *testing.T) { run(t, openCatalog(t, "postgres", catalogtest.PostgresSchema(t, base))) })
	}
}

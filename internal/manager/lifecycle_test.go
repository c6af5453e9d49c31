package manager

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/compactorhq/compactor/internal/catalog"
)

// planExec is a fakeExec whose progress reports carry the plan, as the
// real executor's do.
type planExec struct{ *fakeExec }

func (p planExec) Prepare(ctx context.Context, j catalog.Job, progress func(Progress)) (Prepared, error) {
	c, err := p.store.GetCollection(ctx, j.CollectionID)
	if err != nil {
		return nil, err
	}
	return p.fakeExec.Prepare(ctx, j, func(pr Progress) {
		pr.Planned = true
		pr.OffsetStart, pr.OffsetEnd = c.CompactionOffset, c.CompactionOffset+min(c.Backlog(), p.max)
		pr.VersionBefore = c.SegmentVersion
		progress(pr)
	})
}

// runManager runs a Manager over any Store and Executor inside the test's
// synctest bubble until the test ends.
func runManager(t *testing.T, store Store, exec Executor, cfg Config) *Manager {
	t.Helper()
	m, err := New(store, exec, cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	<-m.Started()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return m
}

// TestRunningJobPersistsWhatItKnows: the row of a running job holds the
// offsets it reads and the version it builds on as soon as the executor
// reports them, so that a crash (after which the next start marks the row
// FAILED "interrupted", keeping its figures) does not show version 0 -> 0
// and offsets (0, 0]. A cancelled job keeps them too.
func TestRunningJobPersistsWhatItKnows(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newMemStore()
		store.addCollection("a", 150, time.Now())
		store.colls["a"].CompactionOffset, store.colls["a"].SegmentVersion = 100, 1 // backlog 50 from version 1
		exec := newFakeExec(store, 1000)
		gate := exec.setGate("a")
		m := runManager(t, store, planExec{exec}, testConfig())
		out, err := m.Compact(t.Context(), []string{"a"}, false, "")
		if err != nil {
			t.Fatal(err)
		}
		j := out[0].Job
		synctest.Wait()
		row, err := store.GetJob(t.Context(), j.ID)
		if err != nil {
			t.Fatal(err)
		}
		if row.State != catalog.JobRunning || row.OffsetStart != 100 || row.OffsetEnd != 150 || row.VersionBefore != 1 || row.VersionAfter != 1 {
			t.Fatalf("stored row of the running job: %s, offsets (%d, %d], version %d -> %d; want RUNNING, (100, 150], 1 -> 1",
				row.State, row.OffsetStart, row.OffsetEnd, row.VersionBefore, row.VersionAfter)
		}
		if _, err := m.Cancel(t.Context(), j.ID); err != nil {
			t.Fatal(err)
		}
		close(gate)
		synctest.Wait()
		got, err := store.GetJob(t.Context(), j.ID)
		if err != nil || got.State != catalog.JobCancelled {
			t.Fatalf("stored job after cancel: %s, %v; want CANCELLED", got.State, err)
		}
		if got.OffsetStart != 100 || got.OffsetEnd != 150 || got.VersionBefore != 1 || got.VersionAfter != 1 {
			t.Fatalf("cancelled job: offsets (%d, %d], version %d -> %d; want the plan kept: (100, 150], 1 -> 1",
				got.OffsetStart, got.OffsetEnd, got.VersionBefore, got.VersionAfter)
		}
	})
}

// TestDeletingACollectionCancelsItsJobsAsDeleted: the running and the
// queued job of a collection being deleted end CANCELLED with the note
// "collection deleted", not "cancelled by operator"; other collections'
// jobs are untouched.
func TestDeletingACollectionCancelsItsJobsAsDeleted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newMemStore()
		store.addCollection("a", 20, time.Now())
		store.addCollection("b", 20, time.Now())
		exec := newFakeExec(store, 100)
		exec.setGate("a")
		gateB := exec.setGate("b")
		h := start(t, store, exec, testConfig())
		running := h.compact("a")[0].Job
		h.wantState(running.ID, catalog.JobRunning)
		queued := h.compact("a")[0].Job // the follow-up behind the running job
		other := h.compact("b")[0].Job
		h.wantState(other.ID, catalog.JobRunning)

		if err := NewDeleter(h.m, nil).cancelJobs(t.Context(), "a"); err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{running.ID, queued.ID} {
			j := h.wantState(id, catalog.JobCancelled)
			if j.Note != NoteCollectionDeleted {
				t.Fatalf("job %s ended with note %q, want %q", id, j.Note, NoteCollectionDeleted)
			}
			if row, _ := store.GetJob(t.Context(), id); row.Note != NoteCollectionDeleted {
				t.Fatalf("stored job %s has note %q, want %q", id, row.Note, NoteCollectionDeleted)
			}
		}
		close(gateB)
		h.wantState(other.ID, catalog.JobSucceeded)
	})
}

// slowStore is a memStore whose FinishJob takes delay (or until ctx ends):
// a catalog whose single writer is busy with another job's long commit.
type slowStore struct {
	*memStore
	delay time.Duration
}

func (s slowStore) FinishJob(ctx context.Context, node string, j catalog.Job) error {
	select {
	case <-time.After(s.delay):
	case <-ctx.Done():
		return ctx.Err()
	}
	return s.memStore.FinishJob(ctx, node, j)
}

// TestTheEndOfAJobIsPersistedBehindASlowCommit: the write that records a
// job's end waits up to Config.PersistTimeout (the binary's
// --commit-timeout), not a fixed 10 s, so a failure recorded while another
// job's commit holds the catalog for a minute is not lost (the row would
// stay RUNNING until the next start).
func TestTheEndOfAJobIsPersistedBehindASlowCommit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := newMemStore()
		mem.addCollection("a", 20, time.Now())
		exec := newFakeExec(mem, 100)
		exec.errs["a"] = []error{errTransient}
		cfg := testConfig()
		cfg.LeaseDuration, cfg.RenewInterval = time.Hour, time.Minute // the lease outlives the slow write
		m := runManager(t, slowStore{memStore: mem, delay: time.Minute}, exec, cfg)
		out, err := m.Compact(t.Context(), []string{"a"}, false, "")
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Minute) // fake time: the start and the end are written, a minute each
		synctest.Wait()
		row, _ := mem.GetJob(t.Context(), out[0].Job.ID)
		if row.State != catalog.JobFailed || row.Error == "" {
			t.Fatalf("stored job is %s (error %q), want FAILED with the error: the end was not persisted", row.State, row.Error)
		}
	})
}

// storageFunc is a CollectionStorage from a function.
type storageFunc func(ctx context.Context, id string) (catalog.Collection, error)

func (f storageFunc) DeleteCollection(ctx context.Context, id string) (catalog.Collection, error) {
	return f(ctx, id)
}

// TestDeleterCancelsJobsBeforeItDeletesStorage: the use case checks the
// collection, cancels its running job (ended "collection deleted") before
// the storage is deleted, and answers ErrNotFound for an unknown
// collection without touching storage.
func TestDeleterCancelsJobsBeforeItDeletesStorage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newMemStore()
		store.addCollection("a", 20, time.Now())
		exec := newFakeExec(store, 100)
		exec.setGate("a")
		h := start(t, store, exec, testConfig())
		running := h.compact("a")[0].Job
		h.wantState(running.ID, catalog.JobRunning)

		var deleted []string
		del := NewDeleter(h.m, storageFunc(func(ctx context.Context, id string) (catalog.Collection, error) {
			if j, _ := store.GetJob(ctx, running.ID); j.State != catalog.JobCancelled {
				t.Errorf("storage deleted while job %s is %s", running.ID, j.State)
			}
			deleted = append(deleted, id)
			return catalog.Collection{ID: id}, nil
		}))
		c, err := del.DeleteCollection(t.Context(), "a")
		if err != nil || c.ID != "a" || len(deleted) != 1 {
			t.Fatalf("DeleteCollection(a) = %v, %v; storage deletions %v", c.ID, err, deleted)
		}
		if j := h.wantState(running.ID, catalog.JobCancelled); j.Note != NoteCollectionDeleted {
			t.Fatalf("job ended with note %q, want %q", j.Note, NoteCollectionDeleted)
		}
		if _, err := del.DeleteCollection(t.Context(), "nope"); !errors.Is(err, ErrNotFound) || len(deleted) != 1 {
			t.Fatalf("DeleteCollection(nope) = %v (storage deletions %v), want ErrNotFound and none", err, deleted)
		}
	})
}

// lateCancelStore is a memStore whose CancelJob runs only after every
// other goroutine of the bubble is blocked: the running job has seen the
// cancel request and ended before the store's row is marked.
type lateCancelStore struct{ *memStore }

func (s lateCancelStore) CancelJob(ctx context.Context, id, note string) (catalog.Job, error) {
	synctest.Wait()
	return s.memStore.CancelJob(ctx, id, note)
}

// TestCancelOfARunThatEndsFirstSucceeds: a running job that ends CANCELLED
// on the request before the catalog row is marked was cancelled, and
// Cancel says so instead of "job already finished".
func TestCancelOfARunThatEndsFirstSucceeds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newMemStore()
		store.addCollection("a", 150, time.Now())
		exec := newFakeExec(store, 1000)
		exec.setGate("a")
		m := runManager(t, lateCancelStore{store}, exec, testConfig())
		out, err := m.Compact(t.Context(), []string{"a"}, false, "")
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		got, err := m.Cancel(t.Context(), out[0].Job.ID)
		if err != nil {
			t.Fatalf("Cancel of a run that ended first: %v", err)
		}
		if got.State != catalog.JobCancelled || got.Note != NoteCancelled {
			t.Fatalf("Cancel returned %s %q, want CANCELLED %q", got.State, got.Note, NoteCancelled)
		}
		if _, err := m.Cancel(t.Context(), out[0].Job.ID); !errors.Is(err, ErrFinished) {
			t.Fatalf("second Cancel: %v, want ErrFinished", err)
		}
	})
}

// finishGateStore is a memStore whose FinishJob of a CANCELLED job, once
// the row is written, closes finished and waits for release: the run has
// ended but is still this node's.
type finishGateStore struct {
	*memStore
	finished, release chan struct{}
}

func (s finishGateStore) FinishJob(ctx context.Context, node string, j catalog.Job) error {
	err := s.memStore.FinishJob(ctx, node, j)
	if j.State == catalog.JobCancelled {
		close(s.finished)
		<-s.release
	}
	return err
}

// TestCancelOfARunAnotherRequestEndedIsRefused: an operator's Cancel that
// reaches a run already ended CANCELLED by the collection's deletion (the
// row written, the run not yet gone) did not cancel it: ErrFinished, and
// the job keeps the deletion's note.
func TestCancelOfARunAnotherRequestEndedIsRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newMemStore()
		store.addCollection("a", 150, time.Now())
		exec := newFakeExec(store, 1000)
		exec.setGate("a")
		gs := finishGateStore{store, make(chan struct{}), make(chan struct{})}
		m := runManager(t, gs, exec, testConfig())
		out, err := m.Compact(t.Context(), []string{"a"}, false, "")
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		id := out[0].Job.ID
		go m.cancel(context.WithoutCancel(t.Context()), id, NoteCollectionDeleted)
		<-gs.finished
		type result struct {
			j   Job
			err error
		}
		got := make(chan result)
		go func() {
			j, err := m.Cancel(context.WithoutCancel(t.Context()), id)
			got <- result{j, err}
		}()
		synctest.Wait()
		close(gs.release)
		r := <-got
		if !errors.Is(r.err, ErrFinished) {
			t.Fatalf("operator's Cancel after the deletion ended the job: %s %q, %v; want ErrFinished", r.j.State, r.j.Note, r.err)
		}
		if r.j.Note != NoteCollectionDeleted {
			t.Fatalf("job's note %q, want %q", r.j.Note, NoteCollectionDeleted)
		}
	})
}

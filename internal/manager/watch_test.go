package manager

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/compactorhq/compactor/internal/catalog"
)

// floodExec reports progress n times before running the job as fakeExec
// does: a small --log-batch-size makes a real job do the same.
type floodExec struct {
	*fakeExec
	n int
}

func (f floodExec) Prepare(ctx context.Context, j catalog.Job, progress func(Progress)) (Prepared, error) {
	for i := range f.n {
		progress(Progress{Phase: "reading log", OpRecordsRead: int64(i), OpRecordsTotal: int64(f.n)})
	}
	return f.fakeExec.Prepare(ctx, j, progress)
}

func TestWatcherThatDoesNotReadSurvivesAFloodOfProgress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newMemStore()
		store.addCollection("a", 20, time.Now())
		exec := floodExec{fakeExec: newFakeExec(store, 100), n: 10 * MaxPendingEvents}
		m, err := New(store, exec, testConfig(), prometheus.NewRegistry(), nil)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- m.Run(ctx) }()
		defer func() { cancel(); <-done }()
		synctest.Wait()

		sub, _, err := m.Watch(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		out, err := m.Compact(t.Context(), []string{"a"}, false, "test")
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // the job ran to its end; nobody read the events
		if j, _ := m.Get(t.Context(), out[0].Job.ID); j.State != catalog.JobSucceeded {
			t.Fatalf("job is %s, want SUCCEEDED", j.State)
		}

		var changes []catalog.JobState
		events := 0
		for ev := range sub.Events() {
			events++
			if ev.Kind == EventChanged {
				changes = append(changes, ev.Job.State)
			}
			if ev.Job.State.Finished() {
				break
			}
		}
		if sub.Lagged() {
			t.Fatalf("the watcher was dropped after %d events", events)
		}
		if got := toStrings(changes); len(got) != 3 || got[0] != "QUEUED" || got[2] != "SUCCEEDED" {
			t.Errorf("changes %v, want QUEUED, RUNNING, SUCCEEDED", got)
		}
		// The progress reports were coalesced while the watcher did not
		// read: at most one undelivered progress event per job at a time.
		if events > 6 {
			t.Errorf("%d events delivered for %d progress reports, want them coalesced", events, exec.n)
		}
	})
}

func TestWatcherQueueKeepsOrderAndTheLatestProgressPerJob(t *testing.T) {
	w := &watcher{notify: make(chan struct{}, 1)}
	job := func(id string, state catalog.JobState, read int64) Job {
		return Job{Job: catalog.Job{ID: id, State: state}, Progress: &Progress{OpRecordsRead: read}}
	}
	for _, ev := range []Event{
		{EventChanged, job("a", catalog.JobRunning, 0)},
		{EventProgress, job("a", catalog.JobRunning, 1)},
		{EventChanged, job("b", catalog.JobRunning, 0)},
		{EventProgress, job("a", catalog.JobRunning, 2)}, // replaces a's progress in place
		{EventProgress, job("b", catalog.JobRunning, 5)},
		{EventChanged, job("b", catalog.JobSucceeded, 9)}, // supersedes b's progress
		{EventProgress, job("a", catalog.JobRunning, 3)},
	} {
		if !w.push(ev) {
			t.Fatal("push refused")
		}
	}
	var got []string
	for {
		ev, ok := w.pop()
		if !ok {
			break
		}
		got = append(got, ev.Job.ID+":"+string(ev.Job.State)+":"+string(rune('0'+ev.Job.Progress.OpRecordsRead)))
	}
	want := []string{"a:RUNNING:0", "a:RUNNING:3", "b:RUNNING:0", "b:SUCCEEDED:9"}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
	// Changes are not coalesced: past the bound the watcher lags.
	for i := range MaxPendingEvents {
		if !w.push(Event{EventChanged, job("c", catalog.JobQueued, int64(i%10))}) {
			t.Fatalf("push %d refused", i)
		}
	}
	if w.push(Event{EventChanged, job("c", catalog.JobQueued, 0)}) || !w.lagged {
		t.Fatal("a watcher more than MaxPendingEvents changes behind was kept")
	}
}

// TestWatcherSeesTheEndOfAnotherReplicasJobWhoseFinishTimeIsOld: a job of
// another replica that the poller saw running, and that ended with a
// finish time older than the poller's window (taken before a commit that
// waited for a busy catalog), still reaches the watchers as ended.
func TestWatcherSeesTheEndOfAnotherReplicasJobWhoseFinishTimeIsOld(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newMemStore()
		store.addCollection("a", 10, time.Now())
		started := time.Now().UTC().Truncate(time.Millisecond)
		store.put(catalog.Job{ID: "elsewhere", CollectionID: "a", State: catalog.JobRunning, Node: "other", LeaseOwner: "other/1",
			LeaseExpiresAt: started.Add(time.Hour), CreatedAt: started, StartedAt: started})
		h := start(t, store, newFakeExec(store, 100), testConfig())
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		sub, _, err := h.m.Watch(ctx)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Second) // several polls see it running
		store.mu.Lock()
		j := store.jobs["elsewhere"]
		j.State, j.FinishedAt, j.LeaseOwner = catalog.JobSucceeded, started, ""
		store.jobs["elsewhere"] = j
		store.mu.Unlock()
		time.Sleep(3 * time.Second)
		synctest.Wait()
		for {
			select {
			case ev := <-sub.Events():
				if ev.Job.ID == "elsewhere" && ev.Job.State == catalog.JobSucceeded {
					return
				}
			default:
				t.Fatal("the end of the other replica's job was not published")
			}
		}
	})
}

package rpc_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"go.uber.org/goleak"

	compactorv1 "github.com/compactorhq/compactor/gen/compactor/v1"
	"github.com/compactorhq/compactor/gen/compactor/v1/compactorv1connect"
	"github.com/compactorhq/compactor/internal/server"
)

// TestWatchCompactionsTwoWatchersSeeStatesAndProgress: two watchers with
// include_progress see the QUEUED, RUNNING and SUCCEEDED changes of a job
// and its progress as it reads the log in batches; when the clients go away
// their streams end on the server, and once everything is shut down no
// goroutine is left. Not parallel: goleak looks at every goroutine.
func TestWatchCompactionsTwoWatchersSeeStatesAndProgress(t *testing.T) {
	ignore := goleak.IgnoreCurrent()

	const records, batch = 5_000, 500
	f := newFixture(t, fixtureOptions{configure: func(cfg *server.Config) {
		cfg.Compaction.BatchRecords = batch
		cfg.Manager.Workers = 1
	}})
	p := protocols[2] // gRPC
	c := f.clients(p)
	coll := createCollection(t, c, "watched", 2)
	for from := 0; from < records; from += 2_500 {
		recs := deletes(2_500)
		for i, r := range recs {
			// UPSERTs of distinct ids: small, and the job writes them all.
			r.Op = compactorv1.Operation_OPERATION_UPSERT
			r.Id = "id" + r.GetId() + "-" + string(rune('a'+from/2_500))
			r.Embedding = []float32{float32(i), 1}
		}
		push(t, c, coll.GetId(), recs)
	}

	type seen struct {
		events []*compactorv1.WatchCompactionsResponse
		err    error
	}
	ctx, goAway := context.WithCancel(t.Context())
	defer goAway()
	var wg sync.WaitGroup
	ready := make(chan struct{}, 2)
	sawEnd := make(chan struct{}, 2) // a watcher has seen the job end, or failed
	results := make([]seen, 2)
	jobID := make(chan string, 2) // one for each watcher
	for w := range 2 {
		wg.Go(func() {
			stream, err := c.jobs.WatchCompactions(ctx, connect.NewRequest(&compactorv1.WatchCompactionsRequest{IncludeProgress: true}))
			if err != nil {
				results[w].err = err
				ready <- struct{}{}
				sawEnd <- struct{}{}
				return
			}
			defer stream.Close()
			if !stream.Receive() || stream.Msg().GetType() != compactorv1.WatchEventType_WATCH_EVENT_TYPE_SNAPSHOT_COMPLETE {
				results[w].err = stream.Err()
				ready <- struct{}{}
				sawEnd <- struct{}{}
				return
			}
			ready <- struct{}{}
			var id string
			select {
			case id = <-jobID:
			case <-ctx.Done():
				return
			}
			for stream.Receive() {
				ev := stream.Msg()
				if ev.GetJob().GetId() != id {
					continue
				}
				results[w].events = append(results[w].events, ev)
				if ev.GetJob().GetState() == compactorv1.JobState_JOB_STATE_SUCCEEDED {
					break
				}
			}
			sawEnd <- struct{}{}
			// Then wait for the client to go away.
			for stream.Receive() {
			}
		})
	}
	<-ready
	<-ready
	job := compactOne(t, c, coll.GetId()).GetJob()
	jobID <- job.GetId()
	jobID <- job.GetId()
	wantSucceeded(t, waitJob(t, c, job.GetId()))

	// Both watchers have seen the end (or failed): the clients go away.
	for range 2 {
		select {
		case <-sawEnd:
		case <-time.After(30 * time.Second):
			t.Fatal("a watcher has not seen the job end")
		}
	}
	goAway()
	wg.Wait()

	for w, r := range results {
		if r.err != nil {
			t.Fatalf("watcher %d: %v", w, r.err)
		}
		var states []compactorv1.JobState
		var progress []*compactorv1.Progress
		for _, ev := range r.events {
			switch ev.GetType() {
			case compactorv1.WatchEventType_WATCH_EVENT_TYPE_CHANGED:
				if len(progress) > 0 && ev.GetJob().GetState() != compactorv1.JobState_JOB_STATE_SUCCEEDED {
					t.Errorf("watcher %d: change to %v after progress", w, ev.GetJob().GetState())
				}
				states = append(states, ev.GetJob().GetState())
			case compactorv1.WatchEventType_WATCH_EVENT_TYPE_PROGRESS:
				if ev.GetJob().GetState() != compactorv1.JobState_JOB_STATE_RUNNING || ev.GetJob().GetProgress() == nil {
					t.Errorf("watcher %d: progress event of a %v job: %v", w, ev.GetJob().GetState(), ev.GetJob())
				}
				progress = append(progress, ev.GetJob().GetProgress())
			default:
				t.Errorf("watcher %d: unexpected event %v", w, ev)
			}
		}
		want := []compactorv1.JobState{compactorv1.JobState_JOB_STATE_QUEUED, compactorv1.JobState_JOB_STATE_RUNNING, compactorv1.JobState_JOB_STATE_SUCCEEDED}
		if !slices.Equal(states, want) {
			t.Errorf("watcher %d saw states %v, want %v", w, states, want)
		}
		// One report before the first batch and one after each, of which a
		// slow reader may see fewer: progress is coalesced per job (the
		// latest replaces one not yet delivered), never reordered.
		if len(progress) == 0 {
			t.Fatalf("watcher %d saw no progress event", w)
		}
		for i, pr := range progress {
			if pr.GetRecordsTotal() != records {
				t.Errorf("watcher %d: progress %d: records_total %d, want %d", w, i, pr.GetRecordsTotal(), records)
			}
			if i > 0 && pr.GetRecordsRead() < progress[i-1].GetRecordsRead() {
				t.Errorf("watcher %d: records_read went back from %d to %d", w, progress[i-1].GetRecordsRead(), pr.GetRecordsRead())
			}
		}
		if last := progress[len(progress)-1]; last.GetRecordsRead() != records {
			t.Errorf("watcher %d: last progress read %d records, want %d", w, last.GetRecordsRead(), records)
		}
	}

	// The streams end on the server when their clients go away, before any
	// shutdown: the handlers return and are counted.
	waitFor(t, "both watch handlers to return", func() bool {
		return handled(t, f, compactorv1connect.CompactionServiceWatchCompactionsProcedure) == 2
	})

	f.shutdown()
	goleak.VerifyNone(t, ignore)
}

// handled returns how many calls of procedure the server has finished.
func handled(t *testing.T, f *fixture, procedure string) float64 {
	t.Helper()
	mfs, err := f.app.Registry.Gather()
	if err != nil {
		t.Fatalf("gather metrics: %v", err)
	}
	var n float64
	for _, mf := range mfs {
		if mf.GetName() != "compactor_rpc_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "procedure" && l.GetValue() == procedure {
					n += m.GetCounter().GetValue()
				}
			}
		}
	}
	return n
}

// waitFor polls cond every 10 ms for up to 30 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestDrainEndsWatchStreams: at shutdown the server drains the service:
// open watches end with UNAVAILABLE at once (rather than holding the HTTP
// shutdown), new ones are refused, and unary calls still work.
func TestDrainEndsWatchStreams(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	var streams []*connect.ServerStreamForClient[compactorv1.WatchCompactionsResponse]
	for _, p := range protocols {
		stream, err := f.clients(p).jobs.WatchCompactions(t.Context(), connect.NewRequest(&compactorv1.WatchCompactionsRequest{}))
		if err != nil {
			t.Fatalf("%s: watch: %v", p.name, err)
		}
		defer stream.Close()
		if !stream.Receive() || stream.Msg().GetType() != compactorv1.WatchEventType_WATCH_EVENT_TYPE_SNAPSHOT_COMPLETE {
			t.Fatalf("%s: first event %v (%v), want SNAPSHOT_COMPLETE", p.name, stream.Msg(), stream.Err())
		}
		streams = append(streams, stream)
	}
	f.app.Service.Drain()
	for i, stream := range streams {
		for stream.Receive() {
			t.Errorf("%s: event after drain: %v", protocols[i].name, stream.Msg())
		}
		wantCode(t, stream.Err(), connect.CodeUnavailable)
	}
	for _, p := range protocols {
		c := f.clients(p)
		stream, err := c.jobs.WatchCompactions(t.Context(), connect.NewRequest(&compactorv1.WatchCompactionsRequest{}))
		if err == nil {
			for stream.Receive() {
				t.Errorf("%s: event of a watch after drain: %v", p.name, stream.Msg())
			}
			err = stream.Err()
			_ = stream.Close()
		}
		wantCode(t, err, connect.CodeUnavailable)
		if _, err := c.colls.ListCollections(t.Context(), connect.NewRequest(&compactorv1.ListCollectionsRequest{})); err != nil {
			t.Errorf("%s: ListCollections after drain: %v", p.name, err)
		}
	}
}

package server_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"connectrpc.com/connect"

	compactorv1 "github.com/compactorhq/compactor/gen/compactor/v1"
	"github.com/compactorhq/compactor/gen/compactor/v1/compactorv1connect"
	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/server"
)

// A rollback's job (kind rollback, recorded SUCCEEDED by the rollback
// itself) reaches the watchers of its collection and of every job at once,
// as the end of a job the workers ran does: the status poll, which would
// find it a poll interval later, never runs in this test.
func TestARollbackJobReachesTheWatchersAtOnce(t *testing.T) {
	r := startApp(t, func(c *server.Config) { c.Manager.PollInterval = time.Hour })
	id := r.createAndPush(t, "undo", 4)
	if j := r.compactAndWait(t, id); j.State != catalog.JobSucceeded {
		t.Fatalf("first compaction: %s %s", j.State, j.Error)
	}
	pushTo(t, r, id, "more", 3)
	if j := r.compactAndWait(t, id); j.State != catalog.JobSucceeded {
		t.Fatalf("second compaction: %s %s", j.State, j.Error)
	}

	// A failure bound far beyond "at once"; the poll interval is an hour.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	jobs := compactorv1connect.NewCompactionServiceClient(r.hc, r.base)
	watches := map[string]*compactorv1.WatchCompactionsRequest{"the collection": {CollectionId: id}, "every job": {}}
	ends := make(map[string]chan *compactorv1.Job, len(watches))
	for name, req := range watches {
		stream, err := jobs.WatchCompactions(ctx, connect.NewRequest(req))
		if err != nil {
			t.Fatalf("watch %s: %v", name, err)
		}
		t.Cleanup(func() { _ = stream.Close() })
		// The snapshot is complete before the rollback: its job is a
		// change the watch reports.
		for stream.Receive() && stream.Msg().GetType() != compactorv1.WatchEventType_WATCH_EVENT_TYPE_SNAPSHOT_COMPLETE {
		}
		ch := make(chan *compactorv1.Job, 1)
		ends[name] = ch
		go func() {
			defer close(ch)
			for stream.Receive() {
				if j := stream.Msg().GetJob(); j.GetKind() == compactorv1.JobKind_JOB_KIND_ROLLBACK {
					ch <- j
					return
				}
			}
		}()
	}
	colls := compactorv1connect.NewCollectionServiceClient(r.hc, r.base)
	rb, err := colls.RollbackCollection(ctx, connect.NewRequest(&compactorv1.RollbackCollectionRequest{CollectionId: id, ToVersion: 1, Reason: "undo version 2"}))
	if err != nil {
		t.Fatalf("rollback: %v", err)
	}
	for name, ch := range ends {
		j := <-ch
		if j.GetId() != rb.Msg.GetJobId() || j.GetState() != compactorv1.JobState_JOB_STATE_SUCCEEDED || j.GetCollectionId() != id {
			t.Errorf("watch of %s: rollback job %v, want job %s SUCCEEDED", name, j, rb.Msg.GetJobId())
		}
	}
	if got := r.metric(t, "compactor_uncompacted_records"); got != "compactor_uncompacted_records 3" {
		t.Errorf("backlog gauge after the rollback: %q, want the 3 records after version 1 again", got)
	}
}

// pushTo appends n upserts with ids prefix-0.. to collection id.
func pushTo(t *testing.T, r *running, id, prefix string, n int) {
	t.Helper()
	recs := make([]*compactorv1.OperationRecord, n)
	for i := range recs {
		recs[i] = &compactorv1.OperationRecord{Op: compactorv1.Operation_OPERATION_UPSERT, Id: fmt.Sprintf("%s-%d", prefix, i), Embedding: []float32{2, float32(i)}}
	}
	logs := compactorv1connect.NewLogServiceClient(r.hc, r.base)
	if _, err := logs.PushLogs(t.Context(), connect.NewRequest(&compactorv1.PushLogsRequest{CollectionId: id, Records: recs})); err != nil {
		t.Fatalf("push: %v", err)
	}
}

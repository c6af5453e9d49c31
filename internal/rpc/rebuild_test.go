package rpc_test

import (
	"slices"
	"testing"

	"connectrpc.com/connect"

	compactorv1 "github.com/compactorhq/compactor/gen/compactor/v1"
)

// TestRebuildIndex: RebuildIndex queues a job of kind INDEX_REBUILD that
// commits a new version with the new parameters, which GetCollection then
// shows with the index's figures (and the job that built it); a watch
// filtered by kind sees the rebuild and not a compaction beside it; every
// class of bad request has its code, on every protocol.
func TestRebuildIndex(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	c := f.clients(protocols[1])
	ctx := t.Context()
	id := createCollection(t, c, "rebuilt", 2).GetId()
	push(t, c, id, smallRecords(0, 40, 2))
	first := waitJob(t, c, compactOne(t, c, id).GetJob().GetId())
	wantSucceeded(t, first)
	coll := getCollection(t, c, id)
	if ix := coll.GetIndexFigures(); ix.GetVectors() != 40 || ix.GetBuild() != "full" || ix.GetJobId() != first.GetId() || ix.GetM() != 16 || ix.GetEncodedBytes() <= 0 || ix.GetBuildTime() == nil {
		t.Fatalf("index figures after the first compaction: %v, want 40 vectors built full by job %s with m 16", ix, first.GetId())
	}

	stream, err := c.jobs.WatchCompactions(ctx, connect.NewRequest(&compactorv1.WatchCompactionsRequest{
		CollectionId: id, Kinds: []compactorv1.JobKind{compactorv1.JobKind_JOB_KIND_INDEX_REBUILD}}))
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	if !stream.Receive() || stream.Msg().GetType() != compactorv1.WatchEventType_WATCH_EVENT_TYPE_SNAPSHOT_COMPLETE {
		t.Fatalf("watch: %v %v, want an empty snapshot", stream.Msg(), stream.Err())
	}
	compaction := compactOne(t, c, id).GetJob().GetId() // nothing to compact: not a rebuild
	res, err := c.jobs.RebuildIndex(ctx, connect.NewRequest(&compactorv1.RebuildIndexRequest{CollectionId: id, M: 8, EfConstruction: 64, Reason: "smaller graph"}))
	if err != nil {
		t.Fatal(err)
	}
	job := res.Msg.GetJob()
	if !res.Msg.GetCreated() || job.GetKind() != compactorv1.JobKind_JOB_KIND_INDEX_REBUILD || job.GetIndexRebuild().GetM() != 8 || job.GetReason() != "smaller graph" {
		t.Fatalf("RebuildIndex: created %v, job %v", res.Msg.GetCreated(), job)
	}
	done := waitJob(t, c, job.GetId())
	wantSucceeded(t, done)
	wantSucceeded(t, waitJob(t, c, compaction))
	if done.GetVersionAfter() != done.GetVersionBefore()+1 || done.GetBytesWritten() <= 0 {
		t.Fatalf("rebuild: version %d -> %d, %d bytes; want a new version", done.GetVersionBefore(), done.GetVersionAfter(), done.GetBytesWritten())
	}
	var seen []string
	for stream.Receive() {
		j := stream.Msg().GetJob()
		if j.GetId() != job.GetId() {
			t.Fatalf("watch of index rebuilds sent job %s of kind %v", j.GetId(), j.GetKind())
		}
		seen = append(seen, j.GetState().String())
		if j.GetState() == compactorv1.JobState_JOB_STATE_SUCCEEDED {
			break
		}
	}
	if !slices.Contains(seen, "JOB_STATE_SUCCEEDED") {
		t.Fatalf("watch saw %v of the rebuild, %v; want its end", seen, stream.Err())
	}
	coll = getCollection(t, c, id)
	if coll.GetIndex().GetM() != 8 || coll.GetIndex().GetEfConstruction() != 64 || coll.GetSegmentVersion() != done.GetVersionAfter() {
		t.Fatalf("collection after the rebuild: index %v at version %d", coll.GetIndex(), coll.GetSegmentVersion())
	}
	if ix := coll.GetIndexFigures(); ix.GetVectors() != 40 || ix.GetBuild() != "rebuild" || ix.GetJobId() != job.GetId() || ix.GetM() != 8 || ix.GetEfConstruction() != 64 {
		t.Fatalf("index figures after the rebuild: %v, want 40 vectors rebuilt by %s with m 8", ix, job.GetId())
	}
	if recs := allRecords(t, c, id, 100); len(recs) != 40 {
		t.Fatalf("%d records after the rebuild, want 40", len(recs))
	}

	off, err := c.colls.CreateCollection(ctx, connect.NewRequest(&compactorv1.CreateCollectionRequest{Name: "plain", Dimension: 2, Index: &compactorv1.IndexSettings{Disabled: true}}))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range protocols {
		c := f.clients(p)
		rebuild := func(r *compactorv1.RebuildIndexRequest) error {
			_, err := c.jobs.RebuildIndex(ctx, connect.NewRequest(r))
			return err
		}
		wantViolation(t, rebuild(&compactorv1.RebuildIndexRequest{CollectionId: id, M: 500}), "m", "outside 2..100")
		wantViolation(t, rebuild(&compactorv1.RebuildIndexRequest{CollectionId: id, M: 32, EfConstruction: 8}), "ef_construction")
		wantViolation(t, rebuild(&compactorv1.RebuildIndexRequest{CollectionId: id, EfConstruction: -1}), "ef_construction", "must not be negative")
		wantViolation(t, rebuild(&compactorv1.RebuildIndexRequest{CollectionId: "nope"}), "collection_id")
		wantCode(t, rebuild(&compactorv1.RebuildIndexRequest{CollectionId: unknownID(1)}), connect.CodeNotFound)
		wantCode(t, rebuild(&compactorv1.RebuildIndexRequest{CollectionId: off.Msg.GetCollection().GetId()}), connect.CodeFailedPrecondition)
	}
}

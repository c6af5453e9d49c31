package rpc_test

import (
	"context"
	"maps"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	compactorv1 "github.com/compactorhq/compactor/gen/compactor/v1"
	"github.com/compactorhq/compactor/internal/materialize"
	"github.com/compactorhq/compactor/internal/rpc"
	"github.com/compactorhq/compactor/internal/sampletest"
	"github.com/compactorhq/compactor/internal/server"
)

// TestAPI runs one suite over the four client kinds (Connect JSON, Connect
// proto, gRPC, gRPC-Web) against the real handler on a real manager with
// temp-dir storage, served over HTTP/2 with TLS. Each protocol gets its own
// app; the Debian sample is loaded only over gRPC, the other protocols use
// small data.
func TestAPI(t *testing.T) {
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			var o fixtureOptions
			if p.name == "grpc" {
				// Blocks smaller than the default, so that the Debian sample
				// spans several, and a page reads less under -race.
				o.configure = func(cfg *server.Config) { cfg.Segment.MaxBlockRecords, cfg.Segment.MinBlockRecords = 1024, 256 }
			}
			f := newFixture(t, o)
			c := f.clients(p)
			t.Run("collections are created, listed, got and deleted", func(t *testing.T) { testCollections(t, c) })
			t.Run("compact validates its target", func(t *testing.T) { testCompactArguments(t, c) })
			t.Run("unknown and malformed job ids", func(t *testing.T) { testJobIDs(t, c) })
			t.Run("push validates every record and appends nothing on error", func(t *testing.T) { testPushValidation(t, p, c) })
			if p.name == "grpc" {
				t.Run("the Debian sample reads the same before and after compaction", func(t *testing.T) { testDebian(t, c) })
			}
			t.Run("small collection reads the same before and after compaction", func(t *testing.T) { testSmall(t, c) })
			t.Run("list compactions pages with tokens and filters", func(t *testing.T) { testListCompactions(t, c) })
			t.Run("watch streams snapshots and live changes", func(t *testing.T) { testWatch(t, c) })
			t.Run("an unexpected error is INTERNAL with a generic message", func(t *testing.T) { testInternal(t, f, c) })
			t.Run("list nodes shows this replica", func(t *testing.T) { testListNodes(t, f, c) })
			t.Run("controls pause, resume, tune and plan", func(t *testing.T) { testControls(t, c) })

			// Small limits and a stopped manager: jobs stay QUEUED.
			idle := newFixture(t, fixtureOptions{idle: true, configure: func(cfg *server.Config) {
				cfg.MaxRequestBytes = 64 << 10
				cfg.MaxBacklog = 5
			}})
			ic := idle.clients(p)
			t.Run("a queued job is returned again, not duplicated", func(t *testing.T) { testQueuedDedupe(t, ic) })
			t.Run("an oversized message is RESOURCE_EXHAUSTED", func(t *testing.T) { testOversized(t, ic) })
			t.Run("backpressure is RESOURCE_EXHAUSTED and appends nothing", func(t *testing.T) { testBackpressure(t, ic) })
		})
	}
}

func listCollectionNames(t *testing.T, c clients) []string {
	t.Helper()
	res, err := c.colls.ListCollections(t.Context(), connect.NewRequest(&compactorv1.ListCollectionsRequest{PageSize: 1000}))
	if err != nil {
		t.Fatalf("list collections: %v", err)
	}
	var names []string
	for _, c := range res.Msg.GetCollections() {
		names = append(names, c.GetName())
	}
	return names
}

func testCollections(t *testing.T, c clients) {
	ctx := t.Context()
	a := createCollection(t, c, "alpha", 4)
	if _, err := uuid.Parse(a.GetId()); err != nil {
		t.Errorf("collection id %q is not a UUID: %v", a.GetId(), err)
	}
	if a.GetName() != "alpha" || a.GetDimension() != 4 || a.GetLogPosition() != 0 || a.GetBacklog() != 0 || a.GetCreateTime() == nil {
		t.Errorf("created collection = %v", a)
	}
	if got := getCollection(t, c, a.GetId()); !proto.Equal(got, a) {
		t.Errorf("GetCollection = %v, want %v", got, a)
	}

	_, err := c.colls.CreateCollection(ctx, connect.NewRequest(&compactorv1.CreateCollectionRequest{Name: "alpha", Dimension: 4}))
	if ce := wantCode(t, err, connect.CodeAlreadyExists); !strings.Contains(ce.Message(), "alpha") {
		t.Errorf("ALREADY_EXISTS message %q does not name the collection", ce.Message())
	}
	_, err = c.colls.CreateCollection(ctx, connect.NewRequest(&compactorv1.CreateCollectionRequest{Name: ""}))
	wantCode(t, err, connect.CodeInvalidArgument)

	_, err = c.colls.GetCollection(ctx, connect.NewRequest(&compactorv1.GetCollectionRequest{Id: unknownID(1)}))
	wantCode(t, err, connect.CodeNotFound)
	_, err = c.colls.GetCollection(ctx, connect.NewRequest(&compactorv1.GetCollectionRequest{Id: "alpha"}))
	wantCode(t, err, connect.CodeInvalidArgument)
	wantViolation(t, err, "id", `"alpha"`)

	// Paging by name, one per page.
	for _, n := range []string{"page-c", "page-a", "page-b"} {
		createCollection(t, c, n, 0)
	}
	all := listCollectionNames(t, c)
	if !slices.IsSorted(all) || !slices.Contains(all, "page-b") {
		t.Errorf("collections %v: want sorted by name, with page-b", all)
	}
	var paged []string
	token := ""
	for range 100 {
		res, err := c.colls.ListCollections(ctx, connect.NewRequest(&compactorv1.ListCollectionsRequest{PageSize: 1, PageToken: token}))
		if err != nil {
			t.Fatalf("list collections: %v", err)
		}
		if len(res.Msg.GetCollections()) > 1 {
			t.Fatalf("page of size 1 holds %d collections", len(res.Msg.GetCollections()))
		}
		for _, c := range res.Msg.GetCollections() {
			paged = append(paged, c.GetName())
		}
		if token = res.Msg.GetNextPageToken(); token == "" {
			break
		}
	}
	if !slices.Equal(paged, all) {
		t.Errorf("paged collections %v, unpaged %v", paged, all)
	}

	// Delete: gone from Get and List, a second delete is NOT_FOUND, and the
	// name is free again.
	del, err := c.colls.DeleteCollection(ctx, connect.NewRequest(&compactorv1.DeleteCollectionRequest{Id: a.GetId()}))
	if err != nil {
		t.Fatalf("delete: %v", err)
	}
	if del.Msg.GetCollection().GetId() != a.GetId() {
		t.Errorf("DeleteCollection returned %v", del.Msg.GetCollection())
	}
	_, err = c.colls.GetCollection(ctx, connect.NewRequest(&compactorv1.GetCollectionRequest{Id: a.GetId()}))
	wantCode(t, err, connect.CodeNotFound)
	if slices.Contains(listCollectionNames(t, c), "alpha") {
		t.Error("deleted collection alpha is still listed")
	}
	_, err = c.colls.DeleteCollection(ctx, connect.NewRequest(&compactorv1.DeleteCollectionRequest{Id: a.GetId()}))
	wantCode(t, err, connect.CodeNotFound)
	_, err = c.colls.DeleteCollection(ctx, connect.NewRequest(&compactorv1.DeleteCollectionRequest{}))
	wantCode(t, err, connect.CodeInvalidArgument)
	if again := createCollection(t, c, "alpha", 4); again.GetId() == a.GetId() {
		t.Error("re-created collection has the deleted one's id")
	}
}

func countJobs(t *testing.T, c clients) int {
	t.Helper()
	res, err := c.jobs.ListCompactions(t.Context(), connect.NewRequest(&compactorv1.ListCompactionsRequest{PageSize: 1000}))
	if err != nil {
		t.Fatalf("list compactions: %v", err)
	}
	return len(res.Msg.GetJobs())
}

func testCompactArguments(t *testing.T, c clients) {
	ctx := t.Context()
	compact := func(req *compactorv1.CompactRequest) (*compactorv1.CompactResponse, error) {
		res, err := c.jobs.Compact(ctx, connect.NewRequest(req))
		if err != nil {
			return nil, err
		}
		return res.Msg, nil
	}
	a := createCollection(t, c, "compact-a", 3)
	b := createCollection(t, c, "compact-b", 3)
	push(t, c, a.GetId(), smallRecords(0, 12, 3))
	before := countJobs(t, c)

	_, err := compact(&compactorv1.CompactRequest{})
	wantCode(t, err, connect.CodeInvalidArgument)
	wantViolation(t, err, "collection_ids")
	_, err = compact(&compactorv1.CompactRequest{CollectionIds: []string{a.GetId()}, All: true})
	wantCode(t, err, connect.CodeInvalidArgument)

	_, err = compact(&compactorv1.CompactRequest{CollectionIds: []string{a.GetId(), "not-a-uuid"}})
	if ce := wantCode(t, err, connect.CodeInvalidArgument); !strings.Contains(ce.Message(), "not-a-uuid") {
		t.Errorf("message %q does not name the malformed id", ce.Message())
	}
	wantViolation(t, err, "collection_ids[1]", "not-a-uuid")

	// Unknown ids: NOT_FOUND naming each, and nothing enqueued, not even
	// for the known one.
	u1, u2 := unknownID(11), unknownID(12)
	_, err = compact(&compactorv1.CompactRequest{CollectionIds: []string{u1, a.GetId(), u2, u1}})
	ce := wantCode(t, err, connect.CodeNotFound)
	for _, u := range []string{u1, u2} {
		if !strings.Contains(ce.Message(), u) {
			t.Errorf("NOT_FOUND message %q does not name %s", ce.Message(), u)
		}
	}
	var named []string
	for _, v := range violations(t, err) {
		if v.GetField() == "collection_ids" {
			named = append(named, v.GetDescription())
		}
	}
	if len(named) != 2 || !strings.Contains(named[0], u1) || !strings.Contains(named[1], u2) {
		t.Errorf("NOT_FOUND violations %q, want one per unknown id (%s, %s)", named, u1, u2)
	}
	if n := countJobs(t, c); n != before {
		t.Errorf("a failed Compact enqueued jobs: %d jobs, had %d", n, before)
	}

	ids := make([]string, rpc.MaxCompactIDs+1)
	for i := range ids {
		ids[i] = unknownID(i)
	}
	_, err = compact(&compactorv1.CompactRequest{CollectionIds: ids})
	wantCode(t, err, connect.CodeInvalidArgument)
	wantViolation(t, err, "collection_ids", "10000")

	_, err = compact(&compactorv1.CompactRequest{CollectionIds: []string{a.GetId()}, Reason: strings.Repeat("x", rpc.MaxReasonBytes+1)})
	wantCode(t, err, connect.CodeInvalidArgument)
	wantViolation(t, err, "reason")
	if n := countJobs(t, c); n != before {
		t.Errorf("rejected Compacts enqueued jobs: %d jobs, had %d", n, before)
	}

	// Duplicates collapse: one job per distinct collection.
	res, err := compact(&compactorv1.CompactRequest{CollectionIds: []string{a.GetId(), b.GetId(), a.GetId(), b.GetId()}, Reason: "  dedupe test  "})
	if err != nil {
		t.Fatalf("compact: %v", err)
	}
	if len(res.GetJobs()) != 2 {
		t.Fatalf("Compact of 2 distinct collections returned %d jobs: %v", len(res.GetJobs()), res.GetJobs())
	}
	byColl := map[string]*compactorv1.Job{}
	for _, r := range res.GetJobs() {
		j := r.GetJob()
		if !r.GetCreated() {
			t.Errorf("job %s of a collection without a queued job: created=false", j.GetId())
		}
		switch j.GetState() {
		case compactorv1.JobState_JOB_STATE_QUEUED, compactorv1.JobState_JOB_STATE_RUNNING, compactorv1.JobState_JOB_STATE_SUCCEEDED:
		default:
			t.Errorf("new job in state %v", j.GetState())
		}
		if _, err := uuid.Parse(j.GetId()); err != nil {
			t.Errorf("job id %q: %v", j.GetId(), err)
		}
		if j.GetTrigger() != compactorv1.Trigger_TRIGGER_ONE_OFF || j.GetReason() != "dedupe test" || j.GetCreateTime() == nil {
			t.Errorf("job = %v: want ONE_OFF, reason trimmed, create time", j)
		}
		byColl[j.GetCollectionId()] = j
	}
	ja, jb := byColl[a.GetId()], byColl[b.GetId()]
	if ja == nil || jb == nil {
		t.Fatalf("jobs %v: want one for each of %s and %s", byColl, a.GetId(), b.GetId())
	}
	if ja.GetCollectionName() != "compact-a" {
		t.Errorf("collection name on the job = %q", ja.GetCollectionName())
	}
	ja, jb = waitJob(t, c, ja.GetId()), waitJob(t, c, jb.GetId())
	wantSucceeded(t, ja)
	wantSucceeded(t, jb)
	if ja.GetRecordsRead() != 12 || ja.GetOffsetStart() != 0 || ja.GetOffsetEnd() != 12 || ja.GetVersionAfter() <= ja.GetVersionBefore() {
		t.Errorf("job of compact-a: %v", ja)
	}
	if jb.GetRecordsRead() != 0 || jb.GetNote() == "" || jb.GetVersionAfter() != jb.GetVersionBefore() {
		t.Errorf("job of the empty compact-b: %v, want zero records and a note", jb)
	}
	if ja.GetStartTime() == nil || ja.GetFinishTime() == nil || ja.GetFinishTime().AsTime().Before(ja.GetStartTime().AsTime()) {
		t.Errorf("job times: start %v finish %v", ja.GetStartTime(), ja.GetFinishTime())
	}

	// Cancel of a finished job.
	_, err = c.jobs.CancelCompaction(ctx, connect.NewRequest(&compactorv1.CancelCompactionRequest{JobId: ja.GetId()}))
	if ce := wantCode(t, err, connect.CodeFailedPrecondition); !strings.Contains(ce.Message(), ja.GetId()) {
		t.Errorf("FAILED_PRECONDITION message %q does not name the job", ce.Message())
	}

	// all=true: one job per collection.
	res, err = compact(&compactorv1.CompactRequest{All: true})
	if err != nil {
		t.Fatalf("compact all: %v", err)
	}
	if got, want := len(res.GetJobs()), len(listCollectionNames(t, c)); got != want {
		t.Errorf("Compact all: %d jobs for %d collections", got, want)
	}
	for _, r := range res.GetJobs() {
		wantSucceeded(t, waitJob(t, c, r.GetJob().GetId()))
	}
}

func testJobIDs(t *testing.T, c clients) {
	ctx := t.Context()
	_, err := c.jobs.GetCompaction(ctx, connect.NewRequest(&compactorv1.GetCompactionRequest{JobId: unknownID(7)}))
	if ce := wantCode(t, err, connect.CodeNotFound); !strings.Contains(ce.Message(), unknownID(7)) {
		t.Errorf("NOT_FOUND message %q does not name the job", ce.Message())
	}
	_, err = c.jobs.CancelCompaction(ctx, connect.NewRequest(&compactorv1.CancelCompactionRequest{JobId: unknownID(7)}))
	wantCode(t, err, connect.CodeNotFound)
	// The start of an id that no job has is unknown too.
	_, err = c.jobs.GetCompaction(ctx, connect.NewRequest(&compactorv1.GetCompactionRequest{JobId: "0b6a3c0e-8f1e-4a55-9f0e-5c1d2f3a4b5"}))
	wantCode(t, err, connect.CodeNotFound)
	for _, id := range []string{"", "42", "0b6a3c0e-8f1e-4a55-9f0e-5c1d2f3a4b5g", "'; DROP TABLE jobs; --"} {
		_, err = c.jobs.GetCompaction(ctx, connect.NewRequest(&compactorv1.GetCompactionRequest{JobId: id}))
		wantCode(t, err, connect.CodeInvalidArgument)
		wantViolation(t, err, "job_id")
		_, err = c.jobs.CancelCompaction(ctx, connect.NewRequest(&compactorv1.CancelCompactionRequest{JobId: id}))
		wantCode(t, err, connect.CodeInvalidArgument)
		wantViolation(t, err, "job_id")
	}
}

func testPushValidation(t *testing.T, p protocol, c clients) {
	ctx := t.Context()
	coll := createCollection(t, c, "push", 4)
	res := push(t, c, coll.GetId(), smallRecords(0, 3, 4))
	if res.GetFirstOffset() != 1 || res.GetLastOffset() != 3 || res.GetCount() != 3 {
		t.Errorf("PushLogs = %v, want offsets 1..3, count 3", res)
	}
	res = push(t, c, coll.GetId(), smallRecords(3, 2, 4))
	if res.GetFirstOffset() != 4 || res.GetLastOffset() != 5 || res.GetCount() != 2 {
		t.Errorf("second PushLogs = %v, want offsets 4..5, count 2", res)
	}
	const pos = 5

	emb := func(v ...float32) []float32 { return v }
	list, _ := structpb.NewList([]any{"a", "b"})
	nested, _ := structpb.NewStruct(map[string]any{"k": "v"})
	md := func(k string, v *structpb.Value) *structpb.Struct {
		return &structpb.Struct{Fields: map[string]*structpb.Value{k: v, "ok": structpb.NewStringValue("fine")}}
	}
	add := compactorv1.Operation_OPERATION_ADD
	cases := []struct {
		name     string
		rec      *compactorv1.OperationRecord
		field    string
		skipJSON bool // not representable in JSON
	}{
		{"empty id", &compactorv1.OperationRecord{Op: add, Embedding: emb(1, 2, 3, 4)}, "records[1].id", false},
		{"id with NUL", &compactorv1.OperationRecord{Op: add, Id: "a\x00b", Embedding: emb(1, 2, 3, 4)}, "records[1].id", false},
		{"ADD without embedding", &compactorv1.OperationRecord{Op: add, Id: "x"}, "records[1].embedding", false},
		{"UPSERT without embedding", &compactorv1.OperationRecord{Op: compactorv1.Operation_OPERATION_UPSERT, Id: "x"}, "records[1].embedding", false},
		{"wrong dimension", &compactorv1.OperationRecord{Op: add, Id: "x", Embedding: emb(1, 2, 3)}, "records[1].embedding", false},
		{"wrong dimension on UPDATE", &compactorv1.OperationRecord{Op: compactorv1.Operation_OPERATION_UPDATE, Id: "x", Embedding: emb(1, 2, 3, 4, 5)}, "records[1].embedding", false},
		{"NaN in the embedding", &compactorv1.OperationRecord{Op: add, Id: "x", Embedding: emb(1, float32(math.NaN()), 3, 4)}, "records[1].embedding", false},
		{"infinity in the embedding", &compactorv1.OperationRecord{Op: add, Id: "x", Embedding: emb(1, 2, float32(math.Inf(-1)), 4)}, "records[1].embedding", false},
		{"unspecified op", &compactorv1.OperationRecord{Id: "x", Embedding: emb(1, 2, 3, 4)}, "records[1].op", false},
		{"unknown op", &compactorv1.OperationRecord{Op: 99, Id: "x", Embedding: emb(1, 2, 3, 4)}, "records[1].op", false},
		{"list metadata", &compactorv1.OperationRecord{Op: add, Id: "x", Embedding: emb(1, 2, 3, 4), Metadata: md("tags", structpb.NewListValue(list))}, "records[1].metadata.tags", false},
		{"struct metadata", &compactorv1.OperationRecord{Op: add, Id: "x", Embedding: emb(1, 2, 3, 4), Metadata: md("nested", structpb.NewStructValue(nested))}, "records[1].metadata.nested", false},
		{"infinite metadata", &compactorv1.OperationRecord{Op: add, Id: "x", Embedding: emb(1, 2, 3, 4), Metadata: md("score", structpb.NewNumberValue(math.Inf(1)))}, "records[1].metadata.score", true},
		{"NaN metadata", &compactorv1.OperationRecord{Op: add, Id: "x", Embedding: emb(1, 2, 3, 4), Metadata: md("score", structpb.NewNumberValue(math.NaN()))}, "records[1].metadata.score", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.skipJSON && p.json {
				t.Skip("not representable in JSON")
			}
			recs := append(smallRecords(100, 1, 4), tc.rec)
			_, err := c.logs.PushLogs(ctx, connect.NewRequest(&compactorv1.PushLogsRequest{CollectionId: coll.GetId(), Records: recs}))
			wantCode(t, err, connect.CodeInvalidArgument)
			wantViolation(t, err, tc.field)
			if got := getCollection(t, c, coll.GetId()).GetLogPosition(); got != pos {
				t.Errorf("log position %d after a rejected push, want %d", got, pos)
			}
		})
	}

	_, err := c.logs.PushLogs(ctx, connect.NewRequest(&compactorv1.PushLogsRequest{CollectionId: coll.GetId()}))
	wantCode(t, err, connect.CodeInvalidArgument)
	wantViolation(t, err, "records")
	_, err = c.logs.PushLogs(ctx, connect.NewRequest(&compactorv1.PushLogsRequest{CollectionId: unknownID(3), Records: smallRecords(0, 1, 4)}))
	wantCode(t, err, connect.CodeNotFound)
	_, err = c.logs.PushLogs(ctx, connect.NewRequest(&compactorv1.PushLogsRequest{CollectionId: "push", Records: smallRecords(0, 1, 4)}))
	wantCode(t, err, connect.CodeInvalidArgument)
	wantViolation(t, err, "collection_id")
	_, err = c.logs.PushLogs(ctx, connect.NewRequest(&compactorv1.PushLogsRequest{CollectionId: coll.GetId(), Records: deletes(rpc.MaxPushRecords + 1)}))
	wantCode(t, err, connect.CodeInvalidArgument)
	wantViolation(t, err, "records")
	if got := getCollection(t, c, coll.GetId()).GetLogPosition(); got != pos {
		t.Errorf("log position %d after rejected pushes, want %d", got, pos)
	}

	// The dimension is fixed by the first write when not at creation.
	free := createCollection(t, c, "push-free", 0)
	push(t, c, free.GetId(), smallRecords(0, 1, 2))
	if d := getCollection(t, c, free.GetId()).GetDimension(); d != 2 {
		t.Errorf("dimension after the first write = %d, want 2", d)
	}
	_, err = c.logs.PushLogs(ctx, connect.NewRequest(&compactorv1.PushLogsRequest{CollectionId: free.GetId(), Records: smallRecords(1, 1, 3)}))
	wantCode(t, err, connect.CodeInvalidArgument)
	wantViolation(t, err, "records[0].embedding")
}

// testSmall pushes adds, an update, a delete and an upsert, compacts, and
// checks reads before and after; it returns the collection's id.
func testSmall(t *testing.T, c clients) string {
	ctx := t.Context()
	coll := createCollection(t, c, "small", 3)
	push(t, c, coll.GetId(), smallRecords(0, 25, 3))
	newDoc := "updated"
	upd, _ := structpb.NewStruct(map[string]any{"tag": nil, "color": "red"})
	ups, _ := structpb.NewStruct(map[string]any{"n": 30})
	push(t, c, coll.GetId(), []*compactorv1.OperationRecord{
		{Op: compactorv1.Operation_OPERATION_UPDATE, Id: "r00003", Document: &newDoc, Metadata: upd},
		{Op: compactorv1.Operation_OPERATION_DELETE, Id: "r00004"},
		{Op: compactorv1.Operation_OPERATION_UPSERT, Id: "r00030", Embedding: []float32{3, 0, 0}, Metadata: ups},
	})
	before := allRecords(t, c, coll.GetId(), 7)
	if len(before) != 25 {
		t.Fatalf("%d records before compaction, want 25", len(before))
	}

	j := waitJob(t, c, compactOne(t, c, coll.GetId()).GetJob().GetId())
	wantSucceeded(t, j)
	if j.GetRecordsRead() != 28 || j.GetOffsetEnd() != 28 || j.GetRecordsWritten() == 0 || j.GetBytesWritten() == 0 || j.GetNode() == "" {
		t.Errorf("job = %v: want 28 records read up to offset 28, something written, a node", j)
	}
	got := getCollection(t, c, coll.GetId())
	if got.GetBacklog() != 0 || got.GetCompactionOffset() != 28 || got.GetSegmentVersion() != j.GetVersionAfter() || got.GetRecordCount() != 25 || got.GetLastCompactionTime() == nil {
		t.Errorf("collection after compaction = %v (job version %d)", got, j.GetVersionAfter())
	}
	after := allRecords(t, c, coll.GetId(), 7)
	if len(after) != len(before) {
		t.Fatalf("%d records after compaction, %d before", len(after), len(before))
	}
	for i := range after {
		if !proto.Equal(after[i], before[i]) {
			t.Errorf("record %d differs after compaction:\n got %v\nwant %v", i, after[i], before[i])
		}
	}

	res, err := c.colls.GetRecords(ctx, connect.NewRequest(&compactorv1.GetRecordsRequest{CollectionId: coll.GetId(), Ids: []string{"r00004", "r00003", "missing", "r00003"}}))
	if err != nil {
		t.Fatalf("get records by id: %v", err)
	}
	if len(res.Msg.GetRecords()) != 1 {
		t.Fatalf("GetRecords by ids = %v, want only r00003", res.Msg.GetRecords())
	}
	r := res.Msg.GetRecords()[0]
	m := r.GetMetadata().AsMap()
	if r.GetId() != "r00003" || r.GetDocument() != "updated" || m["color"] != "red" || m["n"] != 3.0 || m["tag"] != nil || len(r.GetEmbedding()) != 3 {
		t.Errorf("r00003 = %v: want the update merged (document, color added, tag removed, n kept)", r)
	}
	if res.Msg.GetSegmentVersion() != j.GetVersionAfter() || res.Msg.GetLogPosition() != 28 {
		t.Errorf("read reflects version %d and position %d, want %d and 28", res.Msg.GetSegmentVersion(), res.Msg.GetLogPosition(), j.GetVersionAfter())
	}
	// Both reads of an unknown collection say so, in those words (not the
	// step of the read that found it missing).
	notFound := "collection " + unknownID(5) + " not found"
	_, err = c.colls.GetRecords(ctx, connect.NewRequest(&compactorv1.GetRecordsRequest{CollectionId: unknownID(5)}))
	if ce := wantCode(t, err, connect.CodeNotFound); ce.Message() != notFound {
		t.Errorf("paged read of an unknown collection: %q, want %q", ce.Message(), notFound)
	}
	_, err = c.colls.GetRecords(ctx, connect.NewRequest(&compactorv1.GetRecordsRequest{CollectionId: unknownID(5), Ids: []string{"a"}}))
	if ce := wantCode(t, err, connect.CodeNotFound); ce.Message() != notFound {
		t.Errorf("read by ids of an unknown collection: %q, want %q", ce.Message(), notFound)
	}
	return coll.GetId()
}

// testDebian loads the Debian sample (5,000 ADDs, then 217 UPSERTs) in
// batches of 1,000, compacts it, and checks every record against a model
// of the sample, and a read by ids before and after the compaction.
func testDebian(t *testing.T, c clients) {
	ctx := t.Context()
	baseLines, updLines := sampletest.Base(t), sampletest.Updates(t)
	base, updates := sampletest.Proto(t, baseLines), sampletest.Proto(t, updLines)
	if len(base) != 5000 || len(updates) != 217 {
		t.Fatalf("sample has %d base and %d update lines, want 5000 and 217", len(base), len(updates))
	}
	// The model: ADDs of new ids, then UPSERTs merged (metadata keys
	// merged, document and embedding replaced when given).
	model := map[string]*materialize.OperationRecord{}
	for i := range baseLines {
		l := baseLines[i]
		model[l.ID] = &l
	}
	updated := []string{"0ad"}
	for _, u := range updLines {
		m := model[u.ID]
		if m == nil {
			t.Fatalf("update of %s, which the base does not hold", u.ID)
		}
		if !slices.Contains(updated, u.ID) {
			updated = append(updated, u.ID)
		}
		if u.Document != nil {
			m.Document = u.Document
		}
		if u.Embedding != nil {
			m.Embedding = u.Embedding
		}
		md := maps.Clone(m.Metadata)
		for k, v := range u.Metadata {
			if v == nil {
				delete(md, k)
			} else {
				md[k] = v
			}
		}
		m.Metadata = md
	}
	if len(updated) != 217 { // 216 updated packages and 0ad
		t.Fatalf("%d updated ids, want 216", len(updated)-1)
	}

	coll := createCollection(t, c, "debian", 64)
	for _, recs := range [][]*compactorv1.OperationRecord{base, updates} {
		for b := range slices.Chunk(recs, 1000) {
			push(t, c, coll.GetId(), b)
		}
	}
	if got := getCollection(t, c, coll.GetId()); got.GetLogPosition() != 5217 || got.GetBacklog() != 5217 {
		t.Fatalf("after the pushes: %v, want log position and backlog 5217", got)
	}
	byIDs := func() *compactorv1.GetRecordsResponse {
		t.Helper()
		res, err := c.colls.GetRecords(ctx, connect.NewRequest(&compactorv1.GetRecordsRequest{CollectionId: coll.GetId(), Ids: updated}))
		if err != nil {
			t.Fatalf("get records by ids: %v", err)
		}
		if len(res.Msg.GetRecords()) != len(updated) {
			t.Fatalf("%d records read by id, want %d", len(res.Msg.GetRecords()), len(updated))
		}
		return res.Msg
	}
	before := byIDs()

	j := waitJob(t, c, compactOne(t, c, coll.GetId()).GetJob().GetId())
	wantSucceeded(t, j)
	if j.GetRecordsRead() != 5217 || j.GetRecordsWritten() != 5000 {
		t.Errorf("job read %d and wrote %d records, want 5217 and 5000", j.GetRecordsRead(), j.GetRecordsWritten())
	}

	all := allRecords(t, c, coll.GetId(), 1000)
	if len(all) != 5000 {
		t.Fatalf("%d records paged, want 5000", len(all))
	}
	for i, r := range all {
		if i > 0 && all[i-1].GetId() >= r.GetId() {
			t.Fatalf("records out of id order at %d: %q then %q", i, all[i-1].GetId(), r.GetId())
		}
		m := model[r.GetId()]
		switch {
		case m == nil:
			t.Fatalf("record %q is not in the sample", r.GetId())
		case r.GetDocument() != *m.Document:
			t.Errorf("%s: document %q, want %q", r.GetId(), r.GetDocument(), *m.Document)
		case !slices.Equal(r.GetEmbedding(), m.Embedding):
			t.Errorf("%s: embedding differs from the sample's", r.GetId())
		case !reflect.DeepEqual(r.GetMetadata().AsMap(), map[string]any(m.Metadata)):
			t.Errorf("%s: metadata %v, want %v", r.GetId(), r.GetMetadata().AsMap(), m.Metadata)
		}
	}

	after := byIDs()
	if after.GetSegmentVersion() != j.GetVersionAfter() || before.GetSegmentVersion() != j.GetVersionBefore() {
		t.Errorf("reads reflect versions %d and %d, want %d and %d", before.GetSegmentVersion(), after.GetSegmentVersion(), j.GetVersionBefore(), j.GetVersionAfter())
	}
	for i := range after.GetRecords() {
		if !proto.Equal(after.GetRecords()[i], before.GetRecords()[i]) {
			t.Errorf("record %s reads differently after compaction:\n got %v\nwant %v", after.GetRecords()[i].GetId(), after.GetRecords()[i], before.GetRecords()[i])
		}
	}

	i := slices.IndexFunc(after.GetRecords(), func(r *compactorv1.Record) bool { return r.GetId() == "0ad" })
	if i < 0 {
		t.Fatal("0ad not read")
	}
	r := after.GetRecords()[i]
	wantMD := map[string]any{"section": "games", "priority": "optional", "version": "0.0.26-3", "architecture": "amd64", "installed_size_kib": 28591.0, "size_bytes": 7891488.0}
	if r.GetId() != "0ad" || r.GetDocument() != "Real-time strategy game of ancient warfare" || len(r.GetEmbedding()) != 64 || !reflect.DeepEqual(r.GetMetadata().AsMap(), wantMD) {
		t.Errorf("0ad = %v, want its base line", r)
	}
}

func testListCompactions(t *testing.T, c clients) {
	ctx := t.Context()
	list := func(req *compactorv1.ListCompactionsRequest) *compactorv1.ListCompactionsResponse {
		t.Helper()
		res, err := c.jobs.ListCompactions(ctx, connect.NewRequest(req))
		if err != nil {
			t.Fatalf("list compactions %v: %v", req, err)
		}
		return res.Msg
	}
	all := list(&compactorv1.ListCompactionsRequest{PageSize: 1000})
	if len(all.GetJobs()) < 3 || all.GetNextPageToken() != "" {
		t.Fatalf("%d jobs (next %q), want at least 3 on one page", len(all.GetJobs()), all.GetNextPageToken())
	}
	for i := 1; i < len(all.GetJobs()); i++ {
		if all.GetJobs()[i].GetCreateTime().AsTime().After(all.GetJobs()[i-1].GetCreateTime().AsTime()) {
			t.Errorf("jobs not newest first at %d", i)
		}
	}
	var paged []string
	token := ""
	for range 1000 {
		res := list(&compactorv1.ListCompactionsRequest{PageSize: 1, PageToken: token})
		if len(res.GetJobs()) > 1 {
			t.Fatalf("page of size 1 holds %d jobs", len(res.GetJobs()))
		}
		for _, j := range res.GetJobs() {
			paged = append(paged, j.GetId())
		}
		if token = res.GetNextPageToken(); token == "" {
			break
		}
	}
	var want []string
	for _, j := range all.GetJobs() {
		want = append(want, j.GetId())
	}
	if !slices.Equal(paged, want) {
		t.Errorf("paged jobs\n%v\nunpaged\n%v", paged, want)
	}

	some := all.GetJobs()[0]
	for _, j := range list(&compactorv1.ListCompactionsRequest{CollectionId: some.GetCollectionId()}).GetJobs() {
		if j.GetCollectionId() != some.GetCollectionId() {
			t.Errorf("collection filter returned a job of %s", j.GetCollectionId())
		}
	}
	done := list(&compactorv1.ListCompactionsRequest{States: []compactorv1.JobState{compactorv1.JobState_JOB_STATE_SUCCEEDED}})
	if len(done.GetJobs()) == 0 {
		t.Error("no SUCCEEDED jobs listed")
	}
	for _, j := range done.GetJobs() {
		if j.GetState() != compactorv1.JobState_JOB_STATE_SUCCEEDED {
			t.Errorf("state filter returned a %v job", j.GetState())
		}
	}
	if n := len(list(&compactorv1.ListCompactionsRequest{States: []compactorv1.JobState{compactorv1.JobState_JOB_STATE_FAILED}}).GetJobs()); n != 0 {
		t.Errorf("%d FAILED jobs listed, want none", n)
	}
	if n := len(list(&compactorv1.ListCompactionsRequest{Trigger: compactorv1.Trigger_TRIGGER_SCHEDULED}).GetJobs()); n != 0 {
		t.Errorf("%d SCHEDULED jobs listed with the scheduler idle, want none", n)
	}
	if n := len(list(&compactorv1.ListCompactionsRequest{Trigger: compactorv1.Trigger_TRIGGER_ONE_OFF, PageSize: 1000}).GetJobs()); n != len(all.GetJobs()) {
		t.Errorf("%d ONE_OFF jobs, want all %d", n, len(all.GetJobs()))
	}
	for _, j := range all.GetJobs() {
		if j.GetKind() != compactorv1.JobKind_JOB_KIND_COMPACTION {
			t.Errorf("job %s of a Compact call is of kind %v, want JOB_KIND_COMPACTION", j.GetId(), j.GetKind())
		}
	}
	compactions := compactorv1.JobKind_JOB_KIND_COMPACTION
	if n := len(list(&compactorv1.ListCompactionsRequest{Kinds: []compactorv1.JobKind{compactions}, PageSize: 1000}).GetJobs()); n != len(all.GetJobs()) {
		t.Errorf("%d compactions listed, want all %d", n, len(all.GetJobs()))
	}
	if n := len(list(&compactorv1.ListCompactionsRequest{Kinds: []compactorv1.JobKind{compactorv1.JobKind_JOB_KIND_VERIFY}}).GetJobs()); n != 0 {
		t.Errorf("%d verify jobs listed, want none", n)
	}
	_, err := c.jobs.ListCompactions(ctx, connect.NewRequest(&compactorv1.ListCompactionsRequest{
		Kinds: []compactorv1.JobKind{compactions, compactorv1.JobKind_JOB_KIND_UNSPECIFIED}}))
	wantViolation(t, err, "kinds[1]", "JOB_KIND_UNSPECIFIED is not a job kind")
}

func testWatch(t *testing.T, c clients) {
	ctx := t.Context()
	jobs, err := c.jobs.ListCompactions(ctx, connect.NewRequest(&compactorv1.ListCompactionsRequest{PageSize: 2}))
	if err != nil || len(jobs.Msg.GetJobs()) != 2 {
		t.Fatalf("list compactions: %v, %v", jobs, err)
	}
	j1, j2 := jobs.Msg.GetJobs()[1], jobs.Msg.GetJobs()[0]

	// Named jobs, finished or not: a snapshot of each, in the order named,
	// then SNAPSHOT_COMPLETE.
	sctx, stop := context.WithCancel(ctx)
	stream, err := c.jobs.WatchCompactions(sctx, connect.NewRequest(&compactorv1.WatchCompactionsRequest{JobIds: []string{j1.GetId(), j2.GetId()}}))
	if err != nil {
		t.Fatalf("watch: %v", err)
	}
	var got []string
	for stream.Receive() {
		ev := stream.Msg()
		if ev.GetType() == compactorv1.WatchEventType_WATCH_EVENT_TYPE_SNAPSHOT_COMPLETE {
			break
		}
		if ev.GetType() != compactorv1.WatchEventType_WATCH_EVENT_TYPE_SNAPSHOT {
			t.Fatalf("event %v before SNAPSHOT_COMPLETE", ev)
		}
		got = append(got, ev.GetJob().GetId()+"="+ev.GetJob().GetState().String())
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("watch: %v", err)
	}
	want := []string{j1.GetId() + "=" + j1.GetState().String(), j2.GetId() + "=" + j2.GetState().String()}
	if !slices.Equal(got, want) {
		t.Errorf("snapshot %v, want %v", got, want)
	}
	stop()
	_ = stream.Close()

	// Errors arrive on the stream.
	for _, tc := range []struct {
		req  *compactorv1.WatchCompactionsRequest
		code connect.Code
	}{
		{&compactorv1.WatchCompactionsRequest{JobIds: []string{unknownID(9)}}, connect.CodeNotFound},
		{&compactorv1.WatchCompactionsRequest{JobIds: []string{"nope"}}, connect.CodeInvalidArgument},
		{&compactorv1.WatchCompactionsRequest{CollectionId: "nope"}, connect.CodeInvalidArgument},
	} {
		stream, err := c.jobs.WatchCompactions(ctx, connect.NewRequest(tc.req))
		if err == nil {
			for stream.Receive() {
				t.Errorf("watch %v: got %v, want %v", tc.req, stream.Msg(), tc.code)
			}
			err = stream.Err()
			_ = stream.Close()
		}
		wantCode(t, err, tc.code)
	}

	// Live: the changes of one collection's job.
	coll := createCollection(t, c, "watched", 2)
	push(t, c, coll.GetId(), smallRecords(0, 10, 2))
	lctx, stopLive := context.WithCancel(ctx)
	defer stopLive()
	live, err := c.jobs.WatchCompactions(lctx, connect.NewRequest(&compactorv1.WatchCompactionsRequest{CollectionId: coll.GetId(), IncludeProgress: true}))
	if err != nil {
		t.Fatalf("watch: %v", err)
	}
	defer live.Close()
	if !live.Receive() || live.Msg().GetType() != compactorv1.WatchEventType_WATCH_EVENT_TYPE_SNAPSHOT_COMPLETE {
		t.Fatalf("first event %v (err %v), want SNAPSHOT_COMPLETE of an idle collection", live.Msg(), live.Err())
	}
	id := compactOne(t, c, coll.GetId()).GetJob().GetId()
	var states []compactorv1.JobState
	for live.Receive() {
		ev := live.Msg()
		if ev.GetJob().GetId() != id || ev.GetJob().GetCollectionId() != coll.GetId() {
			t.Fatalf("event of another job: %v", ev)
		}
		if ev.GetType() == compactorv1.WatchEventType_WATCH_EVENT_TYPE_CHANGED && !slices.Contains(states, ev.GetJob().GetState()) {
			states = append(states, ev.GetJob().GetState())
		}
		if finished(ev.GetJob().GetState()) {
			break
		}
	}
	if err := live.Err(); err != nil {
		t.Fatalf("watch: %v", err)
	}
	wantStates := []compactorv1.JobState{compactorv1.JobState_JOB_STATE_QUEUED, compactorv1.JobState_JOB_STATE_RUNNING, compactorv1.JobState_JOB_STATE_SUCCEEDED}
	if !slices.Equal(states, wantStates) {
		t.Errorf("watched states %v, want %v", states, wantStates)
	}
}

// testInternal makes the segment manifests of a compacted collection that
// no read has seen (readers share a manifest once decoded) fail to read
// for no known reason (a missing blob, or one that reads but does not
// decode, is DATA_LOSS, see TestCorruptBlockIsDataLossAndDeadLettersItsCollection):
// a read then fails with INTERNAL and a generic message, the detail in the
// log.
func testInternal(t *testing.T, f *fixture, c clients) {
	coll := createCollection(t, c, "internal", 2)
	collID := coll.GetId()
	push(t, c, collID, smallRecords(0, 3, 2))
	wantSucceeded(t, waitJob(t, c, compactOne(t, c, collID).GetJob().GetId()))
	// A read error the blob store gives for no known reason (not a
	// missing blob, which is data loss).
	f.faults.failGets(collID + "/manifests/")
	var err error
	_, err = c.colls.GetRecords(t.Context(), connect.NewRequest(&compactorv1.GetRecordsRequest{CollectionId: collID}))
	ce := wantCode(t, err, connect.CodeInternal)
	if ce.Message() != "internal error; see the server log" {
		t.Errorf("INTERNAL message %q, want the generic one", ce.Message())
	}
	// Logged once, with its cause.
	var lines []string
	for _, l := range strings.Split(f.logs.String(), "\n") {
		if strings.Contains(l, "GetRecords") && strings.Contains(l, "code=internal") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 1 || !strings.Contains(lines[0], "rpc failed") || !strings.Contains(lines[0], collID+"/manifests/") {
		t.Errorf("the server log holds %d lines of the internal error, want one with its cause:\n%s", len(lines), f.logs.String())
	}
}

func testQueuedDedupe(t *testing.T, c clients) {
	ctx := t.Context()
	coll := createCollection(t, c, "queued", 2)
	push(t, c, coll.GetId(), smallRecords(0, 3, 2))
	first := compactOne(t, c, coll.GetId())
	if !first.GetCreated() || first.GetJob().GetState() != compactorv1.JobState_JOB_STATE_QUEUED {
		t.Fatalf("first Compact = %v, want a new QUEUED job", first)
	}
	for _, req := range []*compactorv1.CompactRequest{
		{CollectionIds: []string{coll.GetId(), coll.GetId()}},
		{All: true},
	} {
		res, err := c.jobs.Compact(ctx, connect.NewRequest(req))
		if err != nil {
			t.Fatalf("compact %v: %v", req, err)
		}
		if len(res.Msg.GetJobs()) != 1 {
			t.Fatalf("Compact %v: %d jobs, want 1", req, len(res.Msg.GetJobs()))
		}
		again := res.Msg.GetJobs()[0]
		if again.GetCreated() || again.GetJob().GetId() != first.GetJob().GetId() || again.GetJob().GetState() != compactorv1.JobState_JOB_STATE_QUEUED {
			t.Errorf("Compact %v while queued = %v, want job %s again with created=false", req, again, first.GetJob().GetId())
		}
	}

	// Cancel of a QUEUED job ends it at once; a second cancel is
	// FAILED_PRECONDITION; a new Compact creates a new job.
	res, err := c.jobs.CancelCompaction(ctx, connect.NewRequest(&compactorv1.CancelCompactionRequest{JobId: first.GetJob().GetId()}))
	if err != nil {
		t.Fatalf("cancel: %v", err)
	}
	if j := res.Msg.GetJob(); j.GetState() != compactorv1.JobState_JOB_STATE_CANCELLED || j.GetFinishTime() == nil {
		t.Errorf("cancelled job = %v", j)
	}
	got, err := c.jobs.GetCompaction(ctx, connect.NewRequest(&compactorv1.GetCompactionRequest{JobId: first.GetJob().GetId()}))
	if err != nil || got.Msg.GetJob().GetState() != compactorv1.JobState_JOB_STATE_CANCELLED {
		t.Errorf("GetCompaction after cancel = %v, %v", got, err)
	}
	_, err = c.jobs.CancelCompaction(ctx, connect.NewRequest(&compactorv1.CancelCompactionRequest{JobId: first.GetJob().GetId()}))
	wantCode(t, err, connect.CodeFailedPrecondition)
	if next := compactOne(t, c, coll.GetId()); !next.GetCreated() || next.GetJob().GetId() == first.GetJob().GetId() {
		t.Errorf("Compact after cancel = %v, want a new job", next)
	}

	// Watch needs a running manager.
	stream, err := c.jobs.WatchCompactions(ctx, connect.NewRequest(&compactorv1.WatchCompactionsRequest{}))
	if err == nil {
		for stream.Receive() {
			t.Errorf("watch of a stopped manager: %v", stream.Msg())
		}
		err = stream.Err()
		_ = stream.Close()
	}
	wantCode(t, err, connect.CodeUnavailable)
}

func testOversized(t *testing.T, c clients) {
	ctx := t.Context()
	coll := createCollection(t, c, "oversized", 2)
	doc := strings.Repeat("x", 100<<10)
	_, err := c.logs.PushLogs(ctx, connect.NewRequest(&compactorv1.PushLogsRequest{CollectionId: coll.GetId(), Records: []*compactorv1.OperationRecord{
		{Op: compactorv1.Operation_OPERATION_ADD, Id: "big", Embedding: []float32{1, 2}, Document: &doc},
	}}))
	wantCode(t, err, connect.CodeResourceExhausted)
	_, err = c.colls.CreateCollection(ctx, connect.NewRequest(&compactorv1.CreateCollectionRequest{Name: doc}))
	wantCode(t, err, connect.CodeResourceExhausted)
	if got := getCollection(t, c, coll.GetId()).GetLogPosition(); got != 0 {
		t.Errorf("log position %d after an oversized push, want 0", got)
	}
	// The server still answers on the same client.
	push(t, c, coll.GetId(), smallRecords(0, 1, 2))
}

func testBackpressure(t *testing.T, c clients) {
	ctx := t.Context()
	coll := createCollection(t, c, "backpressure", 2)
	push(t, c, coll.GetId(), smallRecords(0, 4, 2))
	push(t, c, coll.GetId(), smallRecords(4, 1, 2)) // reaches the limit of 5
	for _, n := range []int{1, 3} {
		_, err := c.logs.PushLogs(ctx, connect.NewRequest(&compactorv1.PushLogsRequest{CollectionId: coll.GetId(), Records: smallRecords(10, n, 2)}))
		if ce := wantCode(t, err, connect.CodeResourceExhausted); !strings.Contains(ce.Message(), "limit") {
			t.Errorf("RESOURCE_EXHAUSTED message %q does not explain the limit", ce.Message())
		}
	}
	if got := getCollection(t, c, coll.GetId()); got.GetLogPosition() != 5 || got.GetBacklog() != 5 {
		t.Errorf("after refused pushes: log position %d, backlog %d, want 5 and 5", got.GetLogPosition(), got.GetBacklog())
	}
}

func testListNodes(t *testing.T, f *fixture, c clients) {
	res, err := c.jobs.ListNodes(t.Context(), connect.NewRequest(&compactorv1.ListNodesRequest{}))
	if err != nil {
		t.Fatalf("ListNodes: %v", err)
	}
	nodes := res.Msg.GetNodes()
	if len(nodes) != 1 {
		t.Fatalf("%d nodes, want this one: %v", len(nodes), nodes)
	}
	n := nodes[0]
	if n.GetName() != f.app.Manager.Node() || !n.GetAlive() || !n.GetSelf() || n.GetStartTime() == nil || n.GetHeartbeatTime() == nil {
		t.Fatalf("node %v: want %s, alive, self, with its times", n, f.app.Manager.Node())
	}
}

func testControls(t *testing.T, c clients) {
	ctx := t.Context()
	coll := createCollection(t, c, "controlled", 2)
	push(t, c, coll.GetId(), smallRecords(0, 3, 2))
	planOf := func(estimate bool) (*compactorv1.PlanCompactionsResponse, *compactorv1.PlanEntry) {
		t.Helper()
		res, err := c.ctl.PlanCompactions(ctx, connect.NewRequest(&compactorv1.PlanCompactionsRequest{Estimate: estimate}))
		if err != nil {
			t.Fatalf("PlanCompactions: %v", err)
		}
		for _, e := range res.Msg.GetEntries() {
			if e.GetCollectionId() == coll.GetId() {
				return res.Msg, e
			}
		}
		t.Fatalf("the plan lacks collection %s", coll.GetId())
		return nil, nil
	}
	if _, e := planOf(false); e.GetDecision() != compactorv1.PlanDecision_PLAN_DECISION_BELOW_THRESHOLDS || e.GetBacklog() != 3 {
		t.Fatalf("plan of a small backlog: %v", e)
	}

	// A per-collection minimum of 2 records makes it due.
	set, err := c.ctl.UpdateCollectionSettings(ctx, connect.NewRequest(&compactorv1.UpdateCollectionSettingsRequest{
		CollectionId: coll.GetId(), MinCompactionSize: 2, MaxUncompactedAge: durationpb.New(90 * time.Second),
	}))
	if err != nil {
		t.Fatalf("UpdateCollectionSettings: %v", err)
	}
	if got := set.Msg.GetCollection(); got.GetMinCompactionSize() != 2 || got.GetMaxUncompactedAge().AsDuration() != 90*time.Second {
		t.Fatalf("settings stored %v", got)
	}
	if _, e := planOf(true); e.GetDecision() != compactorv1.PlanDecision_PLAN_DECISION_RUN || e.GetMinCompactionSize() != 2 ||
		e.GetEstimate().GetRecords() != 3 {
		t.Fatalf("plan after lowering the minimum, with an estimate: %v", e)
	}

	// Pause everything, then the collection: the plan says so, and why.
	paused, err := c.ctl.PauseCompactions(ctx, connect.NewRequest(&compactorv1.PauseCompactionsRequest{Reason: "storage maintenance", Operator: "ops"}))
	if err != nil {
		t.Fatalf("PauseCompactions: %v", err)
	}
	if p := paused.Msg.GetPause(); !p.GetPaused() || p.GetReason() != "storage maintenance" || p.GetPausedBy() != "ops" || p.GetPauseTime() == nil {
		t.Fatalf("global pause %v", p)
	}
	if plan, e := planOf(false); !plan.GetPause().GetPaused() || e.GetDecision() != compactorv1.PlanDecision_PLAN_DECISION_PAUSED ||
		!strings.Contains(e.GetReason(), "storage maintenance") {
		t.Fatalf("plan while paused: pause %v, entry %v", plan.GetPause(), e)
	}
	one, err := c.ctl.PauseCompactions(ctx, connect.NewRequest(&compactorv1.PauseCompactionsRequest{CollectionId: coll.GetId(), Reason: "reindex", Operator: "alice"}))
	if err != nil {
		t.Fatalf("PauseCompactions of a collection: %v", err)
	}
	if got := one.Msg.GetCollection(); !got.GetPaused() || got.GetPauseReason() != "reindex" || got.GetPausedBy() != "alice" {
		t.Fatalf("paused collection %v", got)
	}
	controls, err := c.ctl.GetControls(ctx, connect.NewRequest(&compactorv1.GetControlsRequest{}))
	if err != nil || !controls.Msg.GetPause().GetPaused() || controls.Msg.GetPausedCollections() < 1 {
		t.Fatalf("GetControls: %v, %v", controls, err)
	}
	if _, err := c.ctl.ResumeCompactions(ctx, connect.NewRequest(&compactorv1.ResumeCompactionsRequest{Operator: "ops"})); err != nil {
		t.Fatalf("ResumeCompactions: %v", err)
	}
	if _, e := planOf(false); e.GetDecision() != compactorv1.PlanDecision_PLAN_DECISION_COLLECTION_PAUSED {
		t.Fatalf("after the global resume the collection's own pause holds: %v", e)
	}
	// A one-off compaction runs whatever the pause.
	job := compactOne(t, c, coll.GetId()).GetJob()
	if got := waitJob(t, c, job.GetId()); got.GetState() != compactorv1.JobState_JOB_STATE_SUCCEEDED {
		t.Fatalf("one-off job while paused: %v", got.GetState())
	}
	resumed, err := c.ctl.ResumeCompactions(ctx, connect.NewRequest(&compactorv1.ResumeCompactionsRequest{CollectionId: coll.GetId()}))
	if err != nil || resumed.Msg.GetCollection().GetPaused() {
		t.Fatalf("ResumeCompactions of the collection: %v, %v", resumed, err)
	}

	// Errors.
	_, err = c.ctl.PauseCompactions(ctx, connect.NewRequest(&compactorv1.PauseCompactionsRequest{CollectionId: uuid.NewString()}))
	wantCode(t, err, connect.CodeNotFound)
	_, err = c.ctl.PauseCompactions(ctx, connect.NewRequest(&compactorv1.PauseCompactionsRequest{CollectionId: "not-a-uuid"}))
	wantCode(t, err, connect.CodeInvalidArgument)
	_, err = c.ctl.PauseCompactions(ctx, connect.NewRequest(&compactorv1.PauseCompactionsRequest{Reason: strings.Repeat("r", 2000)}))
	wantCode(t, err, connect.CodeInvalidArgument)
	for _, bad := range []*compactorv1.UpdateCollectionSettingsRequest{
		{CollectionId: coll.GetId(), MinCompactionSize: -1},
		{CollectionId: coll.GetId(), MaxUncompactedAge: durationpb.New(time.Millisecond)},
		{CollectionId: coll.GetId(), MaxUncompactedAge: durationpb.New(-time.Second)},
	} {
		_, err = c.ctl.UpdateCollectionSettings(ctx, connect.NewRequest(bad))
		wantCode(t, err, connect.CodeInvalidArgument)
	}
	_, err = c.ctl.UpdateCollectionSettings(ctx, connect.NewRequest(&compactorv1.UpdateCollectionSettingsRequest{CollectionId: uuid.NewString()}))
	wantCode(t, err, connect.CodeNotFound)

	// The scheduling policy: only the fields given change.
	pol, err := c.ctl.SetCollectionPolicy(ctx, connect.NewRequest(&compactorv1.SetCollectionPolicyRequest{
		CollectionId: coll.GetId(), Priority: compactorv1.PriorityClass_PRIORITY_CLASS_LOW,
		CompactionWindows: &compactorv1.CompactionWindows{Windows: []string{"Mon-Fri 01:00-05:00 Europe/Berlin"}},
		ObjectiveMaxAge:   durationpb.New(10 * time.Minute), ObjectiveMaxBacklog: proto.Int64(50_000), ThroughputShare: proto.Float64(0.25),
	}))
	if err != nil {
		t.Fatalf("SetCollectionPolicy: %v", err)
	}
	if got := pol.Msg.GetCollection(); got.GetPriority() != compactorv1.PriorityClass_PRIORITY_CLASS_LOW ||
		len(got.GetCompactionWindows()) != 1 || got.GetObjectiveMaxAge().AsDuration() != 10*time.Minute || got.GetObjectiveMaxBacklog() != 50_000 || got.GetThroughputShare() != 0.25 {
		t.Fatalf("collection after SetCollectionPolicy: %v", got)
	}
	pol, err = c.ctl.SetCollectionPolicy(ctx, connect.NewRequest(&compactorv1.SetCollectionPolicyRequest{
		CollectionId: coll.GetId(), CompactionWindows: &compactorv1.CompactionWindows{}}))
	if err != nil || pol.Msg.GetCollection().GetPriority() != compactorv1.PriorityClass_PRIORITY_CLASS_LOW ||
		len(pol.Msg.GetCollection().GetCompactionWindows()) != 0 || pol.Msg.GetCollection().GetObjectiveMaxBacklog() != 50_000 {
		t.Fatalf("after removing the windows: %v, %v; want the rest unchanged", pol, err)
	}
	if _, e := planOf(false); e.GetPriority() != compactorv1.PriorityClass_PRIORITY_CLASS_LOW || !e.GetWindowOpen() {
		t.Errorf("plan entry %v; want priority LOW, window open", e)
	}
	_, err = c.ctl.SetCollectionPolicy(ctx, connect.NewRequest(&compactorv1.SetCollectionPolicyRequest{
		CollectionId: coll.GetId(), CompactionWindows: &compactorv1.CompactionWindows{Windows: []string{"Mon-Fry 01:00-05:00"}}}))
	wantCode(t, err, connect.CodeInvalidArgument)
	if err == nil || !strings.Contains(err.Error(), `unknown day "Fry"`) {
		t.Errorf("a bad window: %v; want the message to name the bad day", err)
	}
	for _, bad := range []*compactorv1.SetCollectionPolicyRequest{
		{CollectionId: coll.GetId(), Priority: compactorv1.PriorityClass(9)},
		{CollectionId: coll.GetId(), ObjectiveMaxAge: durationpb.New(time.Millisecond)},
		{CollectionId: coll.GetId(), ObjectiveMaxBacklog: proto.Int64(-1)},
		{CollectionId: coll.GetId(), ThroughputShare: proto.Float64(1.5)},
		{CollectionId: "not-a-uuid"},
	} {
		_, err = c.ctl.SetCollectionPolicy(ctx, connect.NewRequest(bad))
		wantCode(t, err, connect.CodeInvalidArgument)
	}
	_, err = c.ctl.SetCollectionPolicy(ctx, connect.NewRequest(&compactorv1.SetCollectionPolicyRequest{CollectionId: uuid.NewString(), Priority: compactorv1.PriorityClass_PRIORITY_CLASS_LOW}))
	wantCode(t, err, connect.CodeNotFound)

	// The throughput cap: set for every node, then removed.
	tp, err := c.ctl.SetThroughput(ctx, connect.NewRequest(&compactorv1.SetThroughputRequest{BytesPerSecond: 50 << 20, Operator: "ops"}))
	if err != nil {
		t.Fatalf("SetThroughput: %v", err)
	}
	if got := tp.Msg.GetThroughput(); got.GetBytesPerSecond() != 50<<20 || got.GetOverrideBytesPerSecond() != 50<<20 || got.GetSetBy() != "ops" {
		t.Fatalf("throughput after SetThroughput: %v", got)
	}
	controls, err = c.ctl.GetControls(ctx, connect.NewRequest(&compactorv1.GetControlsRequest{}))
	if err != nil || controls.Msg.GetThroughput().GetBytesPerSecond() != 50<<20 {
		t.Fatalf("GetControls throughput: %v, %v", controls, err)
	}
	if tp, err = c.ctl.SetThroughput(ctx, connect.NewRequest(&compactorv1.SetThroughputRequest{})); err != nil || tp.Msg.GetThroughput().GetOverrideBytesPerSecond() != 0 {
		t.Fatalf("SetThroughput 0: %v, %v", tp, err)
	}
	_, err = c.ctl.SetThroughput(ctx, connect.NewRequest(&compactorv1.SetThroughputRequest{BytesPerSecond: -1}))
	wantCode(t, err, connect.CodeInvalidArgument)
}

package client_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/compactorhq/compactor/client"
	compactorv1 "github.com/compactorhq/compactor/gen/compactor/v1"
	"github.com/compactorhq/compactor/gen/compactor/v1/compactorv1connect"
)

// fakeLog is a LogService that keeps what it appended by idempotency key
// (a key seen before is answered as replayed), refuses the first refuse
// calls with BACKLOG_LIMIT, loses the answer of the calls listed in lose
// (appends, then answers UNAVAILABLE), and rejects a record whose id is
// "bad" as invalid.
type fakeLog struct {
	compactorv1connect.UnimplementedLogServiceHandler
	refuse int
	lose   map[int]bool

	mu      sync.Mutex
	calls   []string // keys, one per call
	byKey   map[string]*compactorv1.PushLogsResponse
	records []string // ids appended, in order
}

func errorWith(code connect.Code, d *compactorv1.ErrorDetail) error {
	ce := connect.NewError(code, errors.New(d.GetReason().String()))
	if det, err := connect.NewErrorDetail(d); err == nil {
		ce.AddDetail(det)
	}
	return ce
}

func (f *fakeLog) PushLogs(_ context.Context, req *connect.Request[compactorv1.PushLogsRequest]) (*connect.Response[compactorv1.PushLogsResponse], error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	key := req.Msg.GetIdempotencyKey()
	f.calls = append(f.calls, key)
	n := len(f.calls)
	if old := f.byKey[key]; old != nil {
		res := proto.Clone(old).(*compactorv1.PushLogsResponse)
		res.Replayed = true
		return connect.NewResponse(res), nil
	}
	if f.refuse > 0 {
		f.refuse--
		return nil, errorWith(connect.CodeResourceExhausted, &compactorv1.ErrorDetail{Reason: compactorv1.ErrorReason_ERROR_REASON_BACKLOG_LIMIT})
	}
	for i, r := range req.Msg.GetRecords() {
		if r.GetId() == "bad" {
			return nil, errorWith(connect.CodeInvalidArgument, &compactorv1.ErrorDetail{Reason: compactorv1.ErrorReason_ERROR_REASON_INVALID_RECORD,
				Data: &compactorv1.ErrorDetail_InvalidRecord{InvalidRecord: &compactorv1.InvalidRecord{Index: int32(i), Id: "bad", Field: "embedding", Problem: "dimension 3, want 64"}}})
		}
	}
	first := int64(len(f.records) + 1)
	for _, r := range req.Msg.GetRecords() {
		f.records = append(f.records, r.GetId())
	}
	res := &compactorv1.PushLogsResponse{FirstOffset: first, LastOffset: int64(len(f.records)), Count: int32(len(req.Msg.GetRecords()))}
	if f.byKey == nil {
		f.byKey = map[string]*compactorv1.PushLogsResponse{}
	}
	f.byKey[key] = res
	if f.lose[n] {
		return nil, connect.NewError(connect.CodeUnavailable, errors.New("connection reset after the append"))
	}
	return connect.NewResponse(res), nil
}

func (f *fakeLog) serve(t *testing.T) *client.Client {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle(compactorv1connect.NewLogServiceHandler(f))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return client.New(srv.Client(), srv.URL)
}

func records(ids ...string) []*compactorv1.OperationRecord {
	var out []*compactorv1.OperationRecord
	for _, id := range ids {
		out = append(out, &compactorv1.OperationRecord{Op: compactorv1.Operation_OPERATION_ADD, Id: id, Embedding: []float32{1}})
	}
	return out
}

// fast retries: the waits are not what these tests check.
var fast = client.PushOptions{RetryWait: time.Millisecond, RetryMax: time.Millisecond, RunID: "run"}

func TestPushBatchesWithKeys(t *testing.T) {
	f := &fakeLog{}
	opts := fast
	opts.BatchSize = 2
	res, err := f.serve(t).Push(t.Context(), "c", records("a", "b", "c", "d", "e"), opts)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"run/1", "run/2", "run/3"}; fmt.Sprint(f.calls) != fmt.Sprint(want) {
		t.Errorf("keys %v, want %v", f.calls, want)
	}
	if res.Records != 5 || res.Batches != 3 || res.FirstOffset != 1 || res.LastOffset != 5 || res.Retries != 0 {
		t.Errorf("result %+v", res)
	}
}

func TestPushRetriesBackpressureAndLostAnswersWithTheSameKey(t *testing.T) {
	f := &fakeLog{refuse: 2, lose: map[int]bool{3: true}}
	var retries []string
	var replays []string
	opts := fast
	opts.OnRetry = func(err error, n, max int, _ time.Duration) {
		retries = append(retries, fmt.Sprintf("%d/%d %s", n, max, connect.CodeOf(err)))
	}
	opts.OnReplay = func(key string) { replays = append(replays, key) }
	res, err := f.serve(t).Push(t.Context(), "c", records("a", "b"), opts)
	if err != nil {
		t.Fatal(err)
	}
	// refused, refused, appended with the answer lost, replayed.
	if want := []string{"run/1", "run/1", "run/1", "run/1"}; fmt.Sprint(f.calls) != fmt.Sprint(want) {
		t.Errorf("calls %v, want %v", f.calls, want)
	}
	if fmt.Sprint(f.records) != "[a b]" {
		t.Errorf("appended %v, want each record once", f.records)
	}
	if want := "[1/10 resource_exhausted 2/10 resource_exhausted 3/10 unavailable]"; fmt.Sprint(retries) != want {
		t.Errorf("retries %v, want %s", retries, want)
	}
	if fmt.Sprint(replays) != "[run/1]" || res.ReplayedBatches != 1 || res.Retries != 3 || res.Records != 2 {
		t.Errorf("replays %v, result %+v", replays, res)
	}
}

func TestPushGivesUpAfterRetries(t *testing.T) {
	f := &fakeLog{refuse: 100}
	opts := fast
	opts.Retries = 2
	_, err := f.serve(t).Push(t.Context(), "c", records("a"), opts)
	if connect.CodeOf(err) != connect.CodeResourceExhausted || len(f.calls) != 3 {
		t.Fatalf("err %v after %d calls; want RESOURCE_EXHAUSTED after 1 + 2 retries", err, len(f.calls))
	}
	f = &fakeLog{refuse: 1}
	opts.Retries = -1
	if _, err := f.serve(t).Push(t.Context(), "c", records("a"), opts); err == nil || len(f.calls) != 1 {
		t.Fatalf("Retries -1: err %v after %d calls; want the first refusal", err, len(f.calls))
	}
}

// TestPushStopsAtAnInvalidRecord: the records before it land (under a key
// of their own), none after, and the error says which one.
func TestPushStopsAtAnInvalidRecord(t *testing.T) {
	f := &fakeLog{}
	opts := fast
	opts.BatchSize = 3
	res, err := f.serve(t).Push(t.Context(), "c", records("a", "b", "c", "d", "bad", "e"), opts)
	var bad *client.InvalidRecordError
	if !errors.As(err, &bad) || bad.Index != 4 || bad.Record.GetField() != "embedding" || connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("err %v, want an InvalidRecordError at index 4", err)
	}
	if fmt.Sprint(f.records) != "[a b c d]" || res.Records != 4 {
		t.Errorf("appended %v (result %+v), want every record before the bad one", f.records, res)
	}
	if want := "[run/1 run/2 run/2/first-1]"; fmt.Sprint(f.calls) != want {
		t.Errorf("keys %v, want %s", f.calls, want)
	}
}

func TestPushOptionsAreValidated(t *testing.T) {
	c := (&fakeLog{}).serve(t)
	for _, o := range []client.PushOptions{{BatchSize: client.MaxPushBatch + 1}, {BatchSize: -1}, {RetryWait: time.Second, RetryMax: time.Millisecond}, {CallTimeout: -1}} {
		if _, err := c.NewPusher("c", o); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
}

// TestWatchGivesUpAfterTheReconnectTimeout: a server that never answers
// ends a wait with an UnreachableError once the timeout has passed.
func TestWatchGivesUpAfterTheReconnectTimeout(t *testing.T) {
	var steps []watchStep
	for range 10_000 {
		steps = append(steps, watchStep{err: connect.NewError(connect.CodeUnavailable, errors.New("down"))})
	}
	s := &scriptedWatch{steps: steps}
	var notes int
	_, err := s.serve(t).Wait(t.Context(), client.WaitOptions{Reconnect: client.Reconnect{
		Timeout: 50 * time.Millisecond, MaxDelay: 5 * time.Millisecond,
		Notify: func(error, time.Duration, int) { notes++ },
	}}, "a")
	var ue *client.UnreachableError
	var we *client.WaitError
	if !errors.Is(err, client.ErrUnreachable) || !errors.As(err, &ue) || !errors.As(err, &we) || we.JobIDs[0] != "a" {
		t.Fatalf("err %v, want an UnreachableError inside a WaitError for job a", err)
	}
	if ue.For < 50*time.Millisecond || connect.CodeOf(ue.Last) != connect.CodeUnavailable || notes == 0 {
		t.Fatalf("outage %s, last %v, %d notes", ue.For, ue.Last, notes)
	}
}

// TestWaitReportsUpdates: OnUpdate sees each state of the waited jobs.
func TestWaitReportsUpdates(t *testing.T) {
	s := &scriptedWatch{steps: []watchStep{{send: []*compactorv1.Job{job("a", running), job("z", running), job("a", succeeded)}}}}
	var seen []string
	jobs, err := s.serve(t).Wait(t.Context(), client.WaitOptions{OnUpdate: func(j *compactorv1.Job) {
		seen = append(seen, j.GetId()+" "+j.GetState().String())
	}}, "a")
	if err != nil || jobs[0].GetState() != succeeded {
		t.Fatalf("%v %v", jobs, err)
	}
	if want := "[a JOB_STATE_RUNNING a JOB_STATE_SUCCEEDED]"; fmt.Sprint(seen) != want {
		t.Fatalf("updates %v, want %s", seen, want)
	}
}

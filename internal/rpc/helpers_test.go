package rpc_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/types/known/structpb"

	compactorv1 "github.com/compactorhq/compactor/gen/compactor/v1"
	"github.com/compactorhq/compactor/gen/compactor/v1/compactorv1connect"
	"github.com/compactorhq/compactor/internal/segment"
	"github.com/compactorhq/compactor/internal/server"
	"github.com/compactorhq/compactor/internal/testutil"
)

// protocol is one kind of client the suite runs over.
type protocol struct {
	name string
	opts []connect.ClientOption
	json bool // the wire format is JSON: NaN and Inf cannot be sent in a google.protobuf.Value
}

var protocols = []protocol{
	{name: "connect_json", opts: []connect.ClientOption{connect.WithProtoJSON()}, json: true},
	{name: "connect_proto"},
	{name: "grpc", opts: []connect.ClientOption{connect.WithGRPC()}},
	{name: "grpcweb", opts: []connect.ClientOption{connect.WithGRPCWeb()}},
}

// fixture is a real app (catalog, segments, manager) on temp-dir storage,
// served by httptest over HTTP/2 with TLS.
type fixture struct {
	app  *server.App
	cfg  server.Config
	srv  *httptest.Server
	logs *testutil.SyncBuffer // everything the app and the HTTP server logged
	// faults makes reads of chosen blobs fail (see faultBlobs).
	faults *faultBlobs

	shutdownOnce sync.Once
	shutdown     func()
}

type fixtureOptions struct {
	configure func(*server.Config)
	// idle leaves the manager stopped: Compact queues jobs that stay QUEUED,
	// and Watch fails with UNAVAILABLE.
	idle bool
}

func newFixture(t *testing.T, o fixtureOptions) *fixture {
	t.Helper()
	cfg := server.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Manager.Interval = time.Hour // no scheduled jobs: only what a test asks for
	if o.configure != nil {
		o.configure(&cfg)
	}
	faults := &faultBlobs{}
	cfg.WrapBlobs = func(b segment.Blobs) segment.Blobs { faults.Blobs = b; return faults }
	if err := cfg.Validate(); err != nil {
		t.Fatalf("config: %v", err)
	}
	logs := &testutil.SyncBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))

	ctx, cancel := context.WithCancel(context.Background())
	app, err := server.Open(ctx, cfg, logger)
	if err != nil {
		cancel()
		t.Fatalf("open app: %v", err)
	}
	runDone := make(chan error, 1)
	if o.idle {
		runDone <- nil
	} else {
		go func() { runDone <- app.Manager.Run(ctx) }()
		select {
		case <-app.Manager.Started():
		case err := <-runDone:
			cancel()
			_ = app.Close()
			t.Fatalf("manager stopped before it started: %v", err)
		}
	}
	srv := httptest.NewUnstartedServer(app.Handler())
	srv.EnableHTTP2 = true
	srv.Config.ErrorLog = log.New(logs, "http: ", 0)
	srv.StartTLS()

	f := &fixture{app: app, cfg: cfg, srv: srv, logs: logs, faults: faults}
	f.shutdown = func() {
		f.shutdownOnce.Do(func() {
			// Streams still open end with their connections.
			srv.CloseClientConnections()
			srv.Close()
			cancel()
			if err := <-runDone; err != nil {
				t.Errorf("manager Run: %v", err)
			}
			if err := app.Close(); err != nil {
				t.Errorf("close app: %v", err)
			}
			if strings.Contains(logs.String(), "panic") {
				t.Errorf("the server logged a panic:\n%s", logs.String())
			}
		})
	}
	t.Cleanup(f.shutdown)
	return f
}

// faultBlobs fails the reads of blobs whose key holds the substring set
// with failGets, with an error the blob store gives for no known reason.
type faultBlobs struct {
	segment.Blobs
	failing atomic.Pointer[string]
}

func (b *faultBlobs) failGets(substring string) { b.failing.Store(&substring) }

func (b *faultBlobs) Get(ctx context.Context, key string) ([]byte, error) {
	if s := b.failing.Load(); s != nil && strings.Contains(key, *s) {
		return nil, fmt.Errorf("get %s: read: input/output error", key)
	}
	return b.Blobs.Get(ctx, key)
}

// clients of the three services.
type clients struct {
	jobs  compactorv1connect.CompactionServiceClient
	colls compactorv1connect.CollectionServiceClient
	logs  compactorv1connect.LogServiceClient
	ctl   compactorv1connect.ControlServiceClient
	audit compactorv1connect.AuditServiceClient
}

func (f *fixture) clients(p protocol, extra ...connect.ClientOption) clients {
	opts := append(slices.Clone(p.opts), extra...)
	hc := f.srv.Client()
	return clients{
		jobs:  compactorv1connect.NewCompactionServiceClient(hc, f.srv.URL, opts...),
		colls: compactorv1connect.NewCollectionServiceClient(hc, f.srv.URL, opts...),
		logs:  compactorv1connect.NewLogServiceClient(hc, f.srv.URL, opts...),
		ctl:   compactorv1connect.NewControlServiceClient(hc, f.srv.URL, opts...),
		audit: compactorv1connect.NewAuditServiceClient(hc, f.srv.URL, opts...),
	}
}

// withBearer sends "Authorization: Bearer tok" on every call.
func withBearer(tok string) connect.ClientOption {
	return connect.WithInterceptors(headerInterceptor{key: "Authorization", value: "Bearer " + tok})
}

type headerInterceptor struct{ key, value string }

func (h headerInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		req.Header().Set(h.key, h.value)
		return next(ctx, req)
	}
}

func (h headerInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		conn := next(ctx, spec)
		conn.RequestHeader().Set(h.key, h.value)
		return conn
	}
}

func (h headerInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}

// wantCode fails the test unless err is a Connect error with code want.
func wantCode(t *testing.T, err error, want connect.Code) *connect.Error {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want %v", want)
	}
	if got := connect.CodeOf(err); got != want {
		t.Fatalf("code %v, want %v (error: %v)", got, want, err)
	}
	var ce *connect.Error
	if !errors.As(err, &ce) {
		t.Fatalf("%v is not a *connect.Error", err)
	}
	return ce
}

// violations returns the field violations of err's google.rpc.BadRequest
// details.
func violations(t *testing.T, err error) []*errdetails.BadRequest_FieldViolation {
	t.Helper()
	var ce *connect.Error
	if !errors.As(err, &ce) {
		t.Fatalf("%v is not a *connect.Error", err)
	}
	var out []*errdetails.BadRequest_FieldViolation
	for _, d := range ce.Details() {
		v, derr := d.Value()
		if derr != nil {
			t.Fatalf("decode error detail %s: %v", d.Type(), derr)
		}
		if br, ok := v.(*errdetails.BadRequest); ok {
			out = append(out, br.GetFieldViolations()...)
		}
	}
	return out
}

// wantViolation fails unless err carries a BadRequest violation of field
// whose description contains each of contains.
func wantViolation(t *testing.T, err error, field string, contains ...string) {
	t.Helper()
	vs := violations(t, err)
	for _, v := range vs {
		if v.GetField() != field {
			continue
		}
		for _, s := range contains {
			if !strings.Contains(v.GetDescription(), s) {
				t.Fatalf("violation of %s: description %q does not contain %q", field, v.GetDescription(), s)
			}
		}
		return
	}
	t.Fatalf("no BadRequest violation of field %q in %v (error: %v)", field, vs, err)
}

func createCollection(t *testing.T, c clients, name string, dim int32) *compactorv1.Collection {
	t.Helper()
	res, err := c.colls.CreateCollection(t.Context(), connect.NewRequest(&compactorv1.CreateCollectionRequest{Name: name, Dimension: dim}))
	if err != nil {
		t.Fatalf("create collection %q: %v", name, err)
	}
	return res.Msg.GetCollection()
}

func getCollection(t *testing.T, c clients, id string) *compactorv1.Collection {
	t.Helper()
	res, err := c.colls.GetCollection(t.Context(), connect.NewRequest(&compactorv1.GetCollectionRequest{Id: id}))
	if err != nil {
		t.Fatalf("get collection %s: %v", id, err)
	}
	return res.Msg.GetCollection()
}

func push(t *testing.T, c clients, collID string, recs []*compactorv1.OperationRecord) *compactorv1.PushLogsResponse {
	t.Helper()
	res, err := c.logs.PushLogs(t.Context(), connect.NewRequest(&compactorv1.PushLogsRequest{CollectionId: collID, Records: recs}))
	if err != nil {
		t.Fatalf("push %d records: %v", len(recs), err)
	}
	return res.Msg
}

// smallRecords returns n ADD records r00000.. of dimension dim with a
// document and scalar metadata.
func smallRecords(from, n int, dim int) []*compactorv1.OperationRecord {
	out := make([]*compactorv1.OperationRecord, n)
	for i := range n {
		k := from + i
		emb := make([]float32, dim)
		for j := range emb {
			emb[j] = float32(k) + float32(j)/10
		}
		doc := fmt.Sprintf("document %d", k)
		md, err := structpb.NewStruct(map[string]any{"n": float64(k), "even": k%2 == 0, "tag": "t" + fmt.Sprint(k%3)})
		if err != nil {
			panic(err)
		}
		out[i] = &compactorv1.OperationRecord{Op: compactorv1.Operation_OPERATION_ADD, Id: fmt.Sprintf("r%05d", k), Embedding: emb, Document: &doc, Metadata: md}
	}
	return out
}

// deletes returns n DELETE records, the cheapest to send.
func deletes(n int) []*compactorv1.OperationRecord {
	out := make([]*compactorv1.OperationRecord, n)
	for i := range out {
		out[i] = &compactorv1.OperationRecord{Op: compactorv1.Operation_OPERATION_DELETE, Id: fmt.Sprint(i)}
	}
	return out
}

func compactOne(t *testing.T, c clients, collID string) *compactorv1.CompactResult {
	t.Helper()
	res, err := c.jobs.Compact(t.Context(), connect.NewRequest(&compactorv1.CompactRequest{CollectionIds: []string{collID}, Reason: "test"}))
	if err != nil {
		t.Fatalf("compact %s: %v", collID, err)
	}
	if n := len(res.Msg.GetJobs()); n != 1 {
		t.Fatalf("compact %s: %d jobs, want 1", collID, n)
	}
	return res.Msg.GetJobs()[0]
}

func finished(s compactorv1.JobState) bool {
	switch s {
	case compactorv1.JobState_JOB_STATE_SUCCEEDED, compactorv1.JobState_JOB_STATE_FAILED, compactorv1.JobState_JOB_STATE_CANCELLED:
		return true
	}
	return false
}

// waitJob polls GetCompaction until the job has finished (at most 60 s).
func waitJob(t *testing.T, c clients, jobID string) *compactorv1.Job {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		res, err := c.jobs.GetCompaction(t.Context(), connect.NewRequest(&compactorv1.GetCompactionRequest{JobId: jobID}))
		if err != nil {
			t.Fatalf("get compaction %s: %v", jobID, err)
		}
		if j := res.Msg.GetJob(); finished(j.GetState()) {
			return j
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s still %v after 60 s", jobID, res.Msg.GetJob().GetState())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func wantSucceeded(t *testing.T, j *compactorv1.Job) {
	t.Helper()
	if j.GetState() != compactorv1.JobState_JOB_STATE_SUCCEEDED {
		t.Fatalf("job %s ended %v, want SUCCEEDED (error %q, note %q)", j.GetId(), j.GetState(), j.GetError(), j.GetNote())
	}
}

// allRecords pages through GetRecords with pageSize.
func allRecords(t *testing.T, c clients, collID string, pageSize int32) []*compactorv1.Record {
	t.Helper()
	var out []*compactorv1.Record
	token := ""
	for page := 0; ; page++ {
		if page > 100_000 {
			t.Fatal("GetRecords paging does not end")
		}
		res, err := c.colls.GetRecords(t.Context(), connect.NewRequest(&compactorv1.GetRecordsRequest{CollectionId: collID, PageSize: pageSize, PageToken: token}))
		if err != nil {
			t.Fatalf("get records page %d: %v", page, err)
		}
		if n := len(res.Msg.GetRecords()); n > int(pageSize) {
			t.Fatalf("page %d has %d records, more than the page size %d", page, n, pageSize)
		}
		out = append(out, res.Msg.GetRecords()...)
		token = res.Msg.GetNextPageToken()
		if token == "" {
			return out
		}
	}
}

// unknownID returns a well-formed id that names nothing.
func unknownID(i int) string { return fmt.Sprintf("00000000-0000-4000-8000-%012d", i) }

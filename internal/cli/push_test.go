package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"

	compactorv1 "github.com/compactorhq/compactor/gen/compactor/v1"
	"github.com/compactorhq/compactor/gen/compactor/v1/compactorv1connect"
)

// TestPushResumesFromTheBadLine: a push that stops at a bad line has
// pushed every line before it and none after, as its error says; pushing
// the rest of the file from that line (fixed) lands every record once.
func TestPushResumesFromTheBadLine(t *testing.T) {
	t.Parallel()
	addr := startServer(t, nil)
	id := createCollection(t, addr, "resume", "--dimension", "2")
	var lines []string
	for i := 1; i <= 9; i++ {
		lines = append(lines, fmt.Sprintf(`{"id":"r%d","embedding":[%d,1]}`, i, i))
	}
	bad := append([]string(nil), lines...)
	bad[5] = `{"id":"r6","embedding":[6,1,1]}` // line 6: the wrong dimension, found by the server
	r := fails(t, addr, nil, 1, ":6: invalid_argument: embedding:", "push", "--collection", "resume", "--batch", "4", jsonl(t, bad...))
	if !strings.Contains(r.stderr, "lines 1..5 were pushed (log offsets 1..5)") {
		t.Fatalf("the error does not give the resume point:\n%s", r.stderr)
	}
	// As 'tail -n +6' of the fixed file would.
	p := decode[pushJSON](t, ok(t, addr, "-o", "json", "push", "--collection", "resume", "--batch", "4", jsonl(t, lines[5:]...)).stdout)
	if p.Records != 4 || p.FirstOffset != 6 || p.LastOffset != 9 {
		t.Fatalf("the resumed push: %+v, want offsets 6..9", p)
	}
	recs := decode[[]struct {
		ID string `json:"id"`
	}](t, ok(t, addr, "-o", "json", "get", "--collection", id, "--limit", "0").stdout)
	if len(recs) != 9 {
		t.Fatalf("%d records after the resume, want each of the 9 once: %+v", len(recs), recs)
	}
}

// typedRejection answers a PushLogs of several records with INVALID_ARGUMENT
// whose message is prose no program should read and whose BadRequest names
// another record: the CLI must go by the ErrorDetail alone.
type typedRejection struct {
	compactorv1connect.UnimplementedLogServiceHandler
	compactorv1connect.UnimplementedCollectionServiceHandler
	mu   sync.Mutex
	keys []string // idempotency key and size of each push
}

func (f *typedRejection) GetCollection(_ context.Context, req *connect.Request[compactorv1.GetCollectionRequest]) (*connect.Response[compactorv1.GetCollectionResponse], error) {
	return connect.NewResponse(&compactorv1.GetCollectionResponse{Collection: &compactorv1.Collection{Id: req.Msg.GetId(), Name: "fake"}}), nil
}

func (f *typedRejection) PushLogs(_ context.Context, req *connect.Request[compactorv1.PushLogsRequest]) (*connect.Response[compactorv1.PushLogsResponse], error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := len(req.Msg.GetRecords())
	f.keys = append(f.keys, fmt.Sprintf("%s:%d", req.Msg.GetIdempotencyKey(), n))
	if n == 1 {
		return connect.NewResponse(&compactorv1.PushLogsResponse{FirstOffset: 1, LastOffset: 1, Count: 1}), nil
	}
	ce := connect.NewError(connect.CodeInvalidArgument, errors.New("record 0 (id \"zzz\"): id: wording that may change"))
	if d, err := connect.NewErrorDetail(&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: "records[0].id", Description: "prose"}}}); err == nil {
		ce.AddDetail(d)
	}
	if d, err := connect.NewErrorDetail(&compactorv1.ErrorDetail{Reason: compactorv1.ErrorReason_ERROR_REASON_INVALID_RECORD,
		Data: &compactorv1.ErrorDetail_InvalidRecord{InvalidRecord: &compactorv1.InvalidRecord{Index: 1, Id: "b", Field: "embedding", Problem: "has dimension 3, the collection's is 2"}}}); err == nil {
		ce.AddDetail(d)
	}
	return nil, ce
}

func TestPushReadsTheTypedDetailNotTheMessage(t *testing.T) {
	t.Parallel()
	fake := &typedRejection{}
	addr := serveFake(t, func(mux *http.ServeMux) {
		mux.Handle(compactorv1connect.NewLogServiceHandler(fake))
		mux.Handle(compactorv1connect.NewCollectionServiceHandler(fake))
	})
	file := jsonl(t, `{"id":"a","embedding":[1,2]}`, `{"id":"b","embedding":[1,2,3]}`, `{"id":"c","embedding":[1,2]}`)
	r := fails(t, addr, nil, 1, file+`:2: invalid_argument: embedding: has dimension 3, the collection's is 2 (id "b"); line 1 was pushed`,
		"push", "--collection", "6a1b3c0e-8f1e-4a55-9f0e-5c1d2f3a4b5c", file)
	if strings.Contains(r.stderr, "wording") {
		t.Errorf("the server's prose reached the line error:\n%s", r.stderr)
	}
	fake.mu.Lock()
	defer fake.mu.Unlock()
	// The batch of 3, refused; then the record before the bad one, under a
	// key of its own (the refused batch wrote nothing).
	if len(fake.keys) != 2 || !strings.HasSuffix(fake.keys[0], "/1:3") || !strings.HasSuffix(fake.keys[1], "/1/first-1:1") {
		t.Fatalf("pushes %v, want the batch of 3 then its first record alone", fake.keys)
	}
}

// blockingLog holds every PushLogs until the client goes away.
type blockingLog struct {
	compactorv1connect.UnimplementedLogServiceHandler
	compactorv1connect.UnimplementedCollectionServiceHandler
	entered chan struct{}
}

func (f *blockingLog) GetCollection(_ context.Context, req *connect.Request[compactorv1.GetCollectionRequest]) (*connect.Response[compactorv1.GetCollectionResponse], error) {
	return connect.NewResponse(&compactorv1.GetCollectionResponse{Collection: &compactorv1.Collection{Id: req.Msg.GetId(), Name: "fake"}}), nil
}

func (f *blockingLog) PushLogs(ctx context.Context, _ *connect.Request[compactorv1.PushLogsRequest]) (*connect.Response[compactorv1.PushLogsResponse], error) {
	f.entered <- struct{}{}
	<-ctx.Done()
	return nil, connect.NewError(connect.CodeCanceled, ctx.Err())
}

// TestPushInterruptedExits130: Ctrl-C during a push is exit status 130 and
// says what was pushed.
func TestPushInterruptedExits130(t *testing.T) {
	t.Parallel()
	fake := &blockingLog{entered: make(chan struct{}, 1)}
	addr := serveFake(t, func(mux *http.ServeMux) {
		mux.Handle(compactorv1connect.NewLogServiceHandler(fake))
		mux.Handle(compactorv1connect.NewCollectionServiceHandler(fake))
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-fake.entered
		cancel()
	}()
	file := jsonl(t, `{"id":"a","embedding":[1,2]}`)
	var stderr bytes.Buffer
	err := run(ctx, []string{"--addr", addr, "push", "--collection", "6a1b3c0e-8f1e-4a55-9f0e-5c1d2f3a4b5c", file}, nil, &bytes.Buffer{}, &stderr)
	if ExitCode(err) != 130 || !strings.Contains(stderr.String(), "interrupted; nothing was pushed") {
		t.Fatalf("exit %d (%v), stderr %q; want 130 saying nothing was pushed", ExitCode(err), err, stderr.String())
	}
}

// TestExitStatuses: 2 for every usage error, found before any call (the
// address is unreachable), 1 for a failed call.
func TestExitStatuses(t *testing.T) {
	t.Parallel()
	unreachable := "http://127.0.0.1:1"
	file := jsonl(t, `{"id":"a"}`)
	for _, tt := range []struct {
		code int
		want string
		args []string
	}{
		{2, `--output "yaml"`, []string{"-o", "yaml", "jobs"}},
		{2, `--protocol "pigeon"`, []string{"--protocol", "pigeon", "nodes"}},
		{2, "--batch must be in 1..10000", []string{"push", "--collection", "c", "--batch", "0", file}},
		{2, "--retries must not be negative", []string{"push", "--collection", "c", "--retries", "-1", file}},
		{2, "--retry-wait must be positive", []string{"push", "--collection", "c", "--retry-wait", "0s", file}},
		{2, `--op "merge"`, []string{"push", "--collection", "c", "--op", "merge", file}},
		{2, "--collection is required", []string{"push", file}},
		{2, "--collection is required", []string{"get", "a"}},
		{2, "--limit must not be negative", []string{"get", "--collection", "c", "--limit", "-1"}},
		{2, "--limit must not be negative", []string{"jobs", "--limit", "-1"}},
		{2, `--trigger "manual"`, []string{"jobs", "--trigger", "manual"}},
		{2, "--reconnect-timeout must not be negative", []string{"watch", "--reconnect-timeout", "-1s"}},
		{2, "--reconnect-timeout must not be negative", []string{"compact", "--all", "--wait", "--reconnect-timeout", "-1s"}},
		{2, "--min-compaction-size must not be negative", []string{"collections", "set", "c", "--min-compaction-size", "-1"}},
		{2, "accepts 1 arg", []string{"cancel"}},
		{2, "accepts at most 1 arg", []string{"pause", "a", "b"}},
		{2, "unknown flag: --bogus", []string{"compact", "--bogus"}},
		{2, "invalid argument", []string{"jobs", "--timeout", "soon"}},
		{1, "unavailable", []string{"jobs"}},
		{1, "unavailable", []string{"compact", "some-name"}},
	} {
		r := fails(t, unreachable, nil, tt.code, tt.want, tt.args...)
		if tt.code == 2 && !strings.Contains(r.stderr, "usage: compactor ") {
			t.Errorf("%v: a usage error without the usage line:\n%s", tt.args, r.stderr)
		}
	}
}

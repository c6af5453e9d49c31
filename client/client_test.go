package client_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/proto"

	"github.com/compactorhq/compactor/client"
	compactorv1 "github.com/compactorhq/compactor/gen/compactor/v1"
	"github.com/compactorhq/compactor/gen/compactor/v1/compactorv1connect"
	"github.com/compactorhq/compactor/internal/rpc"
)

// scriptedWatch is a CompactionService whose WatchCompactions plays one
// scripted step per call, and records what each call received.
type scriptedWatch struct {
	compactorv1connect.UnimplementedCompactionServiceHandler
	steps []watchStep

	mu    sync.Mutex
	calls []watchCall
}

// watchStep is one WatchCompactions call: the jobs to send, then the error
// to end with.
type watchStep struct {
	send []*compactorv1.Job
	err  error
}

type watchCall struct {
	jobIDs        []string
	authorization string
}

func (s *scriptedWatch) WatchCompactions(ctx context.Context, req *connect.Request[compactorv1.WatchCompactionsRequest], stream *connect.ServerStream[compactorv1.WatchCompactionsResponse]) error {
	s.mu.Lock()
	n := len(s.calls)
	s.calls = append(s.calls, watchCall{jobIDs: req.Msg.GetJobIds(), authorization: req.Header().Get("Authorization")})
	s.mu.Unlock()
	if n >= len(s.steps) {
		return connect.NewError(connect.CodeInternal, errors.New("unexpected watch"))
	}
	for _, j := range s.steps[n].send {
		if err := stream.Send(&compactorv1.WatchCompactionsResponse{Type: compactorv1.WatchEventType_WATCH_EVENT_TYPE_CHANGED, Job: j}); err != nil {
			return err
		}
	}
	if s.steps[n].err != nil {
		return s.steps[n].err
	}
	<-ctx.Done() // a watch runs until the client cancels it
	return nil
}

// watches returns the calls received so far.
func (s *scriptedWatch) watches() []watchCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]watchCall(nil), s.calls...)
}

func (s *scriptedWatch) serve(t *testing.T) *client.Client {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle(compactorv1connect.NewCompactionServiceHandler(s))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return client.New(srv.Client(), srv.URL, client.WithBearerToken("tok"))
}

func job(id string, state compactorv1.JobState) *compactorv1.Job {
	return &compactorv1.Job{Id: id, State: state}
}

const (
	running   = compactorv1.JobState_JOB_STATE_RUNNING
	succeeded = compactorv1.JobState_JOB_STATE_SUCCEEDED
	failed    = compactorv1.JobState_JOB_STATE_FAILED
)

func TestWaitJobs(t *testing.T) {
	t.Run("watches again after UNAVAILABLE, for the jobs not yet finished, and returns them in the order asked", func(t *testing.T) {
		s := &scriptedWatch{steps: []watchStep{
			{send: []*compactorv1.Job{job("a", running), job("b", succeeded), job("x", succeeded)},
				err: connect.NewError(connect.CodeUnavailable, errors.New("server shutting down; watch again"))},
			{send: []*compactorv1.Job{job("a", failed)}},
		}}
		jobs, err := s.serve(t).WaitJobs(t.Context(), "a", "b", "a")
		if err != nil {
			t.Fatal(err)
		}
		if len(jobs) != 2 || jobs[0].GetId() != "a" || jobs[0].GetState() != failed || jobs[1].GetId() != "b" || jobs[1].GetState() != succeeded {
			t.Fatalf("got %v, want a FAILED then b SUCCEEDED", jobs)
		}
		calls := s.watches()
		if len(calls) != 2 {
			t.Fatalf("%d watches, want 2", len(calls))
		}
		for i, want := range [][]string{{"a", "b"}, {"a"}} {
			if got := calls[i].jobIDs; len(got) != len(want) || got[0] != want[0] || got[len(got)-1] != want[len(want)-1] {
				t.Errorf("watch %d asked for %v, want %v", i, got, want)
			}
			if got := calls[i].authorization; got != "Bearer tok" {
				t.Errorf("watch %d sent Authorization %q, want %q", i, got, "Bearer tok")
			}
		}
	})
	t.Run("returns other errors at once, with their code", func(t *testing.T) {
		s := &scriptedWatch{steps: []watchStep{{err: connect.NewError(connect.CodeNotFound, errors.New("job a not found"))}}}
		_, err := s.serve(t).WaitJob(t.Context(), "a")
		if connect.CodeOf(err) != connect.CodeNotFound {
			t.Fatalf("got %v, want NOT_FOUND", err)
		}
		if n := len(s.watches()); n != 1 {
			t.Fatalf("%d watches, want 1", n)
		}
	})
	t.Run("stops when the context ends", func(t *testing.T) {
		s := &scriptedWatch{steps: []watchStep{{send: []*compactorv1.Job{job("a", running)}}}}
		c := s.serve(t)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { _, err := c.WaitJob(ctx, "a"); done <- err }()
		cancel()
		if err := <-done; connect.CodeOf(err) != connect.CodeCanceled {
			t.Fatalf("got %v, want CANCELED", err)
		}
	})
	t.Run("needs at least one id", func(t *testing.T) {
		if _, err := (&scriptedWatch{}).serve(t).WaitJobs(t.Context()); err == nil {
			t.Fatal("got no error")
		}
	})
}

func TestErrorDetails(t *testing.T) {
	ce := connect.NewError(connect.CodeInvalidArgument, errors.New("bad"))
	add := func(m proto.Message) {
		d, err := connect.NewErrorDetail(m)
		if err != nil {
			t.Fatal(err)
		}
		ce.AddDetail(d)
	}
	add(&errdetails.ErrorInfo{Domain: "elsewhere", Reason: "OTHER"})
	add(&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: "records[3].embedding", Description: "wrong dimension"}}})
	add(&errdetails.ErrorInfo{Domain: client.ErrorDomain, Reason: client.ReasonBacklogLimit})
	add(&compactorv1.ErrorDetail{Reason: compactorv1.ErrorReason_ERROR_REASON_BACKLOG_LIMIT,
		Data: &compactorv1.ErrorDetail_BacklogLimit{BacklogLimit: &compactorv1.BacklogLimit{Backlog: 9, Incoming: 2, Limit: 10}}})
	wrapped := errors.Join(errors.New("push"), ce)
	if d := client.ErrorDetail(wrapped); d.GetReason() != compactorv1.ErrorReason_ERROR_REASON_BACKLOG_LIMIT || d.GetBacklogLimit().GetLimit() != 10 {
		t.Errorf("ErrorDetail = %v, want the backlog limit with its figures", d)
	}

	if vs := client.FieldViolations(wrapped); len(vs) != 1 || vs[0].GetField() != "records[3].embedding" {
		t.Errorf("FieldViolations = %v, want records[3].embedding", vs)
	}
	if info := client.ErrorInfo(wrapped); info.GetReason() != client.ReasonBacklogLimit {
		t.Errorf("ErrorInfo = %v, want the %s one of domain %s", info, client.ReasonBacklogLimit, client.ErrorDomain)
	}
	// The client's constants are the server's: a test of this module can
	// compare them, a program using the client cannot.
	if client.ErrorDomain != rpc.ErrorDomain || client.ReasonBacklogLimit != rpc.ReasonBacklogLimit || client.ReasonBatchOverBacklogLimit != rpc.ReasonBatchOverBacklogLimit {
		t.Errorf("client constants %q %q %q differ from the server's %q %q %q",
			client.ErrorDomain, client.ReasonBacklogLimit, client.ReasonBatchOverBacklogLimit,
			rpc.ErrorDomain, rpc.ReasonBacklogLimit, rpc.ReasonBatchOverBacklogLimit)
	}
	if client.FieldViolations(errors.New("plain")) != nil || client.ErrorInfo(nil) != nil || client.ErrorDetail(nil) != nil {
		t.Error("details of an error that carries none are not nil")
	}
}

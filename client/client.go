package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"

	compactorv1 "github.com/compactorhq/compactor/gen/compactor/v1"
	"github.com/compactorhq/compactor/gen/compactor/v1/compactorv1connect"
)

// The google.rpc.ErrorInfo of a RESOURCE_EXHAUSTED error of PushLogs: Domain
// is ErrorDomain, Reason one of the reasons below, and Metadata holds
// "backlog" (uncompacted records of the collection), "incoming" (records in
// the refused batch) and "limit" (the server's --max-backlog), all in records
// as decimal strings.
const (
	// ErrorDomain is the Domain of the server's ErrorInfo details.
	ErrorDomain = "compactor"
	// ReasonBacklogLimit: the collection's backlog would pass its limit;
	// retry the same batch after a compaction (see Client.WaitJobs).
	ReasonBacklogLimit = "BACKLOG_LIMIT"
	// ReasonBatchOverBacklogLimit: the batch alone is larger than the
	// backlog limit, so it can never be accepted; send smaller batches.
	ReasonBatchOverBacklogLimit = "BATCH_OVER_BACKLOG_LIMIT"
)

// Client holds a client of each of the API's services, all for the same
// server and with the same options. Its fields are safe for concurrent use.
type Client struct {
	// Compactions triggers, lists, watches and cancels compaction jobs.
	Compactions compactorv1connect.CompactionServiceClient
	// Collections creates, lists, reads and deletes collections.
	Collections compactorv1connect.CollectionServiceClient
	// Logs appends operation records to a collection's write-ahead log.
	Logs compactorv1connect.LogServiceClient
	// Controls pauses and resumes automatic compaction, caps its
	// throughput, tunes per-collection thresholds and previews the plan.
	Controls compactorv1connect.ControlServiceClient
}

// New returns clients of the four services at baseURL, the server's root
// URL such as "http://127.0.0.1:7070" (the API shares its port with the
// status page and the metrics). opts apply to every call: for example
// WithBearerToken, connect.WithGRPC(), connect.WithSendGzip().
func New(httpClient connect.HTTPClient, baseURL string, opts ...connect.ClientOption) *Client {
	return &Client{
		Compactions: compactorv1connect.NewCompactionServiceClient(httpClient, baseURL, opts...),
		Collections: compactorv1connect.NewCollectionServiceClient(httpClient, baseURL, opts...),
		Logs:        compactorv1connect.NewLogServiceClient(httpClient, baseURL, opts...),
		Controls:    compactorv1connect.NewControlServiceClient(httpClient, baseURL, opts...),
	}
}

// WithBearerToken sends "Authorization: Bearer <token>" on every call,
// unary and streaming: the token a server started with --token (or
// --token-file) requires. The token is sent as given, so keep it out of
// logs on the caller's side too.
func WithBearerToken(token string) connect.ClientOption {
	return connect.WithInterceptors(bearer("Bearer " + token))
}

// bearer is the interceptor of WithBearerToken: the header value to send.
type bearer string

func (b bearer) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		req.Header().Set("Authorization", string(b))
		return next(ctx, req)
	}
}

func (b bearer) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		conn := next(ctx, spec)
		conn.RequestHeader().Set("Authorization", string(b))
		return conn
	}
}

func (b bearer) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}

// Finished reports whether state is terminal: SUCCEEDED, FAILED or
// CANCELLED. A finished job never changes again.
func Finished(state compactorv1.JobState) bool {
	switch state {
	case compactorv1.JobState_JOB_STATE_SUCCEEDED, compactorv1.JobState_JOB_STATE_FAILED, compactorv1.JobState_JOB_STATE_CANCELLED:
		return true
	}
	return false
}

// Backoff between two watches of WaitJobs after the stream broke: the first
// wait, doubled after each further break, capped.
const (
	rewatchFirst = 100 * time.Millisecond
	rewatchMax   = 5 * time.Second
)

// WaitJob waits until the job with id jobID finishes and returns it in its
// final state (see WaitJobs). A FAILED or CANCELLED job is returned with a
// nil error: the job's State and Error say how it ended.
func (c *Client) WaitJob(ctx context.Context, jobID string) (*compactorv1.Job, error) {
	jobs, err := c.WaitJobs(ctx, jobID)
	if err != nil {
		return nil, err
	}
	return jobs[0], nil
}

// WaitJobs waits until every job of jobIDs (the Job.Id values that Compact
// returned; duplicates collapse) has finished, and returns the jobs in
// their final states, in the order of jobIDs (one entry per distinct id).
//
// It watches them with one WatchCompactions stream filtered on jobIDs,
// whose snapshot holds each job in whatever state it is, so a job that
// finished before the call is returned at once. When the stream breaks
// (UNAVAILABLE: the server is restarting or draining; or a stream that ends
// early), WaitJobs watches again after a backoff of 100 ms doubling to 5 s,
// until ctx ends. Other errors are returned as they are: NOT_FOUND for an
// unknown job id, UNAUTHENTICATED without the token a --protect-reads
// server wants, ctx's error (as a *connect.Error with code
// CodeCanceled or CodeDeadlineExceeded) when ctx ends first.
func (c *Client) WaitJobs(ctx context.Context, jobIDs ...string) ([]*compactorv1.Job, error) {
	if len(jobIDs) == 0 {
		return nil, errors.New("wait for jobs: no job id given")
	}
	var ids []string
	seen := make(map[string]bool, len(jobIDs))
	for _, id := range jobIDs {
		if !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	final := make(map[string]*compactorv1.Job, len(ids))
	delay := rewatchFirst
	for {
		err := c.watchUntilFinished(ctx, ids, final)
		if err == nil {
			jobs := make([]*compactorv1.Job, len(ids))
			for i, id := range ids {
				jobs[i] = final[id]
			}
			return jobs, nil
		}
		if ctx.Err() != nil || connect.CodeOf(err) != connect.CodeUnavailable {
			return nil, fmt.Errorf("wait for %s: %w", jobsLabel(ids), err)
		}
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			code := connect.CodeCanceled
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				code = connect.CodeDeadlineExceeded
			}
			return nil, fmt.Errorf("wait for %s: %w (last watch error: %v)", jobsLabel(ids), connect.NewError(code, ctx.Err()), err)
		}
		delay = min(2*delay, rewatchMax)
	}
}

// jobsLabel names ids in an error message: all of them when few, else the
// count and the first one.
func jobsLabel(ids []string) string {
	if len(ids) <= 3 {
		return fmt.Sprintf("jobs %v", ids)
	}
	return fmt.Sprintf("%d jobs (%s, ...)", len(ids), ids[0])
}

// watchUntilFinished runs one watch of ids and records each job that
// finishes in final. It returns nil once every id is in final; a stream
// that ends before that is an UNAVAILABLE error.
func (c *Client) watchUntilFinished(ctx context.Context, ids []string, final map[string]*compactorv1.Job) error {
	var pending []string
	wanted := make(map[string]bool)
	for _, id := range ids {
		if final[id] == nil {
			pending = append(pending, id)
			wanted[id] = true
		}
	}
	if len(pending) == 0 {
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends the stream when we return early
	stream, err := c.Compactions.WatchCompactions(ctx, connect.NewRequest(&compactorv1.WatchCompactionsRequest{JobIds: pending}))
	if err != nil {
		return err
	}
	defer stream.Close()
	for stream.Receive() {
		job := stream.Msg().GetJob()
		if job == nil || !wanted[job.GetId()] || !Finished(job.GetState()) {
			continue
		}
		final[job.GetId()] = job
		delete(wanted, job.GetId())
		if len(wanted) == 0 {
			return nil
		}
	}
	if err := stream.Err(); err != nil {
		return err
	}
	return connect.NewError(connect.CodeUnavailable, errors.New("watch stream ended before the jobs finished"))
}

// FieldViolations returns the field violations of the google.rpc.BadRequest
// details of err, in the server's order, or nil when err carries none. Each
// names a request field by its path, for example "records[3].embedding" or
// "collection_ids[0]", and says what is wrong with it.
func FieldViolations(err error) []*errdetails.BadRequest_FieldViolation {
	var out []*errdetails.BadRequest_FieldViolation
	for _, v := range detailValues(err) {
		if br, ok := v.(*errdetails.BadRequest); ok {
			out = append(out, br.GetFieldViolations()...)
		}
	}
	return out
}

// ErrorInfo returns the first google.rpc.ErrorInfo detail of err whose Domain
// is ErrorDomain, or nil when err carries none. Its Reason is one of the
// Reason constants.
func ErrorInfo(err error) *errdetails.ErrorInfo {
	for _, v := range detailValues(err) {
		if info, ok := v.(*errdetails.ErrorInfo); ok && info.GetDomain() == ErrorDomain {
			return info
		}
	}
	return nil
}

// ErrorDetail returns the typed compactorv1.ErrorDetail of err (its
// ErrorReason and, for some reasons, data such as the index and field of an
// invalid record), or nil when err carries none. Prefer it to ErrorInfo and
// to the message: it is what the CLI reads.
func ErrorDetail(err error) *compactorv1.ErrorDetail {
	for _, v := range detailValues(err) {
		if d, ok := v.(*compactorv1.ErrorDetail); ok {
			return d
		}
	}
	return nil
}

// detailValues decodes the details of err's *connect.Error, skipping those
// whose type is not linked into the program.
func detailValues(err error) []any {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return nil
	}
	var out []any
	for _, d := range ce.Details() {
		if v, verr := d.Value(); verr == nil {
			out = append(out, v)
		}
	}
	return out
}

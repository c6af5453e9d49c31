package client

import (
	"context"
	"errors"

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
	// Audit lists the audit log of operator actions and verifies its hash
	// chain.
	Audit compactorv1connect.AuditServiceClient
}

// New returns clients of the five services at baseURL, the server's root
// URL such as "http://127.0.0.1:7070" (the API shares its port with the
// status page and the metrics). opts apply to every call: for example
// WithBearerToken, connect.WithGRPC(), connect.WithSendGzip().
func New(httpClient connect.HTTPClient, baseURL string, opts ...connect.ClientOption) *Client {
	return &Client{
		Compactions: compactorv1connect.NewCompactionServiceClient(httpClient, baseURL, opts...),
		Collections: compactorv1connect.NewCollectionServiceClient(httpClient, baseURL, opts...),
		Logs:        compactorv1connect.NewLogServiceClient(httpClient, baseURL, opts...),
		Controls:    compactorv1connect.NewControlServiceClient(httpClient, baseURL, opts...),
		Audit:       compactorv1connect.NewAuditServiceClient(httpClient, baseURL, opts...),
	}
}

// WithBearerToken sends "Authorization: Bearer <token>" on every call,
// unary and streaming: a token of the server's --tokens-file, or its
// --token (or --token-file). The server answers a call above the token's
// role with PERMISSION_DENIED. The token is sent as given, so keep it out of
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

// Reason is the typed reason of err's ErrorDetail, or
// ERROR_REASON_UNSPECIFIED when err carries none (an error that is not the
// server's, or an older server's).
func Reason(err error) compactorv1.ErrorReason {
	return ErrorDetail(err).GetReason()
}

// InvalidRecord returns the record that err, the INVALID_ARGUMENT error of a
// PushLogs call with n records, names as invalid (its index in the call's
// records, id, field and problem), or nil when it names none within the n.
func InvalidRecord(err error, n int) *compactorv1.InvalidRecord {
	d := ErrorDetail(err)
	if d.GetReason() != compactorv1.ErrorReason_ERROR_REASON_INVALID_RECORD {
		return nil
	}
	rec := d.GetInvalidRecord()
	if rec == nil || rec.GetIndex() < 0 || int(rec.GetIndex()) >= n {
		return nil
	}
	return rec
}

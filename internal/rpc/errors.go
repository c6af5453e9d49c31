package rpc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/proto"

	compactorv1 "github.com/compactorhq/compactor/gen/compactor/v1"

	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/compaction"
	"github.com/compactorhq/compactor/internal/manager"
	"github.com/compactorhq/compactor/internal/materialize"
	"github.com/compactorhq/compactor/internal/where"
)

// ErrorInfo reasons (google.rpc.ErrorInfo, domain ErrorDomain) of
// RESOURCE_EXHAUSTED errors of PushLogs, kept for clients that read them;
// the same errors also carry a compactorv1.ErrorDetail with the typed
// reason (compactorv1.ErrorReason) and its data.
const (
	ErrorDomain = "compactor"
	// ReasonBacklogLimit: the collection's backlog is at its limit; retry
	// after a compaction.
	ReasonBacklogLimit = "BACKLOG_LIMIT"
	// ReasonBatchOverBacklogLimit: the batch alone is larger than the
	// backlog limit; it can never be accepted, send smaller batches.
	ReasonBatchOverBacklogLimit = "BATCH_OVER_BACKLOG_LIMIT"
	// ReasonStorageFull: a store is out of space (metadata "store": "catalog
	// database" or "blob store"); retrying helps only once an operator has
	// freed space (docs/storage.md "Disk full").
	ReasonStorageFull = "STORAGE_FULL"
)

// toConnect maps a domain error to a Connect error: the one place where the
// codes are decided (CONVENTIONS.md "Errors"). Expected errors keep their
// message, which names what was wrong; anything else reaches the client as
// INTERNAL with a generic message, and its detail goes to the log: handed to
// the observer interceptor, which logs each failed call once (see
// noteCause).
func toConnect(ctx context.Context, log *slog.Logger, procedure string, err error) error {
	if err == nil {
		return nil
	}
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce
	}
	var invalid *materialize.InvalidRecordError
	var unknown *manager.NotFoundError
	var backlog *catalog.BackpressureError
	var full *catalog.StorageFullError
	var reused *catalog.KeyReuseError
	var badWhere *where.Error
	var badQuery *compaction.QueryError
	var badIndex *catalog.IndexSettingsError
	switch {
	case errors.As(err, &badWhere):
		return invalidArgument(badWhere.Path, "%s", badWhere.Problem)
	case errors.As(err, &badQuery):
		return invalidArgument(badQuery.Field, "%s", badQuery.Problem)
	case errors.As(err, &badIndex):
		field := "index." + badIndex.Field
		if badIndex.Field == "distance" {
			field = "distance"
		}
		return invalidArgument(field, "%s", badIndex.Problem)
	case errors.As(err, &full):
		// The message names the store and what to do; the driver's or file
		// system's detail (with server paths) stays in the log.
		noteCause(ctx, log, procedure, slog.LevelWarn, err, "store", full.Store, "storage_code", full.Code, "cause", full.Err)
		ce := connect.NewError(connect.CodeResourceExhausted, errors.New(full.Error()))
		addDetail(ce, &errdetails.ErrorInfo{Reason: ReasonStorageFull, Domain: ErrorDomain, Metadata: map[string]string{
			"store": full.Store, "code": full.Code,
		}})
		return withReason(ce, &compactorv1.ErrorDetail{
			Reason: compactorv1.ErrorReason_ERROR_REASON_STORAGE_FULL,
			Data:   &compactorv1.ErrorDetail_StorageFull{StorageFull: &compactorv1.StorageFull{Store: full.Store, Code: full.Code}},
		})
	case errors.As(err, &reused):
		return withReason(withBadRequest(connect.NewError(connect.CodeInvalidArgument, err), violation("idempotency_key", err.Error())),
			&compactorv1.ErrorDetail{Reason: compactorv1.ErrorReason_ERROR_REASON_IDEMPOTENCY_KEY_REUSED})
	case errors.As(err, &backlog):
		// The ErrorInfo tells a client whether waiting can help: a batch
		// larger than the limit never fits.
		reason, typed := ReasonBacklogLimit, compactorv1.ErrorReason_ERROR_REASON_BACKLOG_LIMIT
		if int64(backlog.Incoming) > backlog.Limit {
			reason, typed = ReasonBatchOverBacklogLimit, compactorv1.ErrorReason_ERROR_REASON_BATCH_OVER_BACKLOG_LIMIT
		}
		msg := err.Error()
		if reason == ReasonBatchOverBacklogLimit {
			msg = fmt.Sprintf("collection %s: the batch of %d records is larger than the backlog limit of %d records (--max-backlog), so it can never be accepted; send it in smaller batches",
				backlog.CollectionID, backlog.Incoming, backlog.Limit)
		}
		ce := connect.NewError(connect.CodeResourceExhausted, errors.New(msg))
		addDetail(ce, &errdetails.ErrorInfo{Reason: reason, Domain: ErrorDomain, Metadata: map[string]string{
			"backlog": fmt.Sprint(backlog.Backlog), "incoming": fmt.Sprint(backlog.Incoming), "limit": fmt.Sprint(backlog.Limit),
		}})
		return withReason(ce, &compactorv1.ErrorDetail{Reason: typed, Data: &compactorv1.ErrorDetail_BacklogLimit{BacklogLimit: &compactorv1.BacklogLimit{
			Backlog: backlog.Backlog, Incoming: int64(backlog.Incoming), Limit: backlog.Limit,
		}}})
	case errors.As(err, &invalid):
		// Rebuilt rather than err.Error(), which repeats the whole id.
		// The field may hold a metadata key: cut too.
		field := echo(invalid.Field)
		msg := fmt.Sprintf("record %d: %s: %s", invalid.Index, field, invalid.Reason)
		if invalid.ID != "" {
			msg = fmt.Sprintf("record %d (id %q): %s: %s", invalid.Index, echo(invalid.ID), field, invalid.Reason)
		}
		ce := withBadRequest(connect.NewError(connect.CodeInvalidArgument, errors.New(msg)),
			violation(fmt.Sprintf("records[%d].%s", invalid.Index, field), msg))
		return withReason(ce, &compactorv1.ErrorDetail{
			Reason: compactorv1.ErrorReason_ERROR_REASON_INVALID_RECORD,
			Data: &compactorv1.ErrorDetail_InvalidRecord{InvalidRecord: &compactorv1.InvalidRecord{
				Index: int32(invalid.Index), Id: echo(invalid.ID), Field: field, Problem: invalid.Reason,
			}},
		})
	case errors.As(err, &unknown):
		// At most MaxEchoIDs ids are named, in the message and the detail.
		msg := fmt.Sprintf("%d collections not found: %s", len(unknown.IDs), echoIDs(unknown.IDs))
		if len(unknown.IDs) == 1 {
			msg = fmt.Sprintf("collection %s not found", echo(unknown.IDs[0]))
		}
		ce := connect.NewError(connect.CodeNotFound, errors.New(msg))
		var vs []*errdetails.BadRequest_FieldViolation
		named := &compactorv1.CollectionsNotFound{Total: int32(len(unknown.IDs))}
		for _, id := range unknown.IDs[:min(len(unknown.IDs), MaxEchoIDs)] {
			vs = append(vs, violation("collection_ids", fmt.Sprintf("collection %s not found", echo(id))))
			named.CollectionIds = append(named.CollectionIds, echo(id))
		}
		return withReason(withBadRequest(ce, vs...), &compactorv1.ErrorDetail{
			Reason: compactorv1.ErrorReason_ERROR_REASON_COLLECTIONS_NOT_FOUND,
			Data:   &compactorv1.ErrorDetail_CollectionsNotFound{CollectionsNotFound: named},
		})
	case errors.Is(err, catalog.ErrNotFound):
		return connect.NewError(connect.CodeNotFound, err)
	case errors.Is(err, catalog.ErrAlreadyExists):
		return connect.NewError(connect.CodeAlreadyExists, err)
	case errors.Is(err, catalog.ErrBackpressure):
		return connect.NewError(connect.CodeResourceExhausted, err)
	case errors.Is(err, catalog.ErrConflict):
		return connect.NewError(connect.CodeAborted, err)
	case errors.Is(err, catalog.ErrInvalidArgument), errors.Is(err, manager.ErrInvalidArgument):
		return connect.NewError(connect.CodeInvalidArgument, err)
	case errors.Is(err, manager.ErrFinished), errors.Is(err, catalog.ErrFailedPrecondition):
		return connect.NewError(connect.CodeFailedPrecondition, err)
	case errors.Is(err, manager.ErrStopped), errors.Is(err, catalog.ErrUnavailable):
		return connect.NewError(connect.CodeUnavailable, err)
	case isCorrupt(err):
		// Damaged stored data (a block, manifest or log row): the message
		// names the collection and the blob key relative to the bucket (or
		// the log offset), never a server path.
		return connect.NewError(connect.CodeDataLoss, err)
	case errors.Is(err, context.Canceled) && ctx.Err() != nil:
		return connect.NewError(connect.CodeCanceled, err)
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil:
		return connect.NewError(connect.CodeDeadlineExceeded, err)
	}
	noteCause(ctx, log, procedure, slog.LevelError, err)
	return connect.NewError(connect.CodeInternal, errors.New("internal error; see the server log"))
}

// noteCause hands the cause of a failed call, which the client does not
// see, to the observer interceptor of the call, which logs it once with the
// call's outcome ("rpc failed") at level or above; attrs are extra log
// attributes. Outside an observed call it logs it here.
func noteCause(ctx context.Context, log *slog.Logger, procedure string, level slog.Level, cause error, attrs ...any) {
	if st := stateOf(ctx); st != nil {
		st.mu.Lock()
		st.cause, st.causeLevel, st.causeAttrs = cause, level, attrs
		st.mu.Unlock()
		return
	}
	log.Log(ctx, level, "rpc failed", append([]any{"procedure", procedure, "err", cause}, attrs...)...)
}

func isCorrupt(err error) bool {
	_, ok := compaction.CorruptKind(err)
	return ok
}

// invalidArgument returns an INVALID_ARGUMENT error with a BadRequest detail
// naming the field.
func invalidArgument(field, format string, args ...any) *connect.Error {
	msg := fmt.Sprintf(format, args...)
	return withBadRequest(connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("%s: %s", field, msg)), violation(field, msg))
}

func violation(field, desc string) *errdetails.BadRequest_FieldViolation {
	return &errdetails.BadRequest_FieldViolation{Field: field, Description: desc}
}

// withReason adds the typed detail d (reason and data) to ce.
func withReason(ce *connect.Error, d *compactorv1.ErrorDetail) *connect.Error {
	addDetail(ce, d)
	return ce
}

// addDetail adds m to ce as an error detail. NewErrorDetail fails only for a
// message it cannot marshal, which no generated message is.
func addDetail(ce *connect.Error, m proto.Message) {
	if d, err := connect.NewErrorDetail(m); err == nil {
		ce.AddDetail(d)
	}
}

func withBadRequest(ce *connect.Error, vs ...*errdetails.BadRequest_FieldViolation) *connect.Error {
	if len(vs) == 0 {
		return ce
	}
	addDetail(ce, &errdetails.BadRequest{FieldViolations: vs})
	return ce
}

package rpc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"

	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/manager"
	"github.com/compactorhq/compactor/internal/materialize"
)

// toConnect maps a domain error to a Connect error: the one place where the
// codes are decided (CONVENTIONS.md "Errors"). Expected errors keep their
// message, which names what was wrong; anything else reaches the client as
// INTERNAL with a generic message, and its detail goes to the log.
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
	switch {
	case errors.As(err, &invalid):
		return withBadRequest(connect.NewError(connect.CodeInvalidArgument, err),
			violation(fmt.Sprintf("records[%d].%s", invalid.Index, invalid.Field), invalid.Error()))
	case errors.As(err, &unknown):
		ce := connect.NewError(connect.CodeNotFound, err)
		var vs []*errdetails.BadRequest_FieldViolation
		for _, id := range unknown.IDs {
			vs = append(vs, violation("collection_ids", fmt.Sprintf("collection %s not found", id)))
		}
		return withBadRequest(ce, vs...)
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
	case errors.Is(err, manager.ErrFinished):
		return connect.NewError(connect.CodeFailedPrecondition, err)
	case errors.Is(err, manager.ErrStopped), errors.Is(err, catalog.ErrUnavailable):
		return connect.NewError(connect.CodeUnavailable, err)
	case errors.Is(err, context.Canceled) && ctx.Err() != nil:
		return connect.NewError(connect.CodeCanceled, err)
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil:
		return connect.NewError(connect.CodeDeadlineExceeded, err)
	}
	log.ErrorContext(ctx, "internal error", "procedure", procedure, "err", err)
	return connect.NewError(connect.CodeInternal, errors.New("internal error; see the server log"))
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

func withBadRequest(ce *connect.Error, vs ...*errdetails.BadRequest_FieldViolation) *connect.Error {
	if len(vs) == 0 {
		return ce
	}
	if d, err := connect.NewErrorDetail(&errdetails.BadRequest{FieldViolations: vs}); err == nil {
		ce.AddDetail(d)
	}
	return ce
}

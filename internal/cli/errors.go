package cli

import (
	"errors"

	"connectrpc.com/connect"

	compactorv1 "github.com/compactorhq/compactor/gen/compactor/v1"
)

// The CLI learns why a call failed from the compactorv1.ErrorDetail the
// server attaches (proto/compactor/v1/errors.proto): the reason and its
// data, never the wording of the message.

// errorDetail returns the compactorv1.ErrorDetail of err, or nil when it
// carries none (an error that is not the server's, or an older server).
func errorDetail(err error) *compactorv1.ErrorDetail {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return nil
	}
	for _, d := range ce.Details() {
		if v, derr := d.Value(); derr == nil {
			if ed, ok := v.(*compactorv1.ErrorDetail); ok {
				return ed
			}
		}
	}
	return nil
}

// errorReason is the typed reason of err, or ERROR_REASON_UNSPECIFIED.
func errorReason(err error) compactorv1.ErrorReason {
	return errorDetail(err).GetReason()
}

// invalidRecord returns the invalid record that err (of PushLogs with a
// batch of n records) names, or nil when it names none within the batch.
func invalidRecord(err error, n int) *compactorv1.InvalidRecord {
	d := errorDetail(err)
	if d.GetReason() != compactorv1.ErrorReason_ERROR_REASON_INVALID_RECORD {
		return nil
	}
	rec := d.GetInvalidRecord()
	if rec == nil || rec.GetIndex() < 0 || int(rec.GetIndex()) >= n {
		return nil
	}
	return rec
}

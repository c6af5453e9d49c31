package manager

import (
	"context"
	"errors"
	"fmt"

	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/jobtype"
)

// Verify queues a job of kind jobtype.KindVerify for a collection with
// params (what to check): ONE_OFF, or SCHEDULED when params.Scrub (the
// background scrub). A collection with a verify job queued already gets
// that job back (Created false), with its own params; a queued compaction
// of it is a different job. Errors: ErrInvalidArgument (empty id),
// *NotFoundError, ErrStopped, store errors (nothing queued).
func (m *Manager) Verify(ctx context.Context, collectionID string, params jobtype.VerifyParams, reason string) (Enqueued, error) {
	if collectionID == "" {
		return Enqueued{}, fmt.Errorf("give the collection to verify: %w", ErrInvalidArgument)
	}
	if m.runs.isStopping() {
		return Enqueued{}, ErrStopped
	}
	trigger := catalog.TriggerOneOff
	if params.Scrub {
		trigger = catalog.TriggerScheduled
	}
	res := m.enq.enqueue(ctx, catalog.EnqueueCall{Requests: []catalog.JobRequest{{
		CollectionID: collectionID, Kind: jobtype.KindVerify, Params: params.Encode(), Trigger: trigger,
		Reason: reason, TraceParent: traceParent(ctx),
	}}})
	if missing := (*catalog.MissingCollectionsError)(nil); errors.As(res.Err, &missing) {
		return Enqueued{}, &NotFoundError{IDs: missing.IDs}
	}
	if res.Err != nil {
		return Enqueued{}, fmt.Errorf("queue verification: %w", res.Err)
	}
	e := res.Jobs[0]
	m.changedJob(e.Job)
	return Enqueued{Job: Job{Job: e.Job}, Created: e.Created}, nil
}

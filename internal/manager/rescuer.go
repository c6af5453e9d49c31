package manager

import (
	"context"
	"log/slog"

	"github.com/compactorhq/compactor/internal/catalog"
)

// rescueStore is the slice of the Store the lease rescuer uses.
type rescueStore interface {
	ExpireLeases(ctx context.Context, renewing []string) ([]catalog.Job, error)
}

// leaseRescuer takes over jobs whose lease expired (after River's
// rescuer): any replica may, the catalog skips rows another is taking
// over, and each ends FAILED "interrupted" with a follow-up queued. It has
// no state of its own: the leases are rows of the catalog.
type leaseRescuer struct {
	store   rescueStore
	logger  *slog.Logger
	metrics *metrics
	wake    func() // the follow-ups are claimable
	// renewing returns the jobs this node's lease keepers renew: a replica
	// never expires a lease it is renewing (its keeper stops the job by the
	// monotonic clock when it cannot renew).
	renewing func() []string
}

// runOnce expires the leases past their time once and accounts the jobs
// it interrupted.
func (r *leaseRescuer) runOnce(ctx context.Context) {
	expired, err := r.store.ExpireLeases(ctx, r.renewing())
	if err != nil && ctx.Err() == nil {
		r.logger.Warn("expire job leases", "err", err)
	}
	r.interrupted(expired)
}

// interrupted accounts jobs that ended "interrupted" (this node's after a
// restart, or any node's whose lease expired).
func (r *leaseRescuer) interrupted(jobs []catalog.Job) {
	for _, j := range jobs {
		r.logger.Warn("job interrupted", "job", j.ID, "collection", j.CollectionID, "node", j.Node, "err", j.Error)
		// Counted, but not timed: its "duration" would span the outage.
		r.metrics.jobs.WithLabelValues(label(j.Trigger), label(j.State)).Inc()
	}
	if len(jobs) > 0 {
		r.wake() // their follow-ups are queued
	}
}

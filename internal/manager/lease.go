package manager

import (
	"context"
	"errors"

	"github.com/compactorhq/compactor/internal/catalog"
)

// keepLease renews the lease of this node's running job r every
// Config.RenewInterval until ctx ends, persisting its progress with it (what
// other replicas show). It cancels the job when an operator asked for it on
// any replica (the cancel request comes back with the renewal), and when the
// lease is lost: taken over by another replica, or not renewed within
// Config.LeaseDuration by the monotonic clock (the catalog could not be
// reached), after which the commit would be refused anyway. With
// Config.WindowClose requeue it also stops a scheduled job once its
// compaction window has closed.
func (m *Manager) keepLease(ctx context.Context, r *run) {
	renewed := m.clk.Mono()
	every(ctx, m.cfg.RenewInterval, func() bool {
		if m.windowClosed(r) {
			m.runs.cancelRun(r, NoteWindowClosed, errWindowClosed)
		}
		p := m.runs.progress(r)
		cancel, err := m.store.RenewLease(ctx, r.job.ID, m.owner, m.cfg.LeaseDuration, p)
		switch {
		case errors.Is(err, catalog.ErrLeaseLost):
			r.cancel(errLeaseLost)
			return false
		case err != nil:
			if ctx.Err() != nil {
				return false
			}
			if m.clk.Mono()-renewed >= m.cfg.LeaseDuration {
				m.logger.Warn("job lease not renewed in time; stopping the job", "job", r.job.ID, "err", err)
				r.cancel(errLeaseLost)
				return false
			}
			m.logger.Warn("renew job lease", "job", r.job.ID, "err", err)
		default:
			renewed = m.clk.Mono()
			if cancel {
				m.runs.cancelRun(r, "", errCancelRequested)
			}
		}
		return true
	})
}

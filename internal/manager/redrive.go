package manager

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/compactorhq/compactor/internal/catalog"
)

// redriveStore is the slice of the Store the re-driver uses.
type redriveStore interface {
	DeadLetterStates(ctx context.Context) ([]catalog.DeadLetterState, error)
	RedriveDeadLetter(ctx context.Context, ev catalog.DeadLetterEvent, req catalog.JobRequest) (catalog.Job, bool, error)
}

// redriver gives dead-lettered collections bounded further tries, run by
// the scheduler's leader at each of its runs: a collection is re-driven
// (a SCHEDULED job queued, the event recorded in its dead-letter history,
// in one transaction) once when the cool-off since its dead-lettering has
// passed, and once per server build other than the one that dead-lettered
// it (an upgrade may carry the fix). A re-drive that fails leaves the
// collection dead-lettered (its failure count is past the threshold); one
// that succeeds clears it. Its state is the catalog's (the events); it
// has none of its own.
type redriver struct {
	store   redriveStore
	coolOff time.Duration
	build   string // this server's version; "" disables the upgrade re-drive
	clock   func() time.Time
	logger  *slog.Logger
	counter *prometheus.CounterVec // compactor_dead_letter_redrives_total, by cause
	queued  func(j catalog.Job)    // publishes a job it queued and wakes the workers
}

// runOnce re-drives the dead-lettered collections that are due and
// returns how many jobs it queued.
func (r *redriver) runOnce(ctx context.Context) (int, error) {
	states, err := r.store.DeadLetterStates(ctx)
	if err != nil {
		return 0, fmt.Errorf("read dead-letter states: %w", err)
	}
	now, n := r.clock(), 0
	for _, st := range states {
		cause, reason := r.due(st, now)
		if cause == "" {
			continue
		}
		j, created, err := r.store.RedriveDeadLetter(ctx,
			catalog.DeadLetterEvent{CollectionID: st.CollectionID, Event: catalog.DeadLetterRedriven, Cause: cause, Build: r.build},
			catalog.JobRequest{CollectionID: st.CollectionID, Trigger: catalog.TriggerScheduled, Reason: reason})
		if err != nil {
			return n, fmt.Errorf("re-drive collection %s: %w", st.CollectionID, err)
		}
		r.logger.Info("dead-lettered collection re-driven", "collection", st.CollectionID, "cause", cause, "job", j.ID)
		r.counter.WithLabelValues(cause).Inc()
		if created {
			n++
			r.queued(j)
		}
	}
	return n, nil
}

// due says whether st is due for a re-drive at now, why (a catalog
// Redrive cause, "" when not due) and the reason its job carries.
func (r *redriver) due(st catalog.DeadLetterState, now time.Time) (cause, reason string) {
	switch {
	case r.build != "" && st.Build != r.build && !slices.Contains(st.RedrivenBuilds, r.build):
		was := st.Build
		if was == "" {
			was = "an unrecorded build"
		}
		return catalog.RedriveUpgrade, fmt.Sprintf("re-drive of a dead-lettered collection: the server is now %s (dead-lettered under %s)", r.build, was)
	case !st.CoolOffRedriven && !now.Before(st.DeadLetteredAt.Add(r.coolOff)):
		return catalog.RedriveCoolOff, fmt.Sprintf("re-drive of a dead-lettered collection: %s cool-off passed since %s",
			r.coolOff, st.DeadLetteredAt.UTC().Format(time.RFC3339))
	}
	return "", ""
}

// Redrive runs the re-driver once (the scheduler's leader does at each of
// its runs): every dead-lettered collection due for a re-drive (after
// Config.DeadLetterCoolOff, once; under a build other than the one that
// dead-lettered it, once per build) gets a SCHEDULED job, the re-drive
// recorded in its dead-letter history in the same transaction. It returns
// how many jobs it queued, and the store's error (having re-driven what it
// could before it).
func (m *Manager) Redrive(ctx context.Context) (int, error) { return m.redrive.runOnce(ctx) }

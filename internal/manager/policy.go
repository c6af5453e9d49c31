package manager

import (
	"context"
	"log/slog"
	"time"

	"github.com/sethvargo/go-retry"

	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/jobtype"
)

// failurePolicy applies what a job's end means for its collection
// (DESIGN.md §5, §8; effectOf decides it): a failure delays the
// collection's next scheduled job by an exponential backoff with jitter and
// a cap (one-off jobs are not delayed: they are an operator's explicit
// intent); a data or internal failure also counts toward the dead-letter
// state, which deadLetterAfter consecutive ones reach; an infrastructure
// failure never does. A success clears both. The state lives in the
// collection's row, shared by every replica; the dead-lettering is
// recorded in the collection's dead-letter history with build, the
// server's version, which the re-drive on upgrade compares with.
type failurePolicy struct {
	base, max       time.Duration
	deadLetterAfter int
	build           string
	now             func() time.Time // the manager's wall clock
}

// backoff is the delay before the scheduled retry after n consecutive
// failures (n >= 1): base·2^(n-1) with ±10 % jitter, at most max.
func (p failurePolicy) backoff(n int) time.Duration {
	b := retry.WithCappedDuration(p.max, retry.WithJitterPercent(10, retry.NewExponential(p.base)))
	var d time.Duration
	for range max(n, 1) {
		d, _ = b.Next()
	}
	return d
}

// endEffect is what a job's end does to its collection's failure state.
type endEffect struct {
	// Backoff delays the collection's next scheduled job (its retry
	// state).
	Backoff bool
	// Counts the failure toward the dead-letter state.
	Counts bool
	// Clears the failure and retry state, and ends a dead-lettering.
	Clears bool
	// Repair queues a compaction of the collection at once: a verify job
	// found its current version damaged, and the next compaction rebuilds
	// it from the newest earlier kept version that verifies (see
	// Manager.queueRepair).
	Repair bool
}

// effectOf decides what the end of a job of kind, in state (with class
// when FAILED), does to its collection's failure state:
//   - a success clears it, but a verify job's: a version that verifies
//     says nothing of whether the collection's compactions work;
//   - a verify job that found damage (class data) neither backs off nor
//     counts toward the dead-letter state, since compactions are how the
//     damage is repaired: it queues the repair instead, and the alert on
//     compactor_verification_failures_total calls an operator;
//   - any other failure backs off, and counts when its class does (an
//     infrastructure failure never does), a verify job's included: a
//     verify that failed on the blob store is like any job that did;
//   - a cancelled job changes nothing.
func effectOf(kind jobtype.Kind, state catalog.JobState, class jobtype.FailureClass) endEffect {
	switch state {
	case catalog.JobSucceeded:
		return endEffect{Clears: kind != jobtype.KindVerify}
	case catalog.JobFailed:
		if kind == jobtype.KindVerify && class == jobtype.FailureData {
			return endEffect{Repair: true}
		}
		return endEffect{Backoff: true, Counts: class.Counts()}
	}
	return endEffect{}
}

// failed records a FAILED job of class whose effect backs off: its
// collection's retry state, and when it counts its failure count
// (dead-lettering it at the threshold). Errors are logged: the job's end
// is already persisted.
func (p failurePolicy) failed(ctx context.Context, store Store, j catalog.Job, class jobtype.FailureClass, counts bool, log *slog.Logger) {
	c, err := store.GetCollection(ctx, j.CollectionID)
	if err != nil {
		log.Warn("read retry state", "err", err)
		return
	}
	retries := c.RetryCount + 1
	if err := store.SetRetry(ctx, j.CollectionID, retries, p.now().Add(p.backoff(retries))); err != nil {
		log.Warn("record retry state", "err", err)
	}
	if !counts {
		return
	}
	n, dead, err := store.RecordFailureOf(ctx, j.CollectionID, catalog.FailureRecord{
		DeadLetterAfter: p.deadLetterAfter, Build: p.build, JobID: j.ID, Error: j.Error,
	})
	if err != nil {
		log.Error("record failure", "err", err)
	}
	if dead {
		log.Error("collection dead-lettered", "failures", n, "class", string(class), "err", j.Error)
	}
}

// succeeded records a SUCCEEDED job: a commit cleared the collection's
// failure and retry state in its transaction; a job that committed nothing
// clears them here. A success that ends a dead-lettering is recorded in the
// collection's dead-letter history.
func (p failurePolicy) succeeded(ctx context.Context, store Store, j catalog.Job, committed bool, log *slog.Logger) {
	if !committed {
		if err := store.RecordSuccess(ctx, j.CollectionID); err != nil {
			log.Warn("clear failure count", "err", err)
		}
	}
	if err := store.RecordRecovery(ctx, j.CollectionID, j.ID, p.build); err != nil {
		log.Warn("record recovery from dead-letter", "err", err)
	}
}

package manager

import (
	"context"
	"log/slog"
	"time"

	"github.com/sethvargo/go-retry"

	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/jobtype"
)

// failurePolicy decides what a job's end means for its collection
// (DESIGN.md §5, §8): every failure, whatever its class, delays the
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

// failed records a FAILED job of class: its collection's retry state, and
// for a class that counts its failure count (dead-lettering it at the
// threshold). Errors are logged: the job's end is already persisted.
func (p failurePolicy) failed(ctx context.Context, store Store, j catalog.Job, class jobtype.FailureClass, log *slog.Logger) {
	c, err := store.GetCollection(ctx, j.CollectionID)
	if err != nil {
		log.Warn("read retry state", "err", err)
		return
	}
	retries := c.RetryCount + 1
	if err := store.SetRetry(ctx, j.CollectionID, retries, p.now().Add(p.backoff(retries))); err != nil {
		log.Warn("record retry state", "err", err)
	}
	if !class.Counts() {
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

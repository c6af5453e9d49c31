package manager

import (
	"context"
	"log/slog"
	"time"

	"github.com/sethvargo/go-retry"

	"github.com/compactorhq/compactor/internal/catalog"
)

// failurePolicy decides what a job's end means for its collection
// (DESIGN.md §5): every failure, transient or not, delays the collection's
// next scheduled job by an exponential backoff with jitter (one-off jobs
// are not delayed: they are an operator's explicit intent); a non-transient
// failure also counts toward the dead-letter state, which deadLetterAfter
// consecutive ones reach; a success clears both. The state lives in the
// collection's row, shared by every replica.
type failurePolicy struct {
	base, max       time.Duration
	deadLetterAfter int
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

// failed records a FAILED job: its collection's retry state, and for a
// non-transient failure its failure count (dead-lettering it at the
// threshold). Errors are logged: the job's end is already persisted.
func (p failurePolicy) failed(ctx context.Context, store Store, j catalog.Job, transient bool, log *slog.Logger) {
	c, err := store.GetCollection(ctx, j.CollectionID)
	if err != nil {
		log.Warn("read retry state", "err", err)
		return
	}
	retries := c.RetryCount + 1
	if err := store.SetRetry(ctx, j.CollectionID, retries, time.Now().Add(p.backoff(retries))); err != nil {
		log.Warn("record retry state", "err", err)
	}
	if transient {
		return
	}
	n, dead, err := store.RecordFailure(ctx, j.CollectionID, p.deadLetterAfter)
	if err != nil {
		log.Error("record failure", "err", err)
	}
	if dead {
		log.Error("collection dead-lettered", "failures", n, "err", j.Error)
	}
}

// succeeded records a SUCCEEDED job: a commit cleared the collection's
// failure and retry state in its transaction; a job that committed nothing
// clears them here.
func (p failurePolicy) succeeded(ctx context.Context, store Store, j catalog.Job, committed bool, log *slog.Logger) {
	if committed {
		return
	}
	if err := store.RecordSuccess(ctx, j.CollectionID); err != nil {
		log.Warn("clear failure count", "err", err)
	}
}

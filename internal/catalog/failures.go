package catalog

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// A collection's failure state: its consecutive failures (failure_count,
// the non-transient ones, which dead-letter it at a threshold), its
// dead-letter mark, and its retry state (retry_count, every failure; and
// retry_after, the backoff). Written here and by a commit, which clears it
// with clearFailureState like RecordSuccess.

// clearFailureState is the SET list that clears a collection's failure
// state after a success.
const clearFailureState = `failure_count = 0, dead_lettered_at = NULL, retry_count = 0, retry_after = NULL`

// SetRetry stores a collection's retry state: its consecutive failures
// (transient ones included) and the time before which no scheduled job of
// it is claimed (zero: none). The failure policy that computes them lives
// with the caller. Errors: ErrNotFound, ErrUnavailable.
func (c *Catalog) SetRetry(ctx context.Context, collectionID string, retries int, retryAfter time.Time) error {
	_, err := c.updateCollection(ctx, collectionID, nil, `retry_count = ?, retry_after = ?`, retries, msOrNull(retryAfter))
	return c.wrap(err, "set retry state of collection %s", collectionID)
}

// RecordFailure counts one non-transient compaction failure against a
// collection and dead-letters it when the consecutive count reaches
// deadLetterAfter (> 0). It returns the new count and whether the collection
// is dead-lettered.
func (c *Catalog) RecordFailure(ctx context.Context, id string, deadLetterAfter int) (int, bool, error) {
	if deadLetterAfter <= 0 {
		return 0, false, fmt.Errorf("record failure of collection %s: dead-letter threshold %d must be positive: %w", id, deadLetterAfter, ErrInvalidArgument)
	}
	now := ms(c.now())
	var (
		failures int
		dead     sql.NullInt64
	)
	err := c.writeTx(ctx, func(tx *sql.Tx) error {
		if err := c.updateOne(ctx, tx, `UPDATE collections SET
				failure_count = failure_count + 1,
				dead_lettered_at = CASE WHEN dead_lettered_at IS NULL AND failure_count + 1 >= ? THEN ? ELSE dead_lettered_at END,
				updated_at = ?
			WHERE id = ?`, deadLetterAfter, now, now, id); err != nil {
			return err
		}
		return tx.QueryRowContext(ctx, c.d.q(`SELECT failure_count, dead_lettered_at FROM collections WHERE id = ?`), id).Scan(&failures, &dead)
	})
	if err != nil {
		return 0, false, c.wrap(err, "record failure of collection %s", id)
	}
	return failures, dead.Valid, nil
}

// RecordSuccess resets the failure count and the dead-letter mark (for a job
// that succeeded without a commit, e.g. with nothing to compact).
func (c *Catalog) RecordSuccess(ctx context.Context, id string) error {
	now := ms(c.now())
	err := c.writeTx(ctx, func(tx *sql.Tx) error {
		return c.updateOne(ctx, tx, `UPDATE collections SET `+clearFailureState+`, updated_at = ? WHERE id = ?`, now, id)
	})
	return c.wrap(err, "record success of collection %s", id)
}

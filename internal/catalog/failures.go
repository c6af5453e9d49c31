package catalog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"github.com/compactorhq/compactor/internal/audit"
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

// Dead-letter events (the dead_letter_events table): the history of a
// collection's dead-letter state, which is also what the scheduler's
// re-drives are decided from (DeadLetterStates).
const (
	// DeadLetterEntered: the collection reached the failure threshold.
	DeadLetterEntered = "dead-lettered"
	// DeadLetterRedriven: the scheduler queued a job of the dead-lettered
	// collection (Cause: RedriveCoolOff or RedriveUpgrade).
	DeadLetterRedriven = "redriven"
	// DeadLetterCleared: an operator cleared the state (Actor, Reason).
	DeadLetterCleared = "cleared"
	// DeadLetterRecovered: a compaction of the collection succeeded.
	DeadLetterRecovered = "recovered"
)

// Causes of a re-drive.
const (
	RedriveCoolOff = "cool-off" // the cool-off since the dead-lettering passed
	RedriveUpgrade = "upgrade"  // the server's build differs from the one that dead-lettered it
)

// DeadLetterEvent is one change of a collection's dead-letter state.
type DeadLetterEvent struct {
	ID           int64 // ascending in the order events were recorded
	CollectionID string
	At           time.Time
	Event        string // DeadLetterEntered, DeadLetterRedriven, DeadLetterCleared, DeadLetterRecovered
	Cause        string // of a re-drive: RedriveCoolOff or RedriveUpgrade
	// Build is the server build that recorded the event (of a
	// dead-lettering: the build whose failures did it).
	Build    string
	Actor    string // who cleared it
	Reason   string // why it was cleared; of a dead-lettering, the last error
	JobID    string // the failed, re-drive or succeeding job
	Failures int    // the consecutive failures at the event
}

// FailureRecord is one failure RecordFailureOf counts.
type FailureRecord struct {
	DeadLetterAfter int    // the threshold (> 0)
	Build           string // this server's build, recorded when it dead-letters
	JobID, Error    string // the failed job and its error, likewise
}

const (
	deadLetterColumns  = `id, collection_id, at, event, cause, build, actor, reason, job_id, failures`
	deadLetterColumnsE = `e.id, e.collection_id, e.at, e.event, e.cause, e.build, e.actor, e.reason, e.job_id, e.failures`
)

func scanDeadLetterEvents(rows *sql.Rows, err error) ([]DeadLetterEvent, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []DeadLetterEvent{}
	for rows.Next() {
		var e DeadLetterEvent
		var at int64
		if err := rows.Scan(&e.ID, &e.CollectionID, &at, &e.Event, &e.Cause, &e.Build, &e.Actor, &e.Reason, &e.JobID, &e.Failures); err != nil {
			return nil, err
		}
		e.At = fromMs(at)
		out = append(out, e)
	}
	return out, rows.Err()
}

func (c *Catalog) insertDeadLetterEvent(ctx context.Context, tx *sql.Tx, e DeadLetterEvent) error {
	_, err := tx.ExecContext(ctx, c.d.q(`INSERT INTO dead_letter_events
			(collection_id, at, event, cause, build, actor, reason, job_id, failures) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`),
		e.CollectionID, ms(e.At), e.Event, e.Cause, e.Build, e.Actor, truncateText(e.Reason), e.JobID, e.Failures)
	return err
}

// truncateText bounds the text an event keeps (an error may be long).
func truncateText(s string) string {
	const most = 4096
	if len(s) <= most {
		return s
	}
	return s[:most] + "…"
}

// RecordFailureOf is RecordFailure that also records, in the same
// transaction, the event of a collection it dead-letters (with r's build,
// job and error). It returns the new count and whether the collection is
// dead-lettered. Errors: ErrInvalidArgument (threshold), ErrNotFound,
// ErrUnavailable.
func (c *Catalog) RecordFailureOf(ctx context.Context, id string, r FailureRecord) (int, bool, error) {
	if r.DeadLetterAfter <= 0 {
		return 0, false, fmt.Errorf("record failure of collection %s: dead-letter threshold %d must be positive: %w", id, r.DeadLetterAfter, ErrInvalidArgument)
	}
	now := c.now()
	var (
		failures     int
		before, dead sql.NullInt64
	)
	err := c.writeTx(ctx, func(tx *sql.Tx) error {
		err := tx.QueryRowContext(ctx, c.d.q(`SELECT dead_lettered_at FROM collections WHERE id = ?`), id).Scan(&before)
		if errors.Is(err, sql.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, c.d.q(`UPDATE collections SET
				failure_count = failure_count + 1,
				dead_lettered_at = CASE WHEN dead_lettered_at IS NULL AND failure_count + 1 >= ? THEN ? ELSE dead_lettered_at END,
				updated_at = ?
			WHERE id = ?`), r.DeadLetterAfter, ms(now), ms(now), id); err != nil {
			return err
		}
		if err := tx.QueryRowContext(ctx, c.d.q(`SELECT failure_count, dead_lettered_at FROM collections WHERE id = ?`), id).Scan(&failures, &dead); err != nil {
			return err
		}
		if before.Valid || !dead.Valid {
			return nil
		}
		return c.insertDeadLetterEvent(ctx, tx, DeadLetterEvent{CollectionID: id, At: now, Event: DeadLetterEntered,
			Build: r.Build, JobID: r.JobID, Reason: r.Error, Failures: failures})
	})
	if err != nil {
		return 0, false, c.wrap(err, "record failure of collection %s", id)
	}
	return failures, dead.Valid, nil
}

// ListDeadLetterEvents returns a collection's dead-letter history, newest
// first, at most limit events (limit <= 0: 100). Errors: ErrUnavailable.
func (c *Catalog) ListDeadLetterEvents(ctx context.Context, collectionID string, limit int) ([]DeadLetterEvent, error) {
	if limit <= 0 {
		limit = 100
	}
	evs, err := scanDeadLetterEvents(c.readQuery(ctx, `SELECT `+deadLetterColumns+` FROM dead_letter_events
		WHERE collection_id = ? ORDER BY id DESC LIMIT ?`, collectionID, limit))
	return evs, c.wrap(err, "list dead-letter events of collection %s", collectionID)
}

// DeadLetterState is what the re-drive rules need of a dead-lettered
// collection, folded from its events since it was last dead-lettered.
type DeadLetterState struct {
	CollectionID   string
	DeadLetteredAt time.Time
	// Build is the build that dead-lettered it ("" when unknown: before
	// events were recorded).
	Build string
	// CoolOffRedriven: the re-drive after the cool-off has been queued.
	CoolOffRedriven bool
	// RedrivenBuilds: the builds under which an upgrade re-drive was
	// queued.
	RedrivenBuilds []string
}

// DeadLetterStates returns the state of every dead-lettered collection
// (one query). Errors: ErrUnavailable.
func (c *Catalog) DeadLetterStates(ctx context.Context) ([]DeadLetterState, error) {
	var out []DeadLetterState
	err := c.readTx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, c.d.q(`SELECT id, dead_lettered_at FROM collections WHERE dead_lettered_at IS NOT NULL ORDER BY id`))
		if err != nil {
			return err
		}
		byID := map[string]int{}
		for rows.Next() {
			var s DeadLetterState
			var at int64
			if err := rows.Scan(&s.CollectionID, &at); err != nil {
				rows.Close()
				return err
			}
			s.DeadLetteredAt = fromMs(at)
			byID[s.CollectionID] = len(out)
			out = append(out, s)
		}
		if err := rows.Close(); err != nil {
			return err
		}
		if len(out) == 0 {
			return nil
		}
		evs, err := scanDeadLetterEvents(tx.QueryContext(ctx, c.d.q(`SELECT `+deadLetterColumnsE+` FROM dead_letter_events e
			JOIN collections c ON c.id = e.collection_id WHERE c.dead_lettered_at IS NOT NULL ORDER BY e.collection_id, e.id`)))
		if err != nil {
			return err
		}
		for _, e := range evs {
			i, ok := byID[e.CollectionID]
			if !ok {
				continue
			}
			s := &out[i]
			switch e.Event {
			case DeadLetterEntered:
				s.Build, s.CoolOffRedriven, s.RedrivenBuilds = e.Build, false, nil
			case DeadLetterRedriven:
				if e.Cause == RedriveCoolOff {
					s.CoolOffRedriven = true
				} else {
					s.RedrivenBuilds = append(s.RedrivenBuilds, e.Build)
				}
			}
		}
		return nil
	})
	return out, c.wrap(err, "read dead-letter states")
}

// RedriveDeadLetter queues a job of dead-lettered collection ev.CollectionID
// (req, its trigger and reason) and records the re-drive event ev, in one
// transaction; nothing is written when the collection is no longer
// dead-lettered (created false, no error). A job already queued for it is
// returned (created false) and the event is still recorded: the re-drive is
// used. Errors: ErrNotFound, ErrUnavailable.
func (c *Catalog) RedriveDeadLetter(ctx context.Context, ev DeadLetterEvent, req JobRequest) (Job, bool, error) {
	if err := checkJobRequest(req); err != nil {
		return Job{}, false, fmt.Errorf("re-drive collection %s: %w", ev.CollectionID, err)
	}
	now := fromMs(ms(c.now()))
	ev.At = now
	var out []Enqueued
	err := c.writeTx(ctx, func(tx *sql.Tx) error {
		var dead sql.NullInt64
		err := tx.QueryRowContext(ctx, c.d.q(`SELECT dead_lettered_at, failure_count FROM collections WHERE id = ?`), ev.CollectionID).Scan(&dead, &ev.Failures)
		if errors.Is(err, sql.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil || !dead.Valid {
			return err
		}
		if out, err = c.execEnqueue(ctx, tx, EnqueueCall{Requests: []JobRequest{req}}, now); err != nil {
			return err
		}
		ev.JobID = out[0].Job.ID
		return c.insertDeadLetterEvent(ctx, tx, ev)
	})
	if err != nil {
		return Job{}, false, c.wrap(err, "re-drive collection %s", ev.CollectionID)
	}
	if len(out) == 0 {
		return Job{}, false, nil
	}
	return out[0].Job, out[0].Created, nil
}

// ClearDeadLetter clears a collection's failure state by hand (failure
// and retry counts, dead-letter mark) and records who did it and why, in
// one transaction. cleared is false, and nothing is written, when the
// collection is not dead-lettered. Errors: ErrNotFound, ErrUnavailable.
func (c *Catalog) ClearDeadLetter(ctx context.Context, id, actor, reason string) (col Collection, cleared bool, err error) {
	now := c.now()
	err = c.writeTx(ctx, func(tx *sql.Tx) error {
		if col, err = c.queryCollection(ctx, tx, id); err != nil {
			return err
		}
		if !col.DeadLettered() {
			return nil
		}
		failures := col.FailureCount
		if _, err := tx.ExecContext(ctx, c.d.q(`UPDATE collections SET `+clearFailureState+`, updated_at = ? WHERE id = ?`), ms(now), id); err != nil {
			return err
		}
		if err := c.insertDeadLetterEvent(ctx, tx, DeadLetterEvent{CollectionID: id, At: now, Event: DeadLetterCleared,
			Actor: actor, Reason: reason, Failures: failures}); err != nil {
			return err
		}
		cleared = true
		if col, err = c.queryCollection(ctx, tx, id); err != nil {
			return err
		}
		return c.auditFromContext(ctx, tx, AuditEntry{Action: audit.ActionClearDeadLetter, CollectionID: id, Target: id, Reason: reason,
			Before: map[string]any{"dead_lettered": true, "failures": failures}, After: map[string]any{"dead_lettered": false, "failures": 0}})
	})
	if err != nil {
		return Collection{}, false, c.wrap(err, "clear dead-letter state of collection %s", id)
	}
	return col, cleared, nil
}

// RecordRecovery records that job jobID of a collection succeeded while
// its last dead-letter event left it dead-lettered or re-driven (the
// success cleared the state). It writes nothing otherwise; the check is a
// read, so a success of a collection never dead-lettered costs no write.
// Errors: ErrUnavailable.
func (c *Catalog) RecordRecovery(ctx context.Context, id, jobID, build string) error {
	var last string
	err := c.r.QueryRowContext(ctx, c.d.q(`SELECT event FROM dead_letter_events WHERE collection_id = ? ORDER BY id DESC LIMIT 1`), id).Scan(&last)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && last != DeadLetterEntered && last != DeadLetterRedriven) {
		return nil
	}
	if err != nil {
		return c.wrap(err, "record recovery of collection %s", id)
	}
	err = c.writeTx(ctx, func(tx *sql.Tx) error {
		return c.insertDeadLetterEvent(ctx, tx, DeadLetterEvent{CollectionID: id, At: c.now(), Event: DeadLetterRecovered, Build: build, JobID: jobID})
	})
	return c.wrap(err, "record recovery of collection %s", id)
}

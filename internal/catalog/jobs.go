package catalog

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/compactorhq/compactor/internal/jobtype"
)

// encodeJSON is v as a JSON column (” for nil).
func encodeJSON[T any](v *T) string {
	if v == nil {
		return ""
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "" // plain structs of numbers and strings: never fails
	}
	return string(b)
}

// decodeJSON reads a JSON column written by encodeJSON (nil for ”).
func decodeJSON[T any](s string) (*T, error) {
	if s == "" {
		return nil, nil
	}
	v := new(T)
	if err := json.Unmarshal([]byte(s), v); err != nil {
		return nil, err
	}
	return v, nil
}

// Listing bounds of ListJobs.
const maxListJobs = 1000

// interrupted is the error of a job that was RUNNING when the process
// stopped: such a job ends FAILED, and a failure's cause is its error (the
// note stays empty).
const interrupted = "interrupted: the process stopped while the job ran"

// jobColumns selects a job row in the order scanJob reads it.
const jobColumns = `id, collection_id, trigger_type, state, reason, attempt, created_at, started_at, finished_at,
	offset_start, offset_end, records_read, records_written, bytes_written, version_before, version_after,
	error_text, note, node, continues,
	priority, oldest_at, lease_owner, lease_expires_at, cancel_requested,
	progress_phase, progress_read, progress_total, progress_bytes, progress_at,
	progress_fraction, progress_eta_ms, progress_blocks_written, progress_blocks_total, trace_parent, kind,
	params, progress_vectors, progress_vectors_total,
	start_after, start_before, failure_class, predicted, actual, triggered_by`

// jobReadColumns selects a job row (table alias j) in the order scanJob
// reads it: jobColumns, then the name of the job's collection, joined in
// the query ("" once the collection is deleted), so that a listing of jobs
// with names is one query.
const jobReadColumns = `j.id, j.collection_id, j.trigger_type, j.state, j.reason, j.attempt, j.created_at, j.started_at, j.finished_at,
	j.offset_start, j.offset_end, j.records_read, j.records_written, j.bytes_written, j.version_before, j.version_after,
	j.error_text, j.note, j.node, j.continues,
	j.priority, j.oldest_at, j.lease_owner, j.lease_expires_at, j.cancel_requested,
	j.progress_phase, j.progress_read, j.progress_total, j.progress_bytes, j.progress_at,
	j.progress_fraction, j.progress_eta_ms, j.progress_blocks_written, j.progress_blocks_total, j.trace_parent, j.kind,
	j.params, j.progress_vectors, j.progress_vectors_total,
	j.start_after, j.start_before, j.failure_class, j.predicted, j.actual, j.triggered_by,
	COALESCE((SELECT cn.name FROM collections cn WHERE cn.id = j.collection_id), '')`

func scanJob(s scanner) (Job, error) {
	var (
		j                Job
		createdAt        int64
		priority, cancel int
		eta              sql.NullInt64
		class            string
		predicted        string
		actual           string
	)
	err := s.Scan(&j.ID, &j.CollectionID, &j.Trigger, &j.State, &j.Reason, &j.Attempt, &createdAt,
		msTime{&j.StartedAt}, msTime{&j.FinishedAt},
		&j.OffsetStart, &j.OffsetEnd, &j.RecordsRead, &j.RecordsWritten, &j.BytesWritten, &j.VersionBefore, &j.VersionAfter,
		&j.Error, &j.Note, &j.Node, &j.Continues,
		&priority, msTime{&j.OldestAt}, &j.LeaseOwner, msTime{&j.LeaseExpiresAt}, &cancel,
		&j.Progress.Phase, &j.Progress.OpRecordsRead, &j.Progress.OpRecordsTotal, &j.Progress.BytesWritten, msTime{&j.Progress.UpdatedAt},
		&j.Progress.Fraction, &eta, &j.Progress.BlocksWritten, &j.Progress.BlocksTotal, &j.TraceParent, &j.Kind,
		&j.Params, &j.Progress.VectorsIndexed, &j.Progress.VectorsTotal,
		msTime{&j.StartAfter}, msTime{&j.StartBefore}, &class, &predicted, &actual, &j.TriggeredBy,
		&j.CollectionName)
	if err != nil {
		return Job{}, err
	}
	j.FailureClass = jobtype.FailureClass(class)
	// A figure that does not decode is dropped: it is a display of the
	// job, never an input of anything that must be right.
	j.Predicted, _ = decodeJSON[jobtype.Prediction](predicted)
	j.Actual, _ = decodeJSON[jobtype.Actual](actual)
	j.Progress.ETA, j.Progress.ETAKnown = time.Duration(eta.Int64)*time.Millisecond, eta.Valid
	j.CreatedAt = fromMs(createdAt)
	j.Expedited = priority == priorityExpedited && j.Trigger != TriggerOneOff
	j.CancelRequested = cancel != 0
	return j, nil
}

// validateJob checks the fields of a job that the schema relies on.
func validateJob(j Job) error {
	switch {
	case j.ID == "":
		return fmt.Errorf("job id must not be empty: %w", ErrInvalidArgument)
	case j.CollectionID == "":
		return fmt.Errorf("job collection id must not be empty: %w", ErrInvalidArgument)
	}
	if err := checkKind(j.Kind); err != nil {
		return err
	}
	switch j.State {
	case JobQueued, JobRunning, JobSucceeded, JobFailed, JobCancelled:
	default:
		return fmt.Errorf("unknown job state %q: %w", j.State, ErrInvalidArgument)
	}
	switch j.Trigger {
	case TriggerScheduled, TriggerOneOff:
	default:
		return fmt.Errorf("unknown job trigger %q: %w", j.Trigger, ErrInvalidArgument)
	}
	return nil
}

// maxKindBytes bounds a job kind's name.
const maxKindBytes = 64

// checkKind accepts "" (a compaction) and any short name of lowercase
// letters, digits and underscores: the catalog stores kinds it does not
// know (a newer replica's), and the manager refuses to run them.
func checkKind(k JobKind) error {
	if len(k) > maxKindBytes {
		return fmt.Errorf("job kind of %d bytes, more than %d: %w", len(k), maxKindBytes, ErrInvalidArgument)
	}
	for _, r := range k {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '_' {
			return fmt.Errorf("job kind %q: only lowercase letters, digits and _ are allowed: %w", k, ErrInvalidArgument)
		}
	}
	return nil
}

// kindOrDefault is k, or compaction for "".
func kindOrDefault(k JobKind) JobKind {
	if k == "" {
		return jobtype.KindCompaction
	}
	return k
}

// InsertJob inserts a new job row. ErrAlreadyExists for a duplicate id.
func (c *Catalog) InsertJob(ctx context.Context, j Job) error {
	if err := validateJob(j); err != nil {
		return fmt.Errorf("insert job %s: %w", j.ID, err)
	}
	if j.CreatedAt.IsZero() {
		j.CreatedAt = c.now()
	}
	err := c.writeTx(ctx, func(tx *sql.Tx) error { return c.execInsertJob(ctx, tx, j) })
	return c.wrap(err, "insert job %s", j.ID)
}

// insertJobQuery inserts a job row, last in enqueue order.
func (c *Catalog) insertJobQuery() string {
	return `INSERT INTO jobs (` + jobColumns + `, queue_seq)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ` + c.d.nextQueueSeq + `)`
}

// execInsertJob inserts job j, placing it last in enqueue order. A second
// QUEUED or RUNNING job of a collection, like a taken id, is
// ErrAlreadyExists; an unknown collection is ErrNotFound.
func (c *Catalog) execInsertJob(ctx context.Context, tx *sql.Tx, j Job) error {
	cancel := 0
	if j.CancelRequested {
		cancel = 1
	}
	_, err := c.txExec(ctx, tx, c.insertJobQuery(),
		j.ID, j.CollectionID, string(j.Trigger), string(j.State), j.Reason, j.Attempt, ms(j.CreatedAt),
		msOrNull(j.StartedAt), msOrNull(j.FinishedAt),
		j.OffsetStart, j.OffsetEnd, j.RecordsRead, j.RecordsWritten, j.BytesWritten, j.VersionBefore, j.VersionAfter,
		j.Error, j.Note, j.Node, j.Continues,
		priorityOf(j), msOrNull(j.OldestAt), j.LeaseOwner, msOrNull(j.LeaseExpiresAt), cancel,
		string(j.Progress.Phase), j.Progress.OpRecordsRead, j.Progress.OpRecordsTotal, j.Progress.BytesWritten, msOrNull(j.Progress.UpdatedAt),
		j.Progress.Fraction, etaOrNull(j.Progress), j.Progress.BlocksWritten, j.Progress.BlocksTotal, j.TraceParent, string(kindOrDefault(j.Kind)),
		j.Params, j.Progress.VectorsIndexed, j.Progress.VectorsTotal,
		msOrNull(j.StartAfter), msOrNull(j.StartBefore),
		string(j.FailureClass), encodeJSON(j.Predicted), encodeJSON(j.Actual), j.TriggeredBy)
	switch c.d.kind(err) {
	case kindUnique:
		return fmt.Errorf("job id is taken, or collection %s has a %s %s job already: %w", j.CollectionID, j.State, kindOrDefault(j.Kind), ErrAlreadyExists)
	case kindForeignKey:
		return fmt.Errorf("collection %s: %w", j.CollectionID, ErrNotFound)
	}
	return err
}

// etaOrNull is p's ETA in milliseconds, NULL when unknown.
func etaOrNull(p JobProgress) any {
	if !p.ETAKnown {
		return nil
	}
	return p.ETA.Milliseconds()
}

// UpdateJob overwrites every mutable field of the job row with j's.
// ErrNotFound when no such id.
func (c *Catalog) UpdateJob(ctx context.Context, j Job) error {
	if err := validateJob(j); err != nil {
		return fmt.Errorf("update job %s: %w", j.ID, err)
	}
	err := c.writeTx(ctx, func(tx *sql.Tx) error { return c.execUpdateJob(ctx, tx, j) })
	return c.wrap(err, "update job %s", j.ID)
}

// execUpdateJob overwrites the mutable fields of job j.ID: everything but
// its id, collection and creation time. ErrNotFound when there is no such
// job.
func (c *Catalog) execUpdateJob(ctx context.Context, tx *sql.Tx, j Job) error {
	res, err := tx.ExecContext(ctx, c.d.q(`UPDATE jobs SET
			trigger_type = ?, state = ?, reason = ?, attempt = ?, started_at = ?, finished_at = ?,
			offset_start = ?, offset_end = ?, records_read = ?, records_written = ?, bytes_written = ?,
			version_before = ?, version_after = ?, error_text = ?, note = ?, node = ?,
			failure_class = ?, predicted = ?, actual = ?
		WHERE id = ?`),
		string(j.Trigger), string(j.State), j.Reason, j.Attempt, msOrNull(j.StartedAt), msOrNull(j.FinishedAt),
		j.OffsetStart, j.OffsetEnd, j.RecordsRead, j.RecordsWritten, j.BytesWritten,
		j.VersionBefore, j.VersionAfter, j.Error, j.Note, j.Node,
		string(j.FailureClass), encodeJSON(j.Predicted), encodeJSON(j.Actual),
		j.ID)
	return oneRow(res, err, ErrNotFound)
}

// JobIDsWithPrefix returns the ids of up to limit jobs whose id starts with
// prefix (lowercase UUID characters: hex digits and dashes), in id order:
// the lookup behind short job ids (the status page shows 8 characters).
func (c *Catalog) JobIDsWithPrefix(ctx context.Context, prefix string, limit int) ([]string, error) {
	// Every id character sorts below 'g' (digits, '-', 'a'..'f'), so the ids
	// starting with prefix are the range [prefix, prefix+"g"): an index
	// range on the primary key, with no LIKE pattern to escape.
	rows, err := c.readQuery(ctx, `SELECT id FROM jobs WHERE id >= ? AND id < ? ORDER BY id LIMIT ?`, prefix, prefix+"g", limit)
	if err != nil {
		return nil, c.wrap(err, "list jobs with id prefix %s", prefix)
	}
	defer func() { _ = rows.Close() }()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, c.wrap(err, "list jobs with id prefix %s", prefix)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, c.wrap(err, "list jobs with id prefix %s", prefix)
	}
	return ids, nil
}

// GetJob returns one job. ErrNotFound when no such id.
func (c *Catalog) GetJob(ctx context.Context, id string) (Job, error) {
	j, err := scanJob(c.readRow(ctx, `SELECT `+jobReadColumns+` FROM jobs j WHERE j.id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		err = ErrNotFound
	}
	if err != nil {
		return Job{}, c.wrap(err, "get job %s", id)
	}
	return j, nil
}

// ListJobs returns jobs matching f, newest first (created_at desc, id desc),
// at most f.Limit (1..1,000; 0: 1,000). On an exclusive catalog the same
// list asked again with no write transaction ended between is answered from
// memory (listCache); the caller owns what it gets either way.
func (c *Catalog) ListJobs(ctx context.Context, f JobFilter) ([]Job, error) {
	var (
		where []string
		args  []any
	)
	if f.CollectionID != "" {
		where = append(where, `collection_id = ?`)
		args = append(args, f.CollectionID)
	}
	if len(f.States) > 0 {
		where = append(where, `state IN (`+placeholders(len(f.States))+`)`)
		for _, s := range f.States {
			args = append(args, string(s))
		}
	}
	if len(f.Kinds) > 0 {
		where = append(where, `kind IN (`+placeholders(len(f.Kinds))+`)`)
		for _, k := range f.Kinds {
			args = append(args, string(kindOrDefault(k)))
		}
	}
	if f.Trigger != "" {
		where = append(where, `trigger_type = ?`)
		args = append(args, string(f.Trigger))
	}
	if !f.FinishedSince.IsZero() {
		where = append(where, `finished_at >= ?`)
		args = append(args, ms(f.FinishedSince))
	}
	if !f.Before.IsZero() {
		at := ms(f.Before.CreatedAt)
		where = append(where, `(created_at < ? OR (created_at = ? AND id < ?))`)
		args = append(args, at, at, f.Before.ID)
	}
	limit := f.Limit
	if limit <= 0 || limit > maxListJobs {
		limit = maxListJobs
	}
	query := `SELECT ` + jobReadColumns + ` FROM jobs j`
	if len(where) > 0 {
		query += ` WHERE ` + strings.Join(where, ` AND `)
	}
	query += ` ORDER BY created_at DESC, id DESC LIMIT ?`
	args = append(args, limit)

	key := jobsKey(f, limit)
	if e, ok := c.lists.get(key); ok {
		return cloneJobs(e.jobs), nil
	}
	gen := c.lists.begin()
	jobs, err := scanJobs(c.readQuery(ctx, query, args...))
	if err != nil {
		return nil, c.wrap(err, "list jobs")
	}
	if c.lists != nil {
		c.lists.put(key, gen, listEntry{jobs: cloneJobs(jobs)})
	}
	return jobs, nil
}

func (c *Catalog) queryJobs(ctx context.Context, q querier, query string, args ...any) ([]Job, error) {
	return scanJobs(q.QueryContext(ctx, c.d.q(query), args...))
}

// scanJobs reads the jobs of a query's result.
func scanJobs(rows *sql.Rows, err error) ([]Job, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	jobs := []Job{}
	for rows.Next() {
		j, err := scanJob(rows)
		if err != nil {
			return nil, err
		}
		jobs = append(jobs, j)
	}
	return jobs, rows.Err()
}

// PruneJobs deletes finished jobs beyond the newest keep (keep <= 0: no count
// limit) and finished jobs that finished before olderThan (zero: no age
// limit). It returns the number deleted.
func (c *Catalog) PruneJobs(ctx context.Context, keep int, olderThan time.Time) (int, error) {
	finished := []any{string(JobSucceeded), string(JobFailed), string(JobCancelled)}
	var deleted int64
	err := c.writeTx(ctx, func(tx *sql.Tx) error {
		if keep > 0 {
			args := append(append(append([]any{}, finished...), finished...), keep)
			res, err := tx.ExecContext(ctx, c.d.q(`DELETE FROM jobs WHERE state IN (?, ?, ?) AND id NOT IN (
					SELECT id FROM jobs WHERE state IN (?, ?, ?) ORDER BY created_at DESC, id DESC LIMIT ?)`), args...)
			if err != nil {
				return fmt.Errorf("beyond the newest %d: %w", keep, err)
			}
			n, err := rowsAffected(res)
			if err != nil {
				return err
			}
			deleted += n
		}
		if !olderThan.IsZero() {
			args := append(append([]any{}, finished...), ms(olderThan))
			res, err := tx.ExecContext(ctx, c.d.q(`DELETE FROM jobs WHERE state IN (?, ?, ?) AND finished_at < ?`), args...)
			if err != nil {
				return fmt.Errorf("finished before %s: %w", olderThan.UTC().Format(time.RFC3339), err)
			}
			n, err := rowsAffected(res)
			if err != nil {
				return err
			}
			deleted += n
		}
		return nil
	})
	if err != nil {
		return 0, c.wrap(err, "prune jobs")
	}
	return int(deleted), nil
}

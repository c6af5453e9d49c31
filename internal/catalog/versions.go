package catalog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"github.com/compactorhq/compactor/internal/audit"
	"slices"
	"strings"
	"time"

	"github.com/compactorhq/compactor/internal/jobtype"
)

// CommitCompaction commits a compaction in one transaction: compare-and-swap
// of the segment version (BaseVersion → NewVersion), advance of the
// compaction offset, a row in the versions table (with the job's id and
// the offset it was built from), the reset of the failure count and dead-letter
// mark, and cm.Job when set. Errors: *ConflictError when the current version
// is not BaseVersion (nothing written), ErrInvalidArgument when the offset
// would go backwards or past the log position or NewVersion != BaseVersion+1,
// ErrNotFound when the collection is gone.
//
// The log rows at or below the new offset are not deleted here: readers
// ignore them from the commit on, and PurgeLog removes them afterwards in
// short range deletes, so the commit's transaction stays short whatever the
// size of the compacted slice.
func (c *Catalog) CommitCompaction(ctx context.Context, cm Commit) error {
	if err := validateCommit(cm); err != nil {
		return fmt.Errorf("commit compaction of collection %s: %w", cm.CollectionID, err)
	}
	now := ms(c.now())
	err := c.writeTx(ctx, func(tx *sql.Tx) error {
		if cm.Job != nil && cm.LeaseOwner != "" {
			// The fence first: a node that lost its lease learns that, not
			// the conflict its successor's commit may have caused.
			if err := c.execFinishJob(ctx, tx, cm.LeaseOwner, *cm.Job); err != nil {
				return fmt.Errorf("finish job %s: %w", cm.Job.ID, err)
			}
		}
		version, offset, position, err := c.lockPosition(ctx, tx, cm.CollectionID)
		if err != nil {
			return err
		}
		if version != cm.BaseVersion {
			return &ConflictError{CollectionID: cm.CollectionID, Expected: cm.BaseVersion, Actual: version}
		}
		if cm.CompactionOffset < offset {
			return fmt.Errorf("compaction offset %d is behind the current offset %d: %w", cm.CompactionOffset, offset, ErrInvalidArgument)
		}
		if cm.CompactionOffset > position {
			return fmt.Errorf("compaction offset %d is past the log position %d: %w", cm.CompactionOffset, position, ErrInvalidArgument)
		}
		res, err := tx.ExecContext(ctx, c.d.q(`UPDATE collections SET
				segment_version = ?, compaction_offset = ?, manifest_key = ?, record_count = ?,
				`+clearFailureState+`, last_compacted_at = ?, updated_at = ?, `+oldestAfter+`
			WHERE id = ? AND segment_version = ?`),
			cm.NewVersion, cm.CompactionOffset, cm.ManifestKey, cm.RecordCount, now, now, cm.CollectionID, cm.CompactionOffset+1, cm.CompactionOffset,
			cm.CollectionID, cm.BaseVersion)
		// No row cannot happen while the row is locked; kept as a guard.
		if err := oneRow(res, wrapf(err, "update collection"), &ConflictError{CollectionID: cm.CollectionID, Expected: cm.BaseVersion, Actual: -1}); err != nil {
			return err
		}
		if ix := cm.Index; ix != nil {
			if _, err := tx.ExecContext(ctx, c.d.q(`UPDATE collections SET index_m = ?, index_ef_construction = ? WHERE id = ?`),
				ix.M, ix.EfConstruction, cm.CollectionID); err != nil {
				return fmt.Errorf("update index settings: %w", err)
			}
		}
		jobID := ""
		if cm.Job != nil {
			jobID = cm.Job.ID
		}
		_, err = tx.ExecContext(ctx, c.d.q(`INSERT INTO versions (collection_id, version, manifest_key, compaction_offset, record_count, segment_bytes, block_count, created_at, digest, job_id, offset_start)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`), cm.CollectionID, cm.NewVersion, cm.ManifestKey, cm.CompactionOffset, cm.RecordCount, cm.SegmentBytes, cm.BlockCount, now, cm.Digest, jobID, offset)
		if err != nil {
			return fmt.Errorf("insert version %d: %w", cm.NewVersion, err)
		}
		if cm.Job != nil && cm.LeaseOwner == "" {
			if err := c.execUpdateJob(ctx, tx, *cm.Job); err != nil {
				return fmt.Errorf("update job %s: %w", cm.Job.ID, err)
			}
		}
		return nil
	})
	return c.wrap(err, "commit compaction of collection %s", cm.CollectionID)
}

// validateCommit checks what can be checked without the database.
func validateCommit(cm Commit) error {
	switch {
	case cm.NewVersion != cm.BaseVersion+1:
		return fmt.Errorf("new version %d does not follow base version %d: %w", cm.NewVersion, cm.BaseVersion, ErrInvalidArgument)
	case cm.BaseVersion < 0:
		return fmt.Errorf("negative base version %d: %w", cm.BaseVersion, ErrInvalidArgument)
	case cm.CompactionOffset < 0:
		return fmt.Errorf("negative compaction offset %d: %w", cm.CompactionOffset, ErrInvalidArgument)
	case cm.RecordCount < 0:
		return fmt.Errorf("negative record count %d: %w", cm.RecordCount, ErrInvalidArgument)
	}
	if ix := cm.Index; ix != nil {
		if err := ix.WithDefaults().Validate(); err != nil {
			return err
		}
	}
	if cm.Job != nil {
		if cm.Job.CollectionID != cm.CollectionID {
			return fmt.Errorf("job %s belongs to collection %s: %w", cm.Job.ID, cm.Job.CollectionID, ErrInvalidArgument)
		}
		if err := validateJob(*cm.Job); err != nil {
			return fmt.Errorf("job %s: %w", cm.Job.ID, err)
		}
	}
	return nil
}

// ListVersions returns the committed versions of a collection, newest first.
// ErrNotFound when the collection does not exist.
func (c *Catalog) ListVersions(ctx context.Context, id string) ([]Version, error) {
	var vs []Version
	err := c.readTx(ctx, func(tx *sql.Tx) error {
		var err error
		if vs, err = c.queryVersions(ctx, tx, id); err != nil || len(vs) > 0 {
			return err
		}
		ok, err := c.existsCollection(ctx, tx, id)
		if err == nil && !ok {
			err = ErrNotFound
		}
		return err
	})
	if err != nil {
		return nil, c.wrap(err, "list versions of collection %s", id)
	}
	return vs, nil
}

// RecordVerification records the outcome of a verification of version
// version of collection id, at the catalog clock's now: problem "" when it
// verified, else what was found wrong (kept to 4 KiB). Errors: ErrNotFound
// when the collection or the version row is gone (collected meanwhile).
func (c *Catalog) RecordVerification(ctx context.Context, id string, version int64, problem string) error {
	if len(problem) > maxVerifyError {
		problem = strings.ToValidUTF8(problem[:maxVerifyError], "") + "…"
	}
	now := ms(c.now())
	err := c.writeTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, c.d.q(`UPDATE versions SET verified_at = ?, verify_error = ? WHERE collection_id = ? AND version = ?`),
			now, problem, id, version)
		return oneRow(res, err, fmt.Errorf("version %d: %w", version, ErrNotFound))
	})
	return c.wrap(err, "record verification of collection %s", id)
}

// VersionsToScrub returns up to limit (<= 0: 100) retained versions, of
// every collection, last verified (or, never verified, committed: the
// commit's read-back check verified it) before before, the longest ago
// first: what the background scrub verifies next. Only CollectionID,
// Version, CreatedAt and VerifiedAt are set.
func (c *Catalog) VersionsToScrub(ctx context.Context, before time.Time, limit int) ([]Version, error) {
	if limit <= 0 {
		limit = 100
	}
	var vs []Version
	err := c.readTx(ctx, func(tx *sql.Tx) error {
		vs = nil
		rows, err := tx.QueryContext(ctx, c.d.q(`SELECT collection_id, version, created_at, verified_at FROM versions
			WHERE retired_at IS NULL AND COALESCE(verified_at, created_at) < ?
			ORDER BY COALESCE(verified_at, created_at), collection_id, version LIMIT ?`), ms(before), limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var v Version
			var createdAt int64
			if err := rows.Scan(&v.CollectionID, &v.Version, &createdAt, msTime{&v.VerifiedAt}); err != nil {
				return err
			}
			v.CreatedAt = fromMs(createdAt)
			vs = append(vs, v)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, c.wrap(err, "list versions to scrub")
	}
	return vs, nil
}

// maxVerifyError bounds the text RecordVerification keeps.
const maxVerifyError = 4096

// deleteChunk bounds the number of parameters of one DELETE ... IN (...).
const deleteChunk = 500

// lockSegmentVersion returns the current segment version of collection id,
// its row locked for the rest of tx (PostgreSQL; SQLite's write
// transaction holds the whole database). ErrNotFound: no such collection.
func (c *Catalog) lockSegmentVersion(ctx context.Context, tx *sql.Tx, id string) (int64, error) {
	var current int64
	err := tx.QueryRowContext(ctx, c.d.q(`SELECT segment_version FROM collections WHERE id = ?`+c.d.forUpdate), id).Scan(&current)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, ErrNotFound
	}
	return current, err
}

// DeleteVersions removes version rows (never the current version: such a
// request is ErrInvalidArgument and deletes nothing).
func (c *Catalog) DeleteVersions(ctx context.Context, id string, versions []int64) error {
	err := c.writeTx(ctx, func(tx *sql.Tx) error {
		current, err := c.lockSegmentVersion(ctx, tx, id)
		if err != nil {
			return err
		}
		if slices.Contains(versions, current) {
			return fmt.Errorf("version %d is the current version: %w", current, ErrInvalidArgument)
		}
		for chunk := range slices.Chunk(versions, deleteChunk) {
			args := make([]any, 0, len(chunk)+1)
			args = append(args, id)
			for _, v := range chunk {
				args = append(args, v)
			}
			q := `DELETE FROM versions WHERE collection_id = ? AND version IN (` + placeholders(len(chunk)) + `)`
			if _, err := tx.ExecContext(ctx, c.d.q(q), args...); err != nil {
				return err
			}
		}
		return nil
	})
	return c.wrap(err, "delete versions of collection %s", id)
}

// versionColumns selects a version row in the order scanVersion reads it.
const versionColumns = `collection_id, version, manifest_key, compaction_offset, record_count, segment_bytes, block_count, created_at, retired_at,
	digest, verified_at, verify_error, job_id, offset_start, rollback_of, reason, created_by`

func scanVersion(s scanner) (Version, error) {
	var (
		v                   Version
		createdAt           int64
		offsetStart, rollOf sql.NullInt64
	)
	if err := s.Scan(&v.CollectionID, &v.Version, &v.ManifestKey, &v.CompactionOffset, &v.RecordCount, &v.SegmentBytes, &v.BlockCount, &createdAt, msTime{&v.RetiredAt},
		&v.Digest, msTime{&v.VerifiedAt}, &v.VerifyError, &v.JobID, &offsetStart, &rollOf, &v.Reason, &v.CreatedBy); err != nil {
		return Version{}, err
	}
	v.CreatedAt = fromMs(createdAt)
	v.OffsetStart = -1
	if offsetStart.Valid {
		v.OffsetStart = offsetStart.Int64
	} else if v.Version == 1 {
		v.OffsetStart = 0
	}
	v.RollbackOf = rollOf.Int64
	return v, nil
}

// queryVersions reads the version rows of a collection, newest first (an
// empty, non-nil slice when none). A row committed before OffsetStart was
// recorded takes its older neighbour's compaction offset.
func (c *Catalog) queryVersions(ctx context.Context, q querier, id string) ([]Version, error) {
	rows, err := q.QueryContext(ctx, c.d.q(`SELECT `+versionColumns+`
		FROM versions WHERE collection_id = ? ORDER BY version DESC`), id)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	vs := []Version{}
	for rows.Next() {
		v, err := scanVersion(rows)
		if err != nil {
			return nil, err
		}
		vs = append(vs, v)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for i := range vs {
		if vs[i].OffsetStart < 0 && vs[i].RollbackOf == 0 && i+1 < len(vs) && vs[i+1].Version == vs[i].Version-1 {
			vs[i].OffsetStart = vs[i+1].CompactionOffset
		}
	}
	return vs, nil
}

// GetVersion returns the row of a kept version of a collection (one GC has
// not retired; the current version is always kept). Errors: ErrNotFound
// when the collection does not exist; a *VersionNotFoundError (matching
// ErrNotFound, naming the kept versions) when version was never committed
// or has been retired; ErrInvalidArgument for a version below 1.
func (c *Catalog) GetVersion(ctx context.Context, id string, version int64) (Version, error) {
	if version < 1 {
		return Version{}, c.wrap(fmt.Errorf("version %d: versions start at 1: %w", version, ErrInvalidArgument), "get version of collection %s", id)
	}
	var v Version
	err := c.readTx(ctx, func(tx *sql.Tx) error {
		var err error
		v, err = c.keptVersion(ctx, tx, id, version)
		return err
	})
	if err != nil {
		return Version{}, c.wrap(err, "get version %d of collection %s", version, id)
	}
	return v, nil
}

// keptVersion reads version of collection id through q: ErrNotFound for
// no collection, *VersionNotFoundError when the version is not kept.
func (c *Catalog) keptVersion(ctx context.Context, q querier, id string, version int64) (Version, error) {
	vs, err := c.queryVersions(ctx, q, id)
	if err != nil {
		return Version{}, err
	}
	if len(vs) == 0 {
		ok, err := c.existsCollection(ctx, q, id)
		if err != nil {
			return Version{}, err
		}
		if !ok {
			return Version{}, ErrNotFound
		}
	}
	nf := &VersionNotFoundError{CollectionID: id, Version: version}
	for _, v := range vs {
		if v.Kept() {
			nf.Oldest = v.Version
			nf.Newest = max(nf.Newest, v.Version)
		}
	}
	for _, v := range vs {
		if v.Version == version && v.Kept() {
			return v, nil
		}
	}
	return Version{}, nf
}

// CommitRollback makes a kept version's segment current again, as a new
// version, in one transaction fenced like a compaction's commit:
// compare-and-swap of the segment version (BaseVersion → NewVersion =
// BaseVersion+1), no job of the collection RUNNING, and then the collection
// takes rb.ManifestKey and rb.ToVersion's compaction offset (which moves
// back: every log record after it is read again by the next compaction),
// record count and storage figures; the new version row takes ToVersion's
// digest and log offsets (OffsetStart, CompactionOffset], records the
// rollback (RollbackOf, Reason, CreatedBy) and, with rb.JobID set, its
// job: a row of kind rollback, SUCCEEDED, with the versions before and
// after, the log offsets compacted again (OffsetStart, OffsetEnd] and a
// note, so that the rollback is in the job history too. The failure count
// and dead-letter mark are left as they are.
//
// Errors: ErrNotFound (no collection); *VersionNotFoundError (ToVersion not
// kept); *ConflictError (the current version is not BaseVersion);
// ErrInvalidArgument (NewVersion != BaseVersion+1, ToVersion already
// current, FromManifestKey not ToVersion's manifest); ErrFailedPrecondition
// when a job of the collection is RUNNING (naming it: it could commit a
// version built on the one replaced) or when the log rows after
// ToVersion's compaction offset are gone (purged by a release that purged
// up to the newest version's offset: the rollback would lose those
// records). Nothing is written on error.
func (c *Catalog) CommitRollback(ctx context.Context, rb Rollback) error {
	switch {
	case rb.NewVersion != rb.BaseVersion+1:
		return c.wrap(fmt.Errorf("new version %d does not follow base version %d: %w", rb.NewVersion, rb.BaseVersion, ErrInvalidArgument), "roll back collection %s", rb.CollectionID)
	case rb.ToVersion < 1:
		return c.wrap(fmt.Errorf("version %d: versions start at 1: %w", rb.ToVersion, ErrInvalidArgument), "roll back collection %s", rb.CollectionID)
	}
	now := ms(c.now())
	err := c.writeTx(ctx, func(tx *sql.Tx) error {
		version, offset, position, err := c.lockPosition(ctx, tx, rb.CollectionID)
		if err != nil {
			return err
		}
		to, err := c.keptVersion(ctx, tx, rb.CollectionID, rb.ToVersion)
		if err != nil {
			return err
		}
		if version != rb.BaseVersion {
			return &ConflictError{CollectionID: rb.CollectionID, Expected: rb.BaseVersion, Actual: version}
		}
		if to.Version == version {
			return fmt.Errorf("version %d is already the current version: %w", to.Version, ErrInvalidArgument)
		}
		if to.ManifestKey != rb.FromManifestKey {
			return fmt.Errorf("manifest %s is not version %d's (%s): %w", rb.FromManifestKey, to.Version, to.ManifestKey, ErrInvalidArgument)
		}
		var running string
		err = tx.QueryRowContext(ctx, c.d.q(`SELECT id FROM jobs WHERE collection_id = ? AND state = ? ORDER BY created_at LIMIT 1`),
			rb.CollectionID, string(JobRunning)).Scan(&running)
		if err == nil {
			return fmt.Errorf("job %s of the collection is running and could commit a version built on version %d: cancel it or wait for it to end, then roll back: %w",
				running, version, ErrFailedPrecondition)
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("look for running jobs: %w", err)
		}
		if to.CompactionOffset < position {
			// Offsets are dense and purges delete from the lowest up, so
			// the row after the offset is there exactly when all are.
			var n int
			if err := tx.QueryRowContext(ctx, c.d.q(`SELECT COUNT(*) FROM log WHERE collection_id = ? AND log_offset = ?`),
				rb.CollectionID, to.CompactionOffset+1).Scan(&n); err != nil {
				return fmt.Errorf("look for the log after version %d: %w", to.Version, err)
			}
			if n == 0 {
				return fmt.Errorf("the log records after version %d's compaction offset %d were purged, so a rollback to it would lose them: %w",
					to.Version, to.CompactionOffset, ErrFailedPrecondition)
			}
		}
		res, err := tx.ExecContext(ctx, c.d.q(`UPDATE collections SET
				segment_version = ?, compaction_offset = ?, manifest_key = ?, record_count = ?, updated_at = ?,
				`+oldestAfter+`
			WHERE id = ? AND segment_version = ?`),
			rb.NewVersion, to.CompactionOffset, rb.ManifestKey, to.RecordCount, now, rb.CollectionID, to.CompactionOffset+1, to.CompactionOffset,
			rb.CollectionID, rb.BaseVersion)
		if err := oneRow(res, wrapf(err, "update collection"), &ConflictError{CollectionID: rb.CollectionID, Expected: rb.BaseVersion, Actual: -1}); err != nil {
			return err
		}
		// The segment is to's: its digest and the log offsets it covers
		// too (its verification is the new version's own, none yet).
		var offsetStart sql.NullInt64
		if to.OffsetStart >= 0 {
			offsetStart = sql.NullInt64{Int64: to.OffsetStart, Valid: true}
		}
		_, err = tx.ExecContext(ctx, c.d.q(`INSERT INTO versions (collection_id, version, manifest_key, compaction_offset, record_count, segment_bytes, block_count, created_at,
				digest, job_id, offset_start, rollback_of, reason, created_by)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
			rb.CollectionID, rb.NewVersion, rb.ManifestKey, to.CompactionOffset, to.RecordCount, to.SegmentBytes, to.BlockCount, now,
			to.Digest, rb.JobID, offsetStart, to.Version, rb.Reason, rb.By)
		if err != nil {
			return fmt.Errorf("insert version %d: %w", rb.NewVersion, err)
		}
		rollbackEvent := AuditEntry{Action: audit.ActionRollback, CollectionID: rb.CollectionID, Target: rb.CollectionID, Reason: rb.Reason,
			Before: map[string]int64{"version": version}, After: map[string]int64{"version": rb.NewVersion, "restored_version": to.Version}, JobID: rb.JobID}
		if rb.JobID == "" {
			return c.auditFromContext(ctx, tx, rollbackEvent)
		}
		at := fromMs(now)
		note := fmt.Sprintf("rolled back to version %d: its segment and compaction offset %d are current again; the log records (%d, %d] are compacted again",
			to.Version, to.CompactionOffset, to.CompactionOffset, offset)
		if rb.By != "" {
			note += "; asked by " + rb.By
		}
		j := Job{ID: rb.JobID, CollectionID: rb.CollectionID, Kind: jobtype.KindRollback, Trigger: TriggerOneOff, State: JobSucceeded,
			Reason: rb.Reason, Attempt: 1, CreatedAt: at, StartedAt: at, FinishedAt: at,
			OffsetStart: to.CompactionOffset, OffsetEnd: offset, VersionBefore: version, VersionAfter: rb.NewVersion, Note: note, Node: rb.Node}
		if err := c.execInsertJob(ctx, tx, j); err != nil {
			return fmt.Errorf("insert rollback job %s: %w", rb.JobID, err)
		}
		return c.auditFromContext(ctx, tx, rollbackEvent)
	})
	return c.wrap(err, "roll back collection %s to version %d", rb.CollectionID, rb.ToVersion)
}

// RetireVersions is GC's bookkeeping of retention, in catalog time and in
// one transaction: it marks retired, at the catalog clock's now, every
// version of the collection that is neither among the newest keep (>= 1)
// nor the current one and is not retired yet, and returns every version row
// split into Retained and Expired (retired at least grace ago; never the
// current version). The grace therefore counts from when a version stopped
// being retained, i.e. from the last moment a new read could have picked
// it, not from when its blobs were written. Errors: ErrNotFound (no such
// collection), ErrInvalidArgument (keep < 1, negative grace).
func (c *Catalog) RetireVersions(ctx context.Context, id string, keep int, grace time.Duration) (Retention, error) {
	if keep < 1 {
		return Retention{}, c.wrap(fmt.Errorf("keep %d versions: at least 1: %w", keep, ErrInvalidArgument), "retire versions of collection %s", id)
	}
	if grace < 0 {
		return Retention{}, c.wrap(fmt.Errorf("negative grace period %v: %w", grace, ErrInvalidArgument), "retire versions of collection %s", id)
	}
	var r Retention
	err := c.writeTx(ctx, func(tx *sql.Tx) error {
		r = Retention{}
		current, err := c.lockSegmentVersion(ctx, tx, id)
		if err != nil {
			return err
		}
		vs, err := c.queryVersions(ctx, tx, id)
		if err != nil {
			return err
		}
		now := c.now()
		var retire []int64
		// Newest first. A version retired earlier stays retired even if a
		// larger keep would retain it now: a reader may have missed it.
		for i := range vs {
			if v := &vs[i]; i >= keep && v.Version != current && v.RetiredAt.IsZero() {
				v.RetiredAt = fromMs(ms(now))
				retire = append(retire, v.Version)
			}
		}
		for chunk := range slices.Chunk(retire, deleteChunk) {
			args := make([]any, 0, len(chunk)+2)
			args = append(args, ms(now), id)
			for _, v := range chunk {
				args = append(args, v)
			}
			q := `UPDATE versions SET retired_at = ? WHERE collection_id = ? AND retired_at IS NULL AND version IN (` + placeholders(len(chunk)) + `)`
			if _, err := tx.ExecContext(ctx, c.d.q(q), args...); err != nil {
				return fmt.Errorf("mark %d versions retired: %w", len(chunk), err)
			}
		}
		cutoff := now.Add(-grace)
		for _, v := range vs {
			if !v.RetiredAt.IsZero() && !v.RetiredAt.After(cutoff) && v.Version != current {
				r.Expired = append(r.Expired, v)
			} else {
				r.Retained = append(r.Retained, v)
			}
		}
		r.Retired = len(retire)
		return nil
	})
	if err != nil {
		return Retention{}, c.wrap(err, "retire versions of collection %s", id)
	}
	return r, nil
}

// lockPosition reads, locking the row for the transaction tx where the
// dialect locks rows, the segment version, compaction offset and log
// position of collection id: the compare-and-swap base of a commit or a
// rollback. ErrNotFound when there is no such collection.
func (c *Catalog) lockPosition(ctx context.Context, tx *sql.Tx, id string) (version, offset, position int64, err error) {
	err = tx.QueryRowContext(ctx, c.d.q(`SELECT segment_version, compaction_offset, log_position FROM collections WHERE id = ?`+c.d.forUpdate),
		id).Scan(&version, &offset, &position)
	if errors.Is(err, sql.ErrNoRows) {
		err = ErrNotFound
	}
	return version, offset, position, err
}

// wrapf is fmt.Errorf(what+": %w", err), nil for a nil err.
func wrapf(err error, what string) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", what, err)
}

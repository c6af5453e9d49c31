package catalog

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"
)

// Bounds of collection attributes.
const (
	maxNameBytes = 256   // bytes of a collection name
	maxDimension = 65536 // embedding dimension
)

// collectionColumns selects a collection row (table alias c) in the order
// scanCollection reads it. The last column is the append time of the first
// uncompacted log record: offsets are dense and compacted rows are purged,
// so that is the row at compaction_offset+1, found through the primary key.
const collectionColumns = `c.id, c.name, c.dimension, c.log_position, c.compaction_offset,
	c.segment_version, c.manifest_key, c.record_count, c.failure_count,
	c.dead_lettered_at, c.last_compacted_at, c.created_at, c.updated_at, c.retry_count, c.retry_after,
	c.paused_at, c.pause_reason, c.paused_by, c.min_compaction_size, c.max_uncompacted_age_ms,
	c.distance, c.index_m, c.index_ef_construction, c.index_ef_search, c.index_disabled,
	(SELECT l.appended_at FROM log l WHERE l.collection_id = c.id AND l.log_offset = c.compaction_offset + 1)`

func scanCollection(s scanner) (Collection, error) {
	var (
		col                  Collection
		createdAt, updatedAt int64
		minSize, maxAgeMs    sql.NullInt64
		distance             string
		m, efc, efs, noIndex int64
	)
	err := s.Scan(&col.ID, &col.Name, &col.Dimension, &col.LogPosition, &col.CompactionOffset,
		&col.SegmentVersion, &col.ManifestKey, &col.RecordCount, &col.FailureCount,
		msTime{&col.DeadLetteredAt}, msTime{&col.LastCompactedAt}, &createdAt, &updatedAt,
		&col.RetryCount, msTime{&col.RetryAfter},
		msTime{&col.PausedAt}, &col.PauseReason, &col.PausedBy, &minSize, &maxAgeMs,
		&distance, &m, &efc, &efs, &noIndex,
		msTime{&col.OldestUncompactedAt})
	if err != nil {
		return Collection{}, err
	}
	if err := scanIndex(&col.Index, distance, m, efc, efs, noIndex); err != nil {
		return Collection{}, err
	}
	col.Settings.MinCompactionSize = minSize.Int64
	col.Settings.MaxUncompactedAge = time.Duration(maxAgeMs.Int64) * time.Millisecond
	col.CreatedAt, col.UpdatedAt = fromMs(createdAt), fromMs(updatedAt)
	return col, nil
}

// queryCollection reads one collection through q (a transaction or a pool);
// ErrNotFound when there is no such id.
func (c *Catalog) queryCollection(ctx context.Context, q querier, id string) (Collection, error) {
	const query = `SELECT ` + collectionColumns + ` FROM collections c WHERE c.id = ?`
	var row *sql.Row
	if q == querier(c.r) {
		row = c.readRow(ctx, query, id)
	} else {
		row = q.QueryRowContext(ctx, c.d.q(query), id)
	}
	col, err := scanCollection(row)
	if errors.Is(err, sql.ErrNoRows) {
		return Collection{}, ErrNotFound
	}
	return col, err
}

// querier is *sql.DB or *sql.Tx.
type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// validateName checks a collection name: non-empty after trimming white
// space, at most maxNameBytes bytes, valid UTF-8, no control or format
// characters (NUL, newlines, bidirectional overrides...), which would
// mislead whoever reads the name in a table, a log or the page.
func validateName(name string) error {
	switch {
	case strings.TrimSpace(name) == "":
		return fmt.Errorf("collection name must not be empty: %w", ErrInvalidArgument)
	case len(name) > maxNameBytes:
		return fmt.Errorf("collection name is %d bytes, longer than the limit of %d: %w", len(name), maxNameBytes, ErrInvalidArgument)
	case !utf8.ValidString(name):
		return fmt.Errorf("collection name is not valid UTF-8: %w", ErrInvalidArgument)
	}
	for i, r := range name {
		if unicode.In(r, unicode.Cc, unicode.Cf) {
			return fmt.Errorf("collection name has the control or format character %U at byte %d: %w", r, i, ErrInvalidArgument)
		}
	}
	return nil
}

// CreateCollection creates a collection with a new UUID and the default
// index settings (CreateCollectionSpec). dimension 0 leaves the dimension
// to be fixed by the first write. Errors: ErrInvalidArgument (empty name,
// name over 256 bytes, negative dimension), ErrAlreadyExists (name taken).
func (c *Catalog) CreateCollection(ctx context.Context, name string, dimension int) (Collection, error) {
	return c.CreateCollectionSpec(ctx, CollectionSpec{Name: name, Dimension: dimension})
}

// CreateCollectionSpec creates a collection with a new UUID: spec's name,
// dimension and index settings (zero fields take their defaults). Errors:
// ErrInvalidArgument (empty name, name over 256 bytes, dimension outside
// 0..MaxDimension; an *IndexSettingsError for a setting out of bounds),
// ErrAlreadyExists (name taken).
func (c *Catalog) CreateCollectionSpec(ctx context.Context, spec CollectionSpec) (Collection, error) {
	name, dimension := spec.Name, spec.Dimension
	if err := validateName(name); err != nil {
		return Collection{}, fmt.Errorf("create collection %q: %w", name, err)
	}
	if dimension < 0 || dimension > maxDimension {
		return Collection{}, fmt.Errorf("create collection %q: dimension %d is outside 0..%d: %w", name, dimension, maxDimension, ErrInvalidArgument)
	}
	idx := spec.Index.WithDefaults()
	if err := idx.Validate(); err != nil {
		return Collection{}, fmt.Errorf("create collection %q: %w", name, err)
	}
	now := fromMs(ms(c.now()))
	col := Collection{ID: uuid.NewString(), Name: name, Dimension: dimension, Index: idx, CreatedAt: now, UpdatedAt: now}
	err := c.writeTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, c.d.q(`INSERT INTO collections (id, name, dimension, created_at, updated_at,
			distance, index_m, index_ef_construction, index_ef_search, index_disabled) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
			col.ID, col.Name, col.Dimension, ms(now), ms(now),
			idx.Distance.String(), idx.M, idx.EfConstruction, idx.EfSearch, boolInt(idx.Disabled))
		if err != nil && c.d.kind(err) == kindUnique {
			return fmt.Errorf("name is taken: %w", ErrAlreadyExists)
		}
		return err
	})
	if err != nil {
		return Collection{}, c.wrap(err, "create collection %q", name)
	}
	return col, nil
}

// GetCollection returns one collection. ErrNotFound when no such id.
func (c *Catalog) GetCollection(ctx context.Context, id string) (Collection, error) {
	col, err := c.queryCollection(ctx, c.r, id)
	if err != nil {
		return Collection{}, c.wrap(err, "get collection %s", id)
	}
	return col, nil
}

// ListCollections returns all collections ordered by name.
func (c *Catalog) ListCollections(ctx context.Context) ([]Collection, error) {
	rows, err := c.r.QueryContext(ctx, `SELECT `+collectionColumns+` FROM collections c ORDER BY c.name`)
	if err != nil {
		return nil, c.wrap(err, "list collections")
	}
	defer rows.Close()
	cols := []Collection{}
	for rows.Next() {
		col, err := scanCollection(rows)
		if err != nil {
			return nil, c.wrap(err, "list collections")
		}
		cols = append(cols, col)
	}
	if err := rows.Err(); err != nil {
		return nil, c.wrap(err, "list collections")
	}
	return cols, nil
}

// ListCollectionsPage returns up to limit collections (1..10,000) whose
// names sort after after ("" for the first page), ordered by name: the
// page is cut in SQL (a cursor on the unique name), so its cost follows
// the page, not the number of collections. Errors: ErrInvalidArgument (limit
// out of range), ErrUnavailable.
func (c *Catalog) ListCollectionsPage(ctx context.Context, after string, limit int) ([]Collection, error) {
	if limit <= 0 || limit > maxListCollections {
		return nil, fmt.Errorf("list collections: page of %d, outside 1..%d: %w", limit, maxListCollections, ErrInvalidArgument)
	}
	rows, err := c.readQuery(ctx, `SELECT `+collectionColumns+` FROM collections c WHERE c.name > ? ORDER BY c.name LIMIT ?`, after, limit)
	if err != nil {
		return nil, c.wrap(err, "list collections after %q", after)
	}
	defer rows.Close()
	cols := make([]Collection, 0, limit)
	for rows.Next() {
		col, err := scanCollection(rows)
		if err != nil {
			return nil, c.wrap(err, "list collections after %q", after)
		}
		cols = append(cols, col)
	}
	if err := rows.Err(); err != nil {
		return nil, c.wrap(err, "list collections after %q", after)
	}
	return cols, nil
}

// maxListCollections bounds a page of ListCollectionsPage.
const maxListCollections = 10_000

// CountPausedCollections returns the number of collections whose automatic
// compaction is paused, counted in SQL.
func (c *Catalog) CountPausedCollections(ctx context.Context) (int, error) {
	var n int
	if err := c.r.QueryRowContext(ctx, `SELECT COUNT(*) FROM collections WHERE paused_at IS NOT NULL`).Scan(&n); err != nil {
		return 0, c.wrap(err, "count paused collections")
	}
	return n, nil
}

// DeleteCollection deletes a collection with its log rows, versions and jobs,
// and returns the row as it was (so the caller can delete its blobs).
// ErrNotFound when no such id.
func (c *Catalog) DeleteCollection(ctx context.Context, id string) (Collection, error) {
	var col Collection
	tables := []string{"jobs", "versions", "push_keys", "log"}
	if c.d.purgeLater {
		tables = tables[:3]
	}
	del := func(tx *sql.Tx) error {
		var err error
		if col, err = c.queryCollection(ctx, tx, id); err != nil {
			return err
		}
		// The foreign keys cascade too (where on); deleting explicitly keeps
		// the behaviour independent of the foreign-key setting.
		for _, table := range tables {
			if _, err := tx.ExecContext(ctx, c.d.q(`DELETE FROM `+table+` WHERE collection_id = ?`), id); err != nil {
				return fmt.Errorf("delete %s rows: %w", table, err)
			}
		}
		if c.d.purgeLater {
			if _, err := tx.ExecContext(ctx, c.d.q(`INSERT INTO log_purges (collection_id, deleted_at) VALUES (?, ?)`), id, ms(c.now())); err != nil {
				return fmt.Errorf("record log purge: %w", err)
			}
		}
		_, err = tx.ExecContext(ctx, c.d.q(`DELETE FROM collections WHERE id = ?`), id)
		return err
	}
	run := func() error {
		if !c.d.purgeLater {
			return c.writeTx(ctx, del)
		}
		return c.withoutForeignKeys(ctx, del)
	}
	err := run()
	if c.storageFull(err) != nil && c.releaseReserve(ctx, "delete a collection", id) {
		err = run()
	}
	if err != nil {
		return Collection{}, c.wrap(err, "delete collection %s", id)
	}
	if c.d.purgeLater {
		// The collection is gone for every reader; rows left by a failure
		// here are purged by the next delete or the next Open.
		if err := c.purgeLogs(ctx); err != nil {
			c.log.WarnContext(ctx, "purge log rows of deleted collections; retried at the next delete or start", "err", err)
		}
	}
	return col, nil
}

// releaseReserve releases the space reserve, if the catalog holds one, to
// do what (on collection id) on a full disk, and reports whether it did.
func (c *Catalog) releaseReserve(ctx context.Context, what, id string) bool {
	if c.reserve == nil {
		return false
	}
	released, err := c.reserve.release()
	if err != nil {
		c.log.ErrorContext(ctx, "release catalog space reserve", "err", err)
		return false
	}
	if released {
		c.log.WarnContext(ctx, "catalog full: released the space reserve to "+what, "collection", id, "reserve_bytes", c.reserve.size)
	}
	return released
}

// withoutForeignKeys runs fn in a write transaction on the writer
// connection with SQLite's foreign keys off (so deleting a collection row
// does not cascade to its log rows), and turns them on again.
func (c *Catalog) withoutForeignKeys(ctx context.Context, fn func(tx *sql.Tx) error) error {
	conn, err := c.w.Conn(ctx)
	if err != nil {
		return fmt.Errorf("take the writer connection: %w", err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `PRAGMA foreign_keys = OFF`); err != nil {
		return fmt.Errorf("turn foreign keys off: %w", err)
	}
	defer func() {
		if _, err := conn.ExecContext(context.WithoutCancel(ctx), `PRAGMA foreign_keys = ON`); err != nil {
			c.log.ErrorContext(ctx, "turn foreign keys on again; dropping the connection", "err", err)
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		}
	}()
	return c.writeTxOn(ctx, conn, fn)
}

// purgeChunk is the most log rows one purge transaction deletes; halved
// down to 1 while a chunk does not fit in the free space.
const purgeChunk = 4096

// purgeLogs deletes the log rows of the collections in log_purges, in
// transactions of at most purgeChunk rows, each followed by a checkpoint
// that lets the next one reuse the write-ahead log's space, and removes a
// collection from log_purges once its rows are gone.
func (c *Catalog) purgeLogs(ctx context.Context) error {
	var ids []string
	err := c.readTx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT collection_id FROM log_purges ORDER BY deleted_at`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				return err
			}
			ids = append(ids, id)
		}
		return rows.Err()
	})
	if err != nil {
		return c.wrap(err, "list log purges")
	}
	for _, id := range ids {
		chunk := purgeChunk
		for {
			var n int64
			err := c.writeTx(ctx, func(tx *sql.Tx) error {
				res, err := tx.ExecContext(ctx, `DELETE FROM log WHERE rowid IN (SELECT rowid FROM log WHERE collection_id = ? LIMIT ?)`, id, chunk)
				if err != nil {
					return err
				}
				n, err = rowsAffected(res)
				return err
			})
			if c.storageFull(err) != nil {
				// Spend the reserve first, then try smaller chunks.
				if c.releaseReserve(ctx, "purge the log of a deleted collection", id) {
					continue
				}
				if chunk > 1 {
					chunk /= 2
					continue
				}
			}
			if err != nil {
				return c.wrap(err, "purge log rows of deleted collection %s", id)
			}
			// A passive checkpoint: when no reader holds an older
			// snapshot, the next transaction writes the log from its start.
			if _, err := c.w.ExecContext(ctx, `PRAGMA wal_checkpoint(PASSIVE)`); err != nil {
				c.log.WarnContext(ctx, "checkpoint while purging log rows", "err", err)
			}
			if n < int64(chunk) {
				break
			}
		}
		err := c.writeTx(ctx, func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `DELETE FROM log_purges WHERE collection_id = ?`, id)
			return err
		})
		if err != nil {
			return c.wrap(err, "finish log purge of deleted collection %s", id)
		}
	}
	if len(ids) > 0 {
		return c.shrink(ctx)
	}
	return nil
}

// vacuumChunk is the most free pages one incremental vacuum returns.
const vacuumChunk = 1024

// shrink returns the database's free pages to the file system (SQLite
// databases created with auto_vacuum = INCREMENTAL; a no-op for others), in
// steps of vacuumChunk pages, each followed by a checkpoint, which
// truncates the file: deleting a collection then frees space on the volume
// for the blob store and the space reserve as well.
func (c *Catalog) shrink(ctx context.Context) error {
	var mode int
	if err := c.w.QueryRowContext(ctx, `PRAGMA auto_vacuum`).Scan(&mode); err != nil {
		return c.wrap(err, "read auto_vacuum")
	}
	if mode != 2 { // INCREMENTAL
		return nil
	}
	for {
		var free int64
		if err := c.w.QueryRowContext(ctx, `PRAGMA freelist_count`).Scan(&free); err != nil {
			return c.wrap(err, "read freelist_count")
		}
		if free == 0 {
			return nil
		}
		// incremental_vacuum returns no row; Exec runs it to the end.
		if _, err := c.w.ExecContext(ctx, fmt.Sprintf(`PRAGMA incremental_vacuum(%d)`, vacuumChunk)); err != nil {
			return c.wrap(err, "return free pages to the file system")
		}
		if _, err := c.w.ExecContext(ctx, `PRAGMA wal_checkpoint(PASSIVE)`); err != nil {
			return c.wrap(err, "checkpoint after incremental vacuum")
		}
		var after int64
		if err := c.w.QueryRowContext(ctx, `PRAGMA freelist_count`).Scan(&after); err != nil {
			return c.wrap(err, "read freelist_count")
		}
		if after >= free {
			return nil // no progress (e.g. the vacuum failed silently): stop
		}
	}
}

// existsCollection reports whether a collection with id exists.
func (c *Catalog) existsCollection(ctx context.Context, q querier, id string) (bool, error) {
	var one int
	err := q.QueryRowContext(ctx, c.d.q(`SELECT 1 FROM collections WHERE id = ?`), id).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
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
		res, err := tx.ExecContext(ctx, c.d.q(`UPDATE collections SET
				failure_count = failure_count + 1,
				dead_lettered_at = CASE WHEN dead_lettered_at IS NULL AND failure_count + 1 >= ? THEN ? ELSE dead_lettered_at END,
				updated_at = ?
			WHERE id = ?`), deadLetterAfter, now, now, id)
		if err != nil {
			return err
		}
		if n, err := rowsAffected(res); err != nil {
			return err
		} else if n == 0 {
			return ErrNotFound
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
		res, err := tx.ExecContext(ctx, c.d.q(`UPDATE collections SET failure_count = 0, dead_lettered_at = NULL, retry_count = 0, retry_after = NULL, updated_at = ? WHERE id = ?`), now, id)
		if err != nil {
			return err
		}
		if n, err := rowsAffected(res); err != nil {
			return err
		} else if n == 0 {
			return ErrNotFound
		}
		return nil
	})
	return c.wrap(err, "record success of collection %s", id)
}

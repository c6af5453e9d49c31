package catalog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/compactorhq/compactor/internal/audit"
)

// Bounds of collection attributes.
const (
	maxNameBytes = 256   // bytes of a collection name
	maxDimension = 65536 // embedding dimension
)

// collectionColumns selects a collection row (table alias c) in the order
// scanCollection reads it. The last column is the append time of the first
// uncompacted log record (the row at compaction_offset+1: offsets are dense
// and the rows after the compaction offset are never purged). The
// transactions that move the log position or the compaction offset keep it
// on the row with the offset it was written for (oldestKept), so that a
// list of every collection reads no log row; a row whose offset has moved
// since (written by a build that does not keep it: a rolling upgrade, a
// downgrade) reads the log row, and its next append writes it afresh.
const collectionColumns = `c.id, c.name, c.dimension, c.log_position, c.compaction_offset,
	c.segment_version, c.manifest_key, c.record_count, c.failure_count,
	c.dead_lettered_at, c.last_compacted_at, c.created_at, c.updated_at, c.retry_count, c.retry_after,
	c.paused_at, c.pause_reason, c.paused_by, c.min_compaction_size, c.max_uncompacted_age_ms,
	c.distance, c.index_m, c.index_ef_construction, c.index_ef_search, c.index_disabled,
	c.priority_class, c.compaction_windows, c.objective_max_age_ms, c.objective_max_backlog, c.throughput_share,
	CASE WHEN c.oldest_offset = c.compaction_offset AND c.oldest_uncompacted_at IS NOT NULL THEN c.oldest_uncompacted_at
		WHEN c.log_position > c.compaction_offset THEN
			(SELECT l.appended_at FROM log l WHERE l.collection_id = c.id AND l.log_offset = c.compaction_offset + 1) END`

// oldestAfter sets collections.oldest_uncompacted_at and oldest_offset for
// a compaction offset that moves to o: the append time of the log row after
// o, NULL when there is none (no backlog). Its arguments: the collection's
// id, o+1, o.
const oldestAfter = `oldest_uncompacted_at = (SELECT l.appended_at FROM log l WHERE l.collection_id = ? AND l.log_offset = ?), oldest_offset = ?`

// oldestKept sets collections.oldest_uncompacted_at and oldest_offset in an
// append's update, after its log rows are inserted: the time stays while it
// was written for the current offset, else it is the log row's after the
// offset (the append's first row when the backlog was empty).
const oldestKept = `oldest_uncompacted_at = CASE WHEN oldest_offset = compaction_offset AND oldest_uncompacted_at IS NOT NULL THEN oldest_uncompacted_at
		ELSE (SELECT l.appended_at FROM log l WHERE l.collection_id = collections.id AND l.log_offset = collections.compaction_offset + 1) END,
	oldest_offset = compaction_offset`

func scanCollection(s scanner) (Collection, error) {
	var (
		col                  Collection
		createdAt, updatedAt int64
		minSize, maxAgeMs    sql.NullInt64
		distance             string
		m, efc, efs, noIndex int64
		prio                 int64
		windows              string
		objAge, objBacklog   *int64
		share                *float64
	)
	err := s.Scan(&col.ID, &col.Name, &col.Dimension, &col.LogPosition, &col.CompactionOffset,
		&col.SegmentVersion, &col.ManifestKey, &col.RecordCount, &col.FailureCount,
		msTime{&col.DeadLetteredAt}, msTime{&col.LastCompactedAt}, &createdAt, &updatedAt,
		&col.RetryCount, msTime{&col.RetryAfter},
		msTime{&col.PausedAt}, &col.PauseReason, &col.PausedBy, &minSize, &maxAgeMs,
		&distance, &m, &efc, &efs, &noIndex,
		&prio, &windows, &objAge, &objBacklog, &share,
		msTime{&col.OldestUncompactedAt})
	if err != nil {
		return Collection{}, err
	}
	if err := scanIndex(&col.Index, distance, m, efc, efs, noIndex); err != nil {
		return Collection{}, err
	}
	scanPolicy(&col.Policy, prio, windows, objAge, objBacklog, share)
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
	if strings.TrimSpace(name) == "" {
		return fmt.Errorf("collection name must not be empty: %w", ErrInvalidArgument)
	}
	return checkText("collection name", name, maxNameBytes)
}

// checkText checks s, text that people read (what names it in errors,
// "collection name"): at most maxBytes bytes, valid UTF-8, no control or
// format characters. Errors match ErrInvalidArgument.
func checkText(what, s string, maxBytes int) error {
	switch {
	case len(s) > maxBytes:
		return fmt.Errorf("%s is %d bytes, longer than the limit of %d: %w", what, len(s), maxBytes, ErrInvalidArgument)
	case !utf8.ValidString(s):
		return fmt.Errorf("%s is not valid UTF-8: %w", what, ErrInvalidArgument)
	}
	for i, r := range s {
		if unicode.In(r, unicode.Cc, unicode.Cf) {
			return fmt.Errorf("%s has the control or format character %U at byte %d: %w", what, r, i, ErrInvalidArgument)
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
		if err != nil {
			return err
		}
		return c.auditFromContext(ctx, tx, AuditEntry{
			Action: audit.ActionCreateCollection, CollectionID: col.ID, Target: col.ID,
			After: map[string]any{"name": col.Name, "dimension": col.Dimension, "distance": idx.Distance.String(),
				"index_m": idx.M, "index_ef_construction": idx.EfConstruction, "index_ef_search": idx.EfSearch, "index_disabled": idx.Disabled},
		})
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
	rows, err := c.readQuery(ctx, `SELECT `+collectionColumns+` FROM collections c ORDER BY c.name`)
	if err != nil {
		return nil, c.wrap(err, "list collections")
	}
	defer rows.Close()
	// Sized for the last list's length and some: growing a slice of
	// 10,000 rows of about 400 bytes by doubling copies them twice over.
	hint := c.listedCollections.Load()
	cols := make([]Collection, 0, hint+hint/8)
	defer func() { c.listedCollections.Store(int64(len(cols))) }()
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
// the page, not the number of collections; on an exclusive catalog the same
// page asked again with no write transaction ended between is answered from
// memory (listCache). Errors: ErrInvalidArgument (limit out of range),
// ErrUnavailable.
func (c *Catalog) ListCollectionsPage(ctx context.Context, after string, limit int) ([]Collection, error) {
	if limit <= 0 || limit > maxListCollections {
		return nil, fmt.Errorf("list collections: page of %d, outside 1..%d: %w", limit, maxListCollections, ErrInvalidArgument)
	}
	key := collectionsKey(after, limit)
	if e, ok := c.lists.get(key); ok {
		return cloneCollections(e.colls), nil
	}
	gen := c.lists.begin()
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
	if c.lists != nil {
		c.lists.put(key, gen, listEntry{colls: cloneCollections(cols)})
	}
	return cols, nil
}

// maxListCollections bounds a page of ListCollectionsPage.
const maxListCollections = 10_000

// CountPausedCollections returns the number of collections whose automatic
// compaction is paused, counted in SQL.
func (c *Catalog) CountPausedCollections(ctx context.Context) (int, error) {
	var n int
	if err := c.readRow(ctx, `SELECT COUNT(*) FROM collections WHERE paused_at IS NOT NULL`).Scan(&n); err != nil {
		return 0, c.wrap(err, "count paused collections")
	}
	return n, nil
}

// DeleteCollection deletes a collection with its log rows, versions and jobs,
// and returns the row as it was (so the caller can delete its blobs).
// ErrNotFound when no such id.
func (c *Catalog) DeleteCollection(ctx context.Context, id string) (Collection, error) {
	var col Collection
	del := func(tx *sql.Tx) error {
		var err error
		if col, err = c.queryCollection(ctx, tx, id); err != nil {
			return err
		}
		// The foreign keys cascade too (where on); deleting explicitly keeps
		// the behaviour independent of the foreign-key setting.
		for _, table := range []string{"jobs", "versions", "push_keys", "dead_letter_events"} {
			if _, err := tx.ExecContext(ctx, c.d.q(`DELETE FROM `+table+` WHERE collection_id = ?`), id); err != nil {
				return fmt.Errorf("delete %s rows: %w", table, err)
			}
		}
		if err := c.d.deleteLog(ctx, c, tx, id); err != nil {
			return err
		}
		if _, err = tx.ExecContext(ctx, c.d.q(`DELETE FROM collections WHERE id = ?`), id); err != nil {
			return err
		}
		return c.auditFromContext(ctx, tx, AuditEntry{
			Action: audit.ActionDeleteCollection, CollectionID: id, Target: id,
			Before: map[string]any{"name": col.Name, "dimension": col.Dimension, "log_position": col.LogPosition,
				"compaction_offset": col.CompactionOffset, "segment_version": col.SegmentVersion, "record_count": col.RecordCount},
		})
	}
	run := func() error { return c.d.deleteTx(ctx, c, del) }
	err := run()
	if c.storageFull(err) != nil && c.releaseReserve(ctx, "delete a collection", id) {
		err = run()
	}
	if err != nil {
		return Collection{}, c.wrap(err, "delete collection %s", id)
	}
	c.d.deleted(ctx, c)
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

// existsCollection reports whether a collection with id exists.
func (c *Catalog) existsCollection(ctx context.Context, q querier, id string) (bool, error) {
	var one int
	err := q.QueryRowContext(ctx, c.d.q(`SELECT 1 FROM collections WHERE id = ?`), id).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

package catalog

import (
	"context"
	"fmt"
	"slices"

	"github.com/compactorhq/compactor/internal/collorder"
)

// CollectionSort is an order of ListCollectionsSorted: by name, or by a
// figure with the name breaking ties.
type CollectionSort string

// The orders of ListCollectionsSorted (collorder's names).
const (
	SortByName          CollectionSort = collorder.Name
	SortByBacklog       CollectionSort = collorder.Backlog       // log_position - compaction_offset
	SortByRecords       CollectionSort = collorder.Records       // record_count
	SortByLastCompacted CollectionSort = collorder.LastCompacted // never compacted sorts first
)

// sortKeys are the SQL expressions of the figures (table alias c).
var sortKeys = map[CollectionSort]string{
	SortByBacklog:       `(c.log_position - c.compaction_offset)`,
	SortByRecords:       `c.record_count`,
	SortByLastCompacted: `COALESCE(c.last_compacted_at, 0)`,
}

// CollectionCursor is a position in an order of ListCollectionsSorted: a
// collection's name and, for a figure's order, its figure (the backlog or
// record count, or the last compaction in unix milliseconds, 0 for never).
// It is the status page's cursor too.
type CollectionCursor = collorder.Cursor

// CursorOf is c's position in order s.
func CursorOf(c Collection, s CollectionSort) CollectionCursor {
	return collorder.Of(string(s), c.Name, c.Backlog(), c.RecordCount, c.LastCompactedAt)
}

// CollectionPageQuery selects a page of ListCollectionsSorted.
type CollectionPageQuery struct {
	Sort CollectionSort // "" is SortByName
	// Desc reverses the figure (or, by name, the name); ties of a figure
	// are broken by name ascending either way.
	Desc bool
	// After, when set, starts the page after this position; Before, when
	// set instead, ends it before this position (the previous page).
	After, Before *CollectionCursor
	Limit         int // 1..10,000
}

// CollectionPage is a page of ListCollectionsSorted.
type CollectionPage struct {
	Collections []Collection
	// More: collections follow the page in the direction it was read
	// (after it for After or the first page, before it for Before).
	More bool
}

// ListCollectionsSorted returns a page of collections in q's order, cut in
// SQL by a keyset cursor on (figure, name), so that its cost follows the
// page (and, for a figure's order, a scan of the collection rows' figures
// with no index on them), not a read of every row. Names order by their
// bytes, as ListCollectionsPage's. Errors: ErrInvalidArgument (an unknown
// order, a limit out of range, both cursors), ErrUnavailable.
func (c *Catalog) ListCollectionsSorted(ctx context.Context, q CollectionPageQuery) (CollectionPage, error) {
	if q.Sort == "" {
		q.Sort = SortByName
	}
	key, figure := sortKeys[q.Sort]
	switch {
	case !figure && q.Sort != SortByName:
		return CollectionPage{}, fmt.Errorf("list collections: unknown order %q: %w", q.Sort, ErrInvalidArgument)
	case q.Limit <= 0 || q.Limit > maxListCollections:
		return CollectionPage{}, fmt.Errorf("list collections: page of %d, outside 1..%d: %w", q.Limit, maxListCollections, ErrInvalidArgument)
	case q.After != nil && q.Before != nil:
		return CollectionPage{}, fmt.Errorf("list collections: a page after one position and before another: %w", ErrInvalidArgument)
	}
	// Read backwards for the page before a position, then put it in order.
	back := q.Before != nil
	cur := q.After
	if back {
		cur = q.Before
	}
	// Directions of the figure and of the name, as read.
	figDesc, nameDesc := q.Desc != back, back
	if !figure {
		nameDesc = q.Desc != back
	}
	dir := func(desc bool) (string, string) {
		if desc {
			return "DESC", "<"
		}
		return "ASC", ">"
	}
	nameDir, nameCmp := dir(nameDesc)
	var where string
	var args []any
	order := `c.name ` + nameDir
	if figure {
		figDir, figCmp := dir(figDesc)
		order = key + ` ` + figDir + `, ` + order
		if cur != nil {
			where = `WHERE (` + key + ` ` + figCmp + ` ? OR (` + key + ` = ? AND c.name ` + nameCmp + ` ?))`
			args = append(args, cur.Value, cur.Value, cur.Name)
		}
	} else if cur != nil {
		where = `WHERE c.name ` + nameCmp + ` ?`
		args = append(args, cur.Name)
	}
	// The order and the cut on the collection rows alone, then the
	// columns (with their subquery) of the page's rows only.
	query := `SELECT ` + collectionColumns + ` FROM collections c WHERE c.id IN (
			SELECT c.id FROM collections c ` + where + ` ORDER BY ` + order + ` LIMIT ?)
		ORDER BY ` + order
	args = append(args, q.Limit+1)
	rows, err := c.readQuery(ctx, query, args...)
	if err != nil {
		return CollectionPage{}, c.wrap(err, "list collections by %s", q.Sort)
	}
	defer rows.Close()
	var page CollectionPage
	for rows.Next() {
		col, err := scanCollection(rows)
		if err != nil {
			return CollectionPage{}, c.wrap(err, "list collections by %s", q.Sort)
		}
		page.Collections = append(page.Collections, col)
	}
	if err := rows.Err(); err != nil {
		return CollectionPage{}, c.wrap(err, "list collections by %s", q.Sort)
	}
	if len(page.Collections) > q.Limit {
		page.Collections, page.More = page.Collections[:q.Limit], true
	}
	if back {
		slices.Reverse(page.Collections)
	}
	return page, nil
}

// CountCollections returns the number of collections, counted in SQL.
func (c *Catalog) CountCollections(ctx context.Context) (int, error) {
	var n int
	if err := c.readRow(ctx, `SELECT COUNT(*) FROM collections`).Scan(&n); err != nil {
		return 0, c.wrap(err, "count collections")
	}
	return n, nil
}

// StorageFiguresOf is ListStorageFigures for the collections ids (at most
// 10,000) alone: the figures of a page.
func (c *Catalog) StorageFiguresOf(ctx context.Context, ids []string) (map[string]StorageFigures, error) {
	if len(ids) > maxListCollections {
		return nil, fmt.Errorf("storage figures of %d collections, more than %d: %w", len(ids), maxListCollections, ErrInvalidArgument)
	}
	if len(ids) == 0 {
		return map[string]StorageFigures{}, nil
	}
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	return c.storageFigures(ctx, `WHERE v.collection_id IN (`+placeholders(len(ids))+`)`, args...)
}

// CollectionSummary is SummarizeCollections' account of the collections as
// a whole.
type CollectionSummary struct {
	Count   int   // collections
	Backlog int64 // uncompacted records of all of them
	// Notable are the collections that are dead-lettered or have a
	// freshness objective (so may be at risk of breaking it), by name.
	Notable []Collection
}

// SummarizeCollections counts the collections and their backlog in SQL and
// reads the notable ones (CollectionSummary.Notable): two queries, whose
// cost grows with the notable collections, not with every collection's
// row being read. Errors: ErrUnavailable.
func (c *Catalog) SummarizeCollections(ctx context.Context) (CollectionSummary, error) {
	var s CollectionSummary
	if err := c.readRow(ctx, `SELECT COUNT(*), CAST(COALESCE(SUM(log_position - compaction_offset), 0) AS BIGINT) FROM collections`).Scan(&s.Count, &s.Backlog); err != nil {
		return CollectionSummary{}, c.wrap(err, "summarize collections")
	}
	rows, err := c.readQuery(ctx, `SELECT `+collectionColumns+` FROM collections c
		WHERE c.dead_lettered_at IS NOT NULL OR c.objective_max_age_ms > 0 OR c.objective_max_backlog > 0
		ORDER BY c.name`)
	if err != nil {
		return CollectionSummary{}, c.wrap(err, "list notable collections")
	}
	defer rows.Close()
	for rows.Next() {
		col, err := scanCollection(rows)
		if err != nil {
			return CollectionSummary{}, c.wrap(err, "list notable collections")
		}
		s.Notable = append(s.Notable, col)
	}
	if err := rows.Err(); err != nil {
		return CollectionSummary{}, c.wrap(err, "list notable collections")
	}
	return s, nil
}

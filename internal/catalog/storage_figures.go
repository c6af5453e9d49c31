package catalog

import "context"

// StorageFigures are what a collection's committed versions hold, as the
// status page shows them.
type StorageFigures struct {
	SegmentBytes int64 // bytes of the current version's blocks (0 before the figure was recorded)
	BlockCount   int   // blocks of the current version
	VersionsKept int   // version rows: the current one, retained ones, and retired ones GC has not deleted yet
}

// ListStorageFigures returns the storage figures of every collection with
// at least one committed version, by collection id, in one query.
// Errors: ErrUnavailable.
func (c *Catalog) ListStorageFigures(ctx context.Context) (map[string]StorageFigures, error) {
	return c.storageFigures(ctx, "")
}

// storageFigures is ListStorageFigures of the version rows that where (a
// WHERE clause on table alias v, "" for all) selects.
func (c *Catalog) storageFigures(ctx context.Context, where string, args ...any) (map[string]StorageFigures, error) {
	rows, err := c.readQuery(ctx, `SELECT v.collection_id, COUNT(*),
			SUM(CASE WHEN v.version = c.segment_version THEN v.segment_bytes ELSE 0 END),
			SUM(CASE WHEN v.version = c.segment_version THEN v.block_count ELSE 0 END)
		FROM versions v JOIN collections c ON c.id = v.collection_id `+where+`
		GROUP BY v.collection_id`, args...)
	if err != nil {
		return nil, c.wrap(err, "list storage figures")
	}
	defer rows.Close()
	out := make(map[string]StorageFigures)
	for rows.Next() {
		var (
			id string
			f  StorageFigures
		)
		if err := rows.Scan(&id, &f.VersionsKept, &f.SegmentBytes, &f.BlockCount); err != nil {
			return nil, c.wrap(err, "list storage figures")
		}
		out[id] = f
	}
	if err := rows.Err(); err != nil {
		return nil, c.wrap(err, "list storage figures")
	}
	return out, nil
}

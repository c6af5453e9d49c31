package catalog

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"

	"github.com/compactorhq/compactor/internal/materialize"
)

// The log tail indexed by record id (migration 20261130130002): each log
// row carries record_id, the id of its operation record as bytes (so that
// SQL orders ids as Go and the segments do, byte by byte), and the index
// (collection_id, record_id, log_offset) lets a read fetch the tail rows of
// some ids, or of an id range, without reading the rest of the tail.

// tailIDChunk is the most ids one query of ReadTailIDs binds.
const tailIDChunk = 500

// backfillChunk is the number of log rows one transaction of
// backfillRecordIDs fills.
const backfillChunk = 1000

// Tail is log tail rows of a collection read together with its row, in one
// consistent read transaction.
type Tail struct {
	// Collection is the collection's row in the transaction of the read:
	// Ops hold offsets in (Collection.CompactionOffset, the upper bound].
	Collection Collection
	// Ops are the operation records read, ordered by record id, then by
	// log offset, each with its Offset set.
	Ops []materialize.OperationRecord
	// More (range reads only): the read stopped at TailRange.MaxRows; ids
	// after the last id of Ops, up to the range's end, were not read. The
	// last id's rows are all there.
	More bool
}

// TailRange selects the log tail rows of a record id range.
type TailRange struct {
	// After and UpTo: record ids in (After, UpTo]; UpTo "" with Unbounded
	// set: every id after After.
	After, UpTo string
	Unbounded   bool
	// UpToOffset: only rows with log offsets at most this; 0: up to the
	// collection's log position in the read's transaction. A reader passes
	// the log position of the snapshot it reads.
	UpToOffset int64
	// MaxRows bounds the rows read: the read stops at the first id
	// boundary after MaxRows rows (so it may return more when the last id
	// has several rows), and sets Tail.More. 0: no bound.
	MaxRows int
}

// ReadTailIDs returns, from one consistent read transaction, the
// collection's row and the rows of its uncompacted log tail (offsets in
// (CompactionOffset, LogPosition]) whose record ids are among ids (in any
// order; duplicates are read once), ordered by id then offset. Errors:
// ErrNotFound, a log row that does not decode (matching
// materialize.ErrCorruptRecord, naming its offset), driver errors. On an
// exclusive catalog, a collection read with an empty tail is answered
// without a transaction until the next write (tailRows).
func (c *Catalog) ReadTailIDs(ctx context.Context, collectionID string, ids []string) (Tail, error) {
	ids = slices.Clone(ids)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	t, err := c.readTail(ctx, collectionID, 0, func(tx *sql.Tx, t *Tail, from, to int64) error {
		if len(ids) == 0 {
			return nil
		}
		for start := 0; start < len(ids); start += tailIDChunk {
			chunk := ids[start:min(start+tailIDChunk, len(ids))]
			args := make([]any, 0, 3+len(chunk))
			args = append(args, collectionID, from, to)
			for _, id := range chunk {
				args = append(args, []byte(id))
			}
			ops, err := c.queryLog(ctx, tx, `SELECT log_offset, record FROM log
				WHERE collection_id = ? AND log_offset > ? AND log_offset <= ? AND record_id IN (`+placeholders(len(chunk))+`)
				ORDER BY record_id, log_offset`, args...)
			if err != nil {
				return err
			}
			t.Ops = append(t.Ops, ops...)
		}
		unindexed, err := c.queryUnindexed(ctx, tx, collectionID, from, to, func(id string) bool {
			_, found := slices.BinarySearch(ids, id)
			return found
		})
		if err != nil {
			return err
		}
		t.Ops = mergeTail(t.Ops, unindexed)
		return nil
	})
	if err != nil {
		return Tail{}, c.wrap(err, "read log tail of collection %s by record id", collectionID)
	}
	return t, nil
}

// tailRestOfID reads the log tail rows of one record id after a log
// offset, up to another: the rest of the last id of a page cut by MaxRows.
// The unary + keeps the offset bounds off the primary key
// (collection_id, log_offset): without table statistics SQLite's planner
// otherwise walks that key over every tail row after the offset (1.3 s
// per page of a 1,000,000-row tail) instead of seeking the record-id index
// (collection_id, record_id, log_offset), which holds the rows of one id in
// offset order (60 µs). PostgreSQL takes the same text (a unary + on a
// bigint) and plans it from its own statistics.
const tailRestOfID = `SELECT log_offset, record FROM log
	WHERE collection_id = ? AND record_id = ? AND +log_offset > ? AND +log_offset <= ?
	ORDER BY record_id, log_offset`

// ReadTailRange returns, from one consistent read transaction, the
// collection's row and the rows of its uncompacted log tail (offsets in
// (CompactionOffset, r.UpToOffset or LogPosition]) whose record ids fall in
// r's range, ordered by id then offset, at most about r.MaxRows of them (see
// TailRange). Errors: ErrNotFound, ErrInvalidArgument for an empty range
// (UpTo <= After) or a negative bound, a log row that does not decode
// (matching materialize.ErrCorruptRecord, naming its offset), driver
// errors. An empty tail is remembered as by ReadTailIDs.
func (c *Catalog) ReadTailRange(ctx context.Context, collectionID string, r TailRange) (Tail, error) {
	switch {
	case r.MaxRows < 0 || r.UpToOffset < 0:
		return Tail{}, fmt.Errorf("read log tail of collection %s: negative bound (%d rows, offset %d): %w", collectionID, r.MaxRows, r.UpToOffset, ErrInvalidArgument)
	case !r.Unbounded && r.UpTo <= r.After:
		return Tail{}, fmt.Errorf("read log tail of collection %s: empty id range (%q, %q]: %w", collectionID, r.After, r.UpTo, ErrInvalidArgument)
	}
	t, err := c.readTail(ctx, collectionID, r.UpToOffset, func(tx *sql.Tx, t *Tail, from, to int64) error {
		var err error
		query := `SELECT log_offset, record FROM log
			WHERE collection_id = ? AND log_offset > ? AND log_offset <= ? AND record_id > ?`
		args := []any{collectionID, from, to, []byte(r.After)}
		if !r.Unbounded {
			query += ` AND record_id <= ?`
			args = append(args, []byte(r.UpTo))
		}
		query += ` ORDER BY record_id, log_offset`
		if r.MaxRows > 0 {
			query += ` LIMIT ?`
			args = append(args, r.MaxRows)
		}
		if t.Ops, err = c.queryLog(ctx, tx, query, args...); err != nil {
			return err
		}
		// Cut by MaxRows: read the rest of the last id's rows, so that
		// every id returned is complete.
		if r.MaxRows > 0 && len(t.Ops) == r.MaxRows {
			t.More = true
			last := t.Ops[len(t.Ops)-1]
			rest, err := c.queryLog(ctx, tx, tailRestOfID, collectionID, []byte(last.ID), last.Offset, to)
			if err != nil {
				return err
			}
			t.Ops = append(t.Ops, rest...)
		}
		// The range the indexed read covers completely.
		after, upTo, unbounded := r.After, r.UpTo, r.Unbounded
		if t.More {
			upTo, unbounded = t.Ops[len(t.Ops)-1].ID, false
		}
		unindexed, err := c.queryUnindexed(ctx, tx, collectionID, from, to, func(id string) bool {
			return id > after && (unbounded || id <= upTo)
		})
		if err != nil {
			return err
		}
		t.Ops = mergeTail(t.Ops, unindexed)
		return nil
	})
	if err != nil {
		return Tail{}, c.wrap(err, "read log tail of collection %s from record id %q", collectionID, r.After)
	}
	return t, nil
}

// readTail is the one entry of the tail reads: in one consistent read
// transaction it reads the collection's row into a Tail's Collection, then
// calls read with the transaction, that Tail, and the offsets (from, to] of
// the uncompacted tail: from the row's CompactionOffset, to its LogPosition,
// or upToOffset when that is positive and lower. read fills t's other
// fields; it is not called when (from, to] is empty. On an exclusive
// catalog a row read with an empty tail is remembered, and answers without
// a transaction until the next write transaction ends (tailRows). Errors
// (not wrapped): ErrNotFound, read's, driver errors.
func (c *Catalog) readTail(ctx context.Context, collectionID string, upToOffset int64, read func(tx *sql.Tx, t *Tail, from, to int64) error) (Tail, error) {
	if coll, ok := c.tails.get(collectionID); ok {
		return Tail{Collection: coll}, nil
	}
	gen := c.tails.begin()
	var t Tail
	err := c.readTxOn(ctx, c.tail, func(tx *sql.Tx) error {
		var err error
		if t.Collection, err = c.queryCollection(ctx, tx, collectionID); err != nil {
			return err
		}
		from, to := t.Collection.CompactionOffset, t.Collection.LogPosition
		if from == to {
			c.tails.put(gen, t.Collection)
		}
		if upToOffset > 0 {
			to = min(to, upToOffset)
		}
		if from >= to {
			return nil
		}
		return read(tx, &t, from, to)
	})
	return t, err
}

// queryUnindexed returns the tail rows in offsets (from, to] whose
// record_id is not filled (appended by a process older than the column,
// before backfillRecordIDs filled them) and whose id keep accepts, decoded
// and ordered by id then offset. The partial index log_record_id_missing
// makes it free when there are none, as after Open.
func (c *Catalog) queryUnindexed(ctx context.Context, tx *sql.Tx, collectionID string, from, to int64, keep func(id string) bool) ([]materialize.OperationRecord, error) {
	ops, err := c.queryLog(ctx, tx, `SELECT log_offset, record FROM log
		WHERE collection_id = ? AND record_id IS NULL AND log_offset > ? AND log_offset <= ?
		ORDER BY log_offset`, collectionID, from, to)
	if err != nil {
		return nil, err
	}
	ops = slices.DeleteFunc(ops, func(op materialize.OperationRecord) bool { return !keep(op.ID) })
	slices.SortStableFunc(ops, func(a, b materialize.OperationRecord) int { return strings.Compare(a.ID, b.ID) })
	return ops, nil
}

// mergeTail merges two lists of operation records, each ordered by id then
// offset, into one.
func mergeTail(a, b []materialize.OperationRecord) []materialize.OperationRecord {
	if len(b) == 0 {
		return a
	}
	out := append(a, b...)
	slices.SortFunc(out, func(x, y materialize.OperationRecord) int {
		return cmp.Or(strings.Compare(x.ID, y.ID), cmp.Compare(x.Offset, y.Offset))
	})
	return out
}

// recordIDOf returns the record id of an encoded operation record
// (materialize.OperationRecord.MarshalBinary: a version byte, the op byte,
// the id's length as a uvarint, the id) without decoding the rest. The
// result aliases b.
func recordIDOf(b []byte) ([]byte, error) {
	if len(b) < 3 {
		return nil, fmt.Errorf("%w: %d bytes, too short for a record id", materialize.ErrCorruptRecord, len(b))
	}
	n, k := binary.Uvarint(b[2:])
	if k <= 0 || n > uint64(len(b)-2-k) {
		return nil, fmt.Errorf("%w: record id length out of range", materialize.ErrCorruptRecord)
	}
	return b[2+k : 2+k+int(n)], nil
}

// backfillRecordIDs fills record_id on the log rows appended before the
// column existed (a catalog migrated from before 20261130130002), in
// transactions of backfillChunk rows, decoding each stored record. It is
// idempotent and resumable: a row once filled is not read again, and a run
// cut short is finished by the next Open. A row that does not decode keeps
// a NULL record_id (reads decode it and report it corrupt). It returns the
// number of rows filled.
func (c *Catalog) backfillRecordIDs(ctx context.Context) (int, error) {
	filled := 0
	var lastCollection string
	var lastOffset int64
	for {
		n, more := 0, false
		err := c.writeTx(ctx, func(tx *sql.Tx) error {
			rows, err := tx.QueryContext(ctx, c.d.q(`SELECT collection_id, log_offset, record FROM log
				WHERE record_id IS NULL AND (collection_id > ? OR collection_id = ? AND log_offset > ?)
				ORDER BY collection_id, log_offset LIMIT ?`), lastCollection, lastCollection, lastOffset, backfillChunk)
			if err != nil {
				return err
			}
			type fill struct {
				collection string
				offset     int64
				id         []byte
			}
			var fills []fill
			seen := 0
			for rows.Next() {
				var (
					f      fill
					record []byte
				)
				if err := rows.Scan(&f.collection, &f.offset, &record); err != nil {
					rows.Close()
					return err
				}
				seen++
				lastCollection, lastOffset = f.collection, f.offset
				var op materialize.OperationRecord
				if err := op.UnmarshalBinary(record); err != nil {
					c.log.WarnContext(ctx, "log row does not decode; its record id stays unindexed", "collection", f.collection, "offset", f.offset, "err", err)
					continue
				}
				f.id = []byte(op.ID)
				fills = append(fills, f)
			}
			if err := rows.Close(); err != nil {
				return err
			}
			if err := rows.Err(); err != nil {
				return err
			}
			more = seen == backfillChunk
			if len(fills) == 0 {
				return nil
			}
			stmt, err := tx.PrepareContext(ctx, c.d.q(`UPDATE log SET record_id = ? WHERE collection_id = ? AND log_offset = ? AND record_id IS NULL`))
			if err != nil {
				return err
			}
			defer stmt.Close()
			for _, f := range fills {
				if _, err := stmt.ExecContext(ctx, f.id, f.collection, f.offset); err != nil {
					return err
				}
			}
			n = len(fills)
			return nil
		})
		if err != nil {
			return filled, c.wrap(err, "fill record ids of log rows after collection %s offset %d", lastCollection, lastOffset)
		}
		filled += n
		if !more {
			return filled, nil
		}
	}
}

package compaction

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/materialize"
	"github.com/compactorhq/compactor/internal/segment"
)

// MaxReadIDs is the most ids one GetRecords call accepts.
const MaxReadIDs = 10_000

// readAttempts bounds the retries of a read whose segment version GC
// removed while it read (it then reads the newer version).
const readAttempts = 3

// retryRead runs read, again on a fresh view when a blob of the version it
// read is missing (a *segment.MissingError) and that version is no longer
// current: GC may have collected it. A blob missing from the version that
// is still current is data loss (see dataLoss), returned at once. Errors
// after the last attempt are returned. It is defence in depth: GC deletes
// a version's blobs only Config.GCGrace after the version stopped being
// retained, and never while a read of this process uses it, so a retry
// means a read on another replica ran longer than the grace.
func (c *Compactor) retryRead(ctx context.Context, collectionID string, read func() (ReadResult, error)) (ReadResult, error) {
	for attempt := 1; ; attempt++ {
		res, err := read()
		if err == nil || !errors.Is(err, segment.ErrNotExist) {
			return res, err
		}
		if lost, ok := c.dataLoss(ctx, collectionID, err); ok {
			return res, lost
		}
		if attempt == readAttempts {
			return res, err
		}
		c.readRetries.Add(1)
		c.logger.Warn("read retried on the current version: a blob of the version it read is gone", "collection", collectionID, "attempt", attempt, "err", err)
	}
}

// dataLoss re-checks a missing blob (a *segment.MissingError in err) against
// the collection's current version, read again from the catalog: when that
// version is the manifest that is missing or lists the blob, retrying
// cannot bring it back, and dataLoss returns err with the missing blob as a
// *segment.CorruptError (data loss naming the key, not transient) and true.
// Otherwise (no missing blob, another version current now, the re-check
// itself failed) it returns err and false.
func (c *Compactor) dataLoss(ctx context.Context, collectionID string, err error) (error, bool) {
	var missing *segment.MissingError
	if !errors.As(err, &missing) {
		return err, false
	}
	coll, cerr := c.cat.GetCollection(ctx, collectionID)
	if cerr != nil || coll.SegmentVersion == 0 {
		return err, false
	}
	if coll.ManifestKey != missing.Key {
		m, merr := c.seg.ReadManifest(ctx, coll.ManifestKey)
		if merr != nil || !m.References(missing.Key) {
			return err, false
		}
	}
	return missing.DataLoss(), true
}

// ReadResult is one answer of the read path.
type ReadResult struct {
	Records []materialize.Record
	// Next is the id to pass as after for the next page; "" when none.
	Next string
	// SegmentVersion and LogPosition say what the read reflects: that
	// segment version plus the log up to that offset.
	SegmentVersion int64
	LogPosition    int64
}

// GetRecords returns the materialized records of collectionID with the given
// ids, in id order, each id at most once; ids that are absent are left out.
// It reads, in one catalog snapshot, the collection's row and the log tail
// rows of those ids only (the log is indexed by record id), then the
// segment blocks whose ranges hold an id, and applies the tail with the
// materialization rules: its cost follows the number of ids, not the tail
// or the collection. Errors: catalog.ErrNotFound, catalog.ErrInvalidArgument
// for more than MaxReadIDs ids, storage errors; damaged stored data (a
// corrupt block, manifest or log row) is an error CorruptKind recognises,
// counted in compactor_corrupt_blocks_total.
func (c *Compactor) GetRecords(ctx context.Context, collectionID string, ids []string) (ReadResult, error) {
	res, err := c.retryRead(ctx, collectionID, func() (ReadResult, error) { return c.getRecords(ctx, collectionID, ids) })
	c.noteCorrupt("read", collectionID, err)
	return res, err
}

func (c *Compactor) getRecords(ctx context.Context, collectionID string, ids []string) (ReadResult, error) {
	if len(ids) > MaxReadIDs {
		return ReadResult{}, fmt.Errorf("get records of %s: %d ids requested, the limit is %d: %w", collectionID, len(ids), MaxReadIDs, catalog.ErrInvalidArgument)
	}
	ids = slices.Clone(ids)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	tail, err := c.cat.ReadTailIDs(ctx, collectionID, ids)
	if err != nil {
		return ReadResult{}, fmt.Errorf("get records of %s: %w", collectionID, err)
	}
	coll := tail.Collection
	// The version was current at the snapshot, so it was not retired then:
	// GC deletes it GCGrace after it is retired at the earliest, and never
	// while this pin holds.
	release := c.pins.pin(collectionID, coll.ManifestKey, false)
	defer release()
	m, err := c.manifest(ctx, coll)
	if err != nil {
		return ReadResult{}, fmt.Errorf("get records of %s: %w", collectionID, err)
	}
	base, err := c.seg.Get(ctx, m, ids)
	if err != nil {
		return ReadResult{}, fmt.Errorf("get records of %s: %w", collectionID, err)
	}
	out := make([]materialize.Record, 0, len(ids))
	viewOfIDs(ids, base, tail.Ops, func(r *materialize.Record) { out = append(out, *r) })
	return result(coll, out, ""), nil
}

// viewOfIDs passes to fn, in the order of ids (sorted, unique), the record
// each id has in the view: its record in base (the segment's, by id) with
// the tail's operation records of the id (ops: sorted by id, then offset)
// applied by the materialization rules; an id absent from the view is
// skipped. A record the tail does not touch is base's, shared: fn must
// not modify it.
func viewOfIDs(ids []string, base map[string]materialize.Record, ops []materialize.OperationRecord, fn func(*materialize.Record)) {
	for _, id := range ids {
		var cur *materialize.Record
		if r, ok := base[id]; ok {
			cur = &r
		}
		n := 0
		for n < len(ops) && ops[n].ID == id {
			n++
		}
		if n > 0 {
			cur = materialize.Apply(cur, ops[:n])
			ops = ops[n:]
		}
		if cur != nil {
			fn(cur)
		}
	}
}

// manifest reads the manifest of coll's segment version, shared through the
// decoded block cache (it must not be modified); nil before the first
// compaction.
func (c *Compactor) manifest(ctx context.Context, coll catalog.Collection) (*segment.Manifest, error) {
	if coll.SegmentVersion == 0 {
		return nil, nil
	}
	m, err := c.seg.ReadManifestShared(ctx, coll.ManifestKey)
	if err != nil {
		return nil, fmt.Errorf("read manifest of version %d: %w", coll.SegmentVersion, err)
	}
	return m, nil
}

func result(coll catalog.Collection, recs []materialize.Record, next string) ReadResult {
	return ReadResult{Records: recs, Next: next, SegmentVersion: coll.SegmentVersion, LogPosition: coll.LogPosition}
}

// ListRecords returns up to limit materialized records of collectionID with
// id > after, in id order, and the id to pass as after for the next page (""
// when there is none). limit must be in 1..MaxReadIDs
// (catalog.ErrInvalidArgument otherwise).
//
// A page reads what it returns and little more: the segment's next records
// after the cursor (Store.Scan reads the blocks from the cursor on and stops
// after the page), and the log tail rows whose ids fall between the cursor
// and the last of those records (the log is indexed by record id), merged
// with the materialization rules. Its cost follows the page, not the tail
// or the collection. Every page reflects one snapshot: a segment version and
// the log up to the log position the result names.
func (c *Compactor) ListRecords(ctx context.Context, collectionID, after string, limit int) (ReadResult, error) {
	res, err := c.retryRead(ctx, collectionID, func() (ReadResult, error) { return c.listRecords(ctx, collectionID, after, limit) })
	c.noteCorrupt("read", collectionID, err)
	return res, err
}

// pageAttempts bounds the times a page is read again because a compaction
// committed while it was read (see listRecords).
const pageAttempts = 8

func (c *Compactor) listRecords(ctx context.Context, collectionID, after string, limit int) (ReadResult, error) {
	if limit <= 0 || limit > MaxReadIDs {
		return ReadResult{}, fmt.Errorf("list records of %s: page size %d is outside 1..%d: %w", collectionID, limit, MaxReadIDs, catalog.ErrInvalidArgument)
	}
	coll, err := c.cat.GetCollection(ctx, collectionID)
	if err != nil {
		return ReadResult{}, fmt.Errorf("list records of %s: %w", collectionID, err)
	}
	for attempt := 1; ; attempt++ {
		res, moved, err := c.listPage(ctx, coll, after, limit)
		if err != nil {
			return ReadResult{}, fmt.Errorf("list records of %s: %w", collectionID, err)
		}
		if moved == nil {
			return res, nil
		}
		if attempt == pageAttempts {
			return ReadResult{}, fmt.Errorf("list records of %s: %d compactions committed while the page was read; retry: %w", collectionID, attempt, catalog.ErrUnavailable)
		}
		coll = *moved
	}
}

// listPage reads one page of the snapshot coll (its segment version and the
// log up to its log position). When a compaction commits before the page's
// log tail rows are read (they may then be purged), it returns the
// collection's new row as moved, and the page is to be read again on it.
func (c *Compactor) listPage(ctx context.Context, coll catalog.Collection, after string, limit int) (res ReadResult, moved *catalog.Collection, err error) {
	release := c.pins.pin(coll.ID, coll.ManifestKey, false)
	defer release()
	m, err := c.manifest(ctx, coll)
	if err != nil {
		return ReadResult{}, nil, err
	}
	// One record more than asked tells whether a next page exists.
	need := limit + 1
	out := make([]materialize.Record, 0, need)
	cursor := after
	// seg holds segment records after cursor not merged yet, in id order;
	// segEnd says that the segment has no record after seg's last (after
	// cursor when seg is empty).
	var seg []materialize.Record
	segEnd := false
	for len(out) < need {
		if len(seg) == 0 && !segEnd {
			want := need - len(out)
			err := c.seg.Scan(ctx, m, cursor, func(r materialize.Record) bool {
				seg = append(seg, r)
				return len(seg) < want
			})
			if err != nil {
				return ReadResult{}, nil, err
			}
			segEnd = len(seg) < want
		}
		// The tail rows of the ids up to the last segment record read
		// (every id when the segment has no more).
		q := catalog.TailRange{After: cursor, Unbounded: segEnd, UpToOffset: coll.LogPosition, MaxRows: max(need-len(out), minTailRows)}
		if !segEnd {
			q.UpTo = seg[len(seg)-1].ID
		}
		tail, err := c.cat.ReadTailRange(ctx, coll.ID, q)
		if err != nil {
			return ReadResult{}, nil, err
		}
		if now := tail.Collection; now.SegmentVersion != coll.SegmentVersion || now.CompactionOffset != coll.CompactionOffset {
			return ReadResult{}, &now, nil
		}
		// Both sources are complete up to bound: the segment up to its
		// last record read, the tail up to its last id when cut.
		bound, unbounded := q.UpTo, q.Unbounded
		if tail.More {
			if last := tail.Ops[len(tail.Ops)-1].ID; unbounded || last < bound {
				bound, unbounded = last, false
			}
		}
		n := 0 // segment records merged
		ops := tail.Ops
		for n < len(seg) && (unbounded || seg[n].ID <= bound) || len(ops) > 0 {
			var (
				id  string
				cur *materialize.Record
			)
			switch {
			case n < len(seg) && (unbounded || seg[n].ID <= bound) && (len(ops) == 0 || seg[n].ID <= ops[0].ID):
				id, cur = seg[n].ID, &seg[n]
				n++
			default:
				id = ops[0].ID
			}
			k := 0
			for k < len(ops) && ops[k].ID == id {
				k++
			}
			if k == 0 {
				out = append(out, *cur) // untouched by the tail: as stored
				continue
			}
			if r := materialize.Apply(cur, ops[:k]); r != nil {
				out = append(out, *r)
			}
			ops = ops[k:]
		}
		seg = seg[n:]
		if unbounded {
			break
		}
		cursor = bound
	}
	if len(out) > limit {
		out = out[:limit]
		return result(coll, out, out[limit-1].ID), nil, nil
	}
	return result(coll, out, ""), nil, nil
}

// minTailRows is the least number of log tail rows a page reads at a time.
const minTailRows = 128

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

// view is a consistent snapshot of a collection for reading: its segment
// version and the log tail after that version's offset, grouped by id.
type view struct {
	release  func() // unpins the version; called when the read ends
	coll     catalog.Collection
	manifest *segment.Manifest // nil before the first compaction
	tail     map[string][]materialize.OperationRecord
}

// readAttempts bounds the retries of a read whose segment version GC
// removed while it read (it then reads the newer version).
const readAttempts = 3

// retryRead runs read, again on a fresh view when a blob of its version was
// deleted meanwhile (segment.ErrNotExist). Errors after the last attempt are
// returned. It is defence in depth: GC deletes a version's blobs only
// Config.GCGrace after the version stopped being retained, and never while
// a read of this process uses it, so a retry means a read on another
// replica ran longer than the grace, or blobs went missing otherwise.
func (c *Compactor) retryRead(collectionID string, read func() (ReadResult, error)) (ReadResult, error) {
	for attempt := 1; ; attempt++ {
		res, err := read()
		if err == nil || attempt == readAttempts || !errors.Is(err, segment.ErrNotExist) {
			return res, err
		}
		c.readRetries.Add(1)
		c.logger.Warn("read retried on the current version: a blob of the version it read is gone", "collection", collectionID, "attempt", attempt, "err", err)
	}
}

func (c *Compactor) openView(ctx context.Context, collectionID string) (*view, error) {
	coll, tail, err := c.cat.ReadView(ctx, collectionID)
	if err != nil {
		return nil, err
	}
	v := &view{coll: coll, tail: make(map[string][]materialize.OperationRecord)}
	// The version was current at the snapshot, so it was not retired then:
	// GC deletes it GCGrace after it is retired at the earliest, and never
	// while this pin holds.
	v.release = c.pins.pin(collectionID, coll.ManifestKey, false)
	if coll.SegmentVersion > 0 {
		if v.manifest, err = c.seg.ReadManifest(ctx, coll.ManifestKey); err != nil {
			v.release()
			return nil, fmt.Errorf("read manifest of version %d: %w", coll.SegmentVersion, err)
		}
	}
	for _, op := range tail {
		v.tail[op.ID] = append(v.tail[op.ID], op)
	}
	return v, nil
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
// It reads the current segment version and applies the uncompacted log tail
// with the materialization rules. Errors: catalog.ErrNotFound, catalog.ErrInvalidArgument
// for more than MaxReadIDs ids, storage errors; damaged stored data (a
// corrupt block, manifest or log row) is an error CorruptKind recognises,
// counted in compactor_corrupt_blocks_total.
func (c *Compactor) GetRecords(ctx context.Context, collectionID string, ids []string) (ReadResult, error) {
	res, err := c.retryRead(collectionID, func() (ReadResult, error) { return c.getRecords(ctx, collectionID, ids) })
	c.noteCorrupt("read", collectionID, err)
	return res, err
}

func (c *Compactor) getRecords(ctx context.Context, collectionID string, ids []string) (ReadResult, error) {
	if len(ids) > MaxReadIDs {
		return ReadResult{}, fmt.Errorf("get records of %s: %d ids requested, the limit is %d: %w", collectionID, len(ids), MaxReadIDs, catalog.ErrInvalidArgument)
	}
	v, err := c.openView(ctx, collectionID)
	if err != nil {
		return ReadResult{}, fmt.Errorf("get records of %s: %w", collectionID, err)
	}
	defer v.release()
	ids = slices.Clone(ids)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	base, err := c.seg.Get(ctx, v.manifest, ids)
	if err != nil {
		return ReadResult{}, fmt.Errorf("get records of %s: %w", collectionID, err)
	}
	out := make([]materialize.Record, 0, len(ids))
	for _, id := range ids {
		var cur *materialize.Record
		if r, ok := base[id]; ok {
			cur = &r
		}
		if r := materialize.Apply(cur, v.tail[id]); r != nil {
			out = append(out, *r)
		}
	}
	return v.result(out, ""), nil
}

func (v *view) result(recs []materialize.Record, next string) ReadResult {
	return ReadResult{Records: recs, Next: next, SegmentVersion: v.coll.SegmentVersion, LogPosition: v.coll.LogPosition}
}

// ListRecords returns up to limit materialized records of collectionID with
// id > after, in id order, and the id to pass as after for the next page (""
// when there is none). limit must be in 1..MaxReadIDs
// (catalog.ErrInvalidArgument otherwise).
func (c *Compactor) ListRecords(ctx context.Context, collectionID, after string, limit int) (ReadResult, error) {
	res, err := c.retryRead(collectionID, func() (ReadResult, error) { return c.listRecords(ctx, collectionID, after, limit) })
	c.noteCorrupt("read", collectionID, err)
	return res, err
}

func (c *Compactor) listRecords(ctx context.Context, collectionID, after string, limit int) (ReadResult, error) {
	if limit <= 0 || limit > MaxReadIDs {
		return ReadResult{}, fmt.Errorf("list records of %s: page size %d is outside 1..%d: %w", collectionID, limit, MaxReadIDs, catalog.ErrInvalidArgument)
	}
	v, err := c.openView(ctx, collectionID)
	if err != nil {
		return ReadResult{}, fmt.Errorf("list records of %s: %w", collectionID, err)
	}
	defer v.release()
	// The tail's ids after the cursor, materialized against the segment.
	var tailIDs []string
	for id := range v.tail {
		if id > after {
			tailIDs = append(tailIDs, id)
		}
	}
	slices.Sort(tailIDs)
	base, err := c.seg.Get(ctx, v.manifest, tailIDs)
	if err != nil {
		return ReadResult{}, fmt.Errorf("list records of %s: %w", collectionID, err)
	}
	overlay := make(map[string]*materialize.Record, len(tailIDs))
	for _, id := range tailIDs {
		var cur *materialize.Record
		if r, ok := base[id]; ok {
			cur = &r
		}
		overlay[id] = materialize.Apply(cur, v.tail[id])
	}

	// Merge the segment's records with the overlay in id order; collect one
	// record more than asked to know whether a next page exists.
	out := make([]materialize.Record, 0, limit+1)
	full := func() bool { return len(out) > limit }
	next := 0 // index into tailIDs
	emitTailBefore := func(id string, inclusive bool) {
		for next < len(tailIDs) && !full() && (tailIDs[next] < id || inclusive && tailIDs[next] == id) {
			if _, inSegment := base[tailIDs[next]]; !inSegment {
				if r := overlay[tailIDs[next]]; r != nil {
					out = append(out, *r)
				}
			}
			next++
		}
	}
	err = c.seg.Scan(ctx, v.manifest, after, func(r materialize.Record) bool {
		emitTailBefore(r.ID, false)
		if full() {
			return false
		}
		if o, touched := overlay[r.ID]; touched {
			if next < len(tailIDs) && tailIDs[next] == r.ID {
				next++
			}
			if o != nil {
				out = append(out, *o)
			}
		} else {
			out = append(out, r)
		}
		return !full()
	})
	if err != nil {
		return ReadResult{}, fmt.Errorf("list records of %s: %w", collectionID, err)
	}
	for next < len(tailIDs) && !full() {
		emitTailBefore(tailIDs[len(tailIDs)-1], true)
	}
	if len(out) > limit {
		out = out[:limit]
		return v.result(out, out[limit-1].ID), nil
	}
	return v.result(out, ""), nil
}

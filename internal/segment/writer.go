package segment

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/compactorhq/compactor/internal/materialize"
)

// Writer builds one new segment version from a base by copy-on-write. It is
// used by one goroutine. Get, then Write, then WriteManifest; Abort on any
// failure deletes every blob this writer wrote.
type Writer struct {
	s            *Store
	collectionID string
	base         *Manifest
	// loaded holds the records of the base blocks read so far, by index in
	// base.Blocks.
	loaded map[int][]materialize.Record
	// written is every key this writer put (or tried to put), for Abort.
	written []string
	// unsynced are the blocks put through a deferredSyncer and not yet
	// made durable (Write does before it returns).
	unsynced []string
	wrote    bool
	// Deltas (delta.go): the base's deltas merged, once read, and the
	// current records Get returned, for WriteDelta.
	overlay *[]Change
	present map[string]*materialize.Record
}

// NewWriter starts a new version of collectionID over base (nil: the
// collection has no segment yet).
func (s *Store) NewWriter(collectionID string, base *Manifest) *Writer {
	return &Writer{s: s, collectionID: collectionID, base: base, loaded: make(map[int][]materialize.Record)}
}

func (w *Writer) baseBlocks() []BlockRef {
	if w.base == nil {
		return nil
	}
	return w.base.Blocks
}

// load returns the records of base block i, reading it once.
func (w *Writer) load(ctx context.Context, i int) ([]materialize.Record, error) {
	if recs, ok := w.loaded[i]; ok {
		return recs, nil
	}
	recs, err := w.s.ReadBlock(ctx, w.base.Blocks[i])
	if err != nil {
		return nil, err
	}
	w.loaded[i] = recs
	return recs, nil
}

// Get returns the current records of the given ids in the base (missing ids
// absent). It loads and keeps the blocks whose ranges hold the ids, so that
// Write does not read them again.
func (w *Writer) Get(ctx context.Context, ids []string) (map[string]materialize.Record, error) {
	if out, ok, err := w.getFew(ctx, ids); ok { // delta.go: few ids over many blocks
		return out, err
	}
	out := make(map[string]materialize.Record)
	byBlock, order := idsByBlock(w.baseBlocks(), ids)
	for _, i := range order {
		recs, err := w.load(ctx, i)
		if err != nil {
			return nil, err
		}
		for _, id := range byBlock[i] {
			if r, ok := findRecord(recs, id); ok {
				// A copy: the loaded block is the input of Write.
				out[id] = r.Clone()
			}
		}
	}
	if err := w.overlayGet(ctx, ids, out); err != nil {
		return nil, err
	}
	return out, nil
}

// span is a run of the new version's records: either one base block reused
// as it is (rewrite false), or records to write as one or more blocks.
type span struct {
	rewrite bool
	base    int // index in base.Blocks when !rewrite
	recs    []materialize.Record
}

func (sp span) size(blocks []BlockRef) int {
	if sp.rewrite {
		return len(sp.recs)
	}
	return int(blocks[sp.base].Records)
}

func (w *Writer) checkWrite(changes []Change, dimension int) error {
	if err := checkCollectionID(w.collectionID); err != nil {
		return err
	}
	if w.base != nil && w.base.CollectionID != w.collectionID {
		return fmt.Errorf("base manifest is of collection %s, not %s", w.base.CollectionID, w.collectionID)
	}
	for i, c := range changes {
		if c.ID == "" {
			return fmt.Errorf("change %d: empty id", i)
		}
		if i > 0 && changes[i-1].ID >= c.ID {
			return fmt.Errorf("change %d: id %q not after %q (changes must be sorted by unique id)", i, c.ID, changes[i-1].ID)
		}
		if c.Record == nil {
			continue
		}
		if c.Record.ID != c.ID {
			return fmt.Errorf("change %q: record has id %q", c.ID, c.Record.ID)
		}
		if dimension > 0 && len(c.Record.Embedding) != dimension {
			return fmt.Errorf("change %q: embedding has %d dimensions, want %d", c.ID, len(c.Record.Embedding), dimension)
		}
		if err := checkMetadata(c.Record.Metadata); err != nil {
			return fmt.Errorf("change %q: %w", c.ID, err)
		}
	}
	return nil
}

// Write applies changes (sorted by ID, unique) to the base and writes the
// blocks that change, checking ctx before each block write (a batch
// boundary) and calling onBlock(bytes) after each. It returns the new
// manifest (Version = base's + 1, not yet written) and the figures. On error
// the caller calls Abort.
func (w *Writer) Write(ctx context.Context, changes []Change, compactionOffset int64, dimension int, onBlock func(int64)) (*Manifest, WriteStats, error) {
	var stats WriteStats
	if w.wrote {
		return nil, stats, errors.New("write segment: Write called twice on one Writer")
	}
	w.wrote = true
	// The loaded base blocks are not needed after Write: let them go.
	defer clear(w.loaded)
	if err := w.checkWrite(changes, dimension); err != nil {
		return nil, stats, fmt.Errorf("write segment: %w", err)
	}
	// The base's deltas go into the blocks this write rewrites.
	changes, folded, err := w.foldDeltas(ctx, changes)
	if err != nil {
		return nil, stats, fmt.Errorf("write segment: fold deltas: %w", err)
	}
	stats.DeltasFolded = folded
	blocks := w.baseBlocks()
	spans, err := w.plan(ctx, blocks, changes)
	if err != nil {
		return nil, stats, err
	}

	m := &Manifest{
		FormatVersion:    formatVersion,
		CollectionID:     w.collectionID,
		Version:          1,
		CompactionOffset: compactionOffset,
		Dimension:        dimension,
		CreatedAt:        w.s.now().UTC().Round(0),
		Blocks:           []BlockRef{},
	}
	if w.base != nil {
		m.Version = w.base.Version + 1
	}
	for _, sp := range spans {
		if !sp.rewrite {
			m.Blocks = append(m.Blocks, blocks[sp.base])
			m.RecordCount += blocks[sp.base].Records
			stats.BlocksReused++
			continue
		}
		for _, part := range splitEven(sp.recs, w.s.cfg.MaxBlockRecords) {
			ref, err := w.putBlock(ctx, part)
			if err != nil {
				return nil, stats, err
			}
			m.Blocks = append(m.Blocks, ref)
			m.RecordCount += ref.Records
			stats.BlocksWritten++
			stats.RecordsWritten += ref.Records
			stats.BytesWritten += ref.Bytes
			if onBlock != nil {
				onBlock(ref.Bytes)
			}
		}
	}
	stats.BlocksDropped = len(blocks) - stats.BlocksReused
	// Every block is durable before the manifest that lists it is written
	// (and so before a commit can reference it).
	if ds, ok := w.s.blobs.(deferredSyncer); ok && len(w.unsynced) > 0 {
		if err := ds.syncNames(ctx, w.unsynced); err != nil {
			return nil, stats, fmt.Errorf("sync blocks: %w", err)
		}
		w.unsynced = nil
	}
	if err := checkManifest(m); err != nil {
		// A bug, not bad input: the plan must keep the invariants.
		return nil, stats, fmt.Errorf("write segment: new manifest: %w", err)
	}
	return m, stats, nil
}

// plan applies changes to the base blocks they fall into and returns the new
// version as spans, in id order: untouched blocks are reused, changed ones
// rewritten, empty ones dropped, small ones merged with a neighbour.
// Oversized spans are split when written.
func (w *Writer) plan(ctx context.Context, blocks []BlockRef, changes []Change) ([]span, error) {
	if len(blocks) == 0 {
		recs := applyChanges(nil, changes)
		if len(recs) == 0 {
			return nil, nil
		}
		return []span{{rewrite: true, recs: recs}}, nil
	}

	spans := make([]span, 0, len(blocks))
	next := 0 // first change not yet assigned to a block
	for i := range blocks {
		end := next
		for end < len(changes) && (i == len(blocks)-1 || changes[end].ID < blocks[i+1].MinID) {
			end++
		}
		if end == next {
			spans = append(spans, span{base: i})
			continue
		}
		recs, err := w.load(ctx, i)
		if err != nil {
			return nil, fmt.Errorf("write segment: %w", err)
		}
		merged, changed := mergeChanges(recs, changes[next:end])
		next = end
		switch {
		case !changed:
			spans = append(spans, span{base: i})
		case len(merged) > 0:
			spans = append(spans, span{rewrite: true, recs: merged})
		}
		// changed and empty: the block is dropped.
	}

	// Merge every rewritten span under MinBlockRecords with a neighbour.
	minRecs := w.s.cfg.MinBlockRecords
	for i := 0; i < len(spans); {
		if !spans[i].rewrite || len(spans[i].recs) >= minRecs || len(spans) == 1 {
			i++
			continue
		}
		j := pickNeighbour(spans, i, blocks)
		lo, hi := min(i, j), max(i, j)
		loRecs, err := w.spanRecords(ctx, spans[lo])
		if err != nil {
			return nil, err
		}
		hiRecs, err := w.spanRecords(ctx, spans[hi])
		if err != nil {
			return nil, err
		}
		recs := make([]materialize.Record, 0, len(loRecs)+len(hiRecs))
		recs = append(append(recs, loRecs...), hiRecs...)
		spans[lo] = span{rewrite: true, recs: recs}
		spans = append(spans[:hi], spans[hi+1:]...)
		i = lo // still under the minimum: merge again
	}
	return spans, nil
}

// spanRecords returns the records of sp, reading its base block if reused.
func (w *Writer) spanRecords(ctx context.Context, sp span) ([]materialize.Record, error) {
	if sp.rewrite {
		return sp.recs, nil
	}
	recs, err := w.load(ctx, sp.base)
	if err != nil {
		return nil, fmt.Errorf("write segment: %w", err)
	}
	return recs, nil
}

// pickNeighbour chooses the span to merge spans[i] with: a neighbour being
// rewritten anyway (no extra read), else the smaller one.
func pickNeighbour(spans []span, i int, blocks []BlockRef) int {
	switch {
	case i == 0:
		return 1
	case i == len(spans)-1:
		return i - 1
	}
	prev, next := spans[i-1], spans[i+1]
	if prev.rewrite != next.rewrite {
		if prev.rewrite {
			return i - 1
		}
		return i + 1
	}
	if next.size(blocks) < prev.size(blocks) {
		return i + 1
	}
	return i - 1
}

// putBlock encodes recs as a block and puts it under a new key.
func (w *Writer) putBlock(ctx context.Context, recs []materialize.Record) (BlockRef, error) {
	if err := ctx.Err(); err != nil {
		return BlockRef{}, fmt.Errorf("write block: %w", err)
	}
	data, err := encodeBlock(recs)
	if err != nil {
		return BlockRef{}, fmt.Errorf("encode block: %w", err)
	}
	key := newBlockKey(w.collectionID)
	// Recorded before the Put: a Put that fails may still have written.
	w.written = append(w.written, key)
	if ds, ok := w.s.blobs.(deferredSyncer); ok {
		if err := ds.putDeferred(ctx, key, data); err != nil {
			return BlockRef{}, fmt.Errorf("put block %s: %w", key, err)
		}
		w.unsynced = append(w.unsynced, key)
	} else if err := w.s.blobs.Put(ctx, key, data); err != nil {
		return BlockRef{}, fmt.Errorf("put block %s: %w", key, err)
	}
	return BlockRef{
		Key:     key,
		MinID:   recs[0].ID,
		MaxID:   recs[len(recs)-1].ID,
		Records: int64(len(recs)),
		Bytes:   int64(len(data)),
	}, nil
}

// WriteManifest writes m under a new unique key and returns the key and its
// size in bytes.
func (w *Writer) WriteManifest(ctx context.Context, m *Manifest) (string, int64, error) {
	if m == nil {
		return "", 0, errors.New("write manifest: nil manifest")
	}
	if m.CollectionID != w.collectionID {
		return "", 0, fmt.Errorf("write manifest: manifest of collection %s, writer of %s", m.CollectionID, w.collectionID)
	}
	if err := checkManifest(m); err != nil {
		return "", 0, fmt.Errorf("write manifest: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return "", 0, fmt.Errorf("write manifest: %w", err)
	}
	data, err := encodeManifest(m)
	if err != nil {
		return "", 0, fmt.Errorf("write manifest: %w", err)
	}
	key := newManifestKey(w.collectionID, m.Version)
	w.written = append(w.written, key)
	if err := w.s.blobs.Put(ctx, key, data); err != nil {
		return "", 0, fmt.Errorf("put manifest %s: %w", key, err)
	}
	return key, int64(len(data)), nil
}

// Abort deletes every blob this writer wrote (blocks and manifest). Blocks of
// the base are never touched. Use a context that is not cancelled.
func (w *Writer) Abort(ctx context.Context) error {
	var errs []error
	var left []string
	for _, key := range w.written {
		if err := w.s.blobs.Delete(ctx, key); err != nil {
			errs = append(errs, fmt.Errorf("abort: %w", err))
			left = append(left, key)
		}
	}
	w.written = left // a retried Abort deletes what is left
	return errors.Join(errs...)
}

// applyChanges returns the records of the non-nil changes.
func applyChanges(dst []materialize.Record, changes []Change) []materialize.Record {
	for _, c := range changes {
		if c.Record != nil {
			dst = append(dst, *c.Record)
		}
	}
	return dst
}

// mergeChanges applies changes (sorted, unique) to recs (sorted, unique) and
// returns the result in a new slice, and whether it differs from recs.
func mergeChanges(recs []materialize.Record, changes []Change) ([]materialize.Record, bool) {
	out := make([]materialize.Record, 0, len(recs)+len(changes))
	changed := false
	i, j := 0, 0
	for i < len(recs) || j < len(changes) {
		switch {
		case j == len(changes) || (i < len(recs) && recs[i].ID < changes[j].ID):
			out = append(out, recs[i])
			i++
		case i == len(recs) || changes[j].ID < recs[i].ID:
			if c := changes[j]; c.Record != nil { // insert; deleting an absent id is a no-op
				out = append(out, *c.Record)
				changed = true
			}
			j++
		default: // same id
			if c := changes[j]; c.Record != nil {
				out = append(out, *c.Record)
				changed = changed || !sameRecord(recs[i], *c.Record)
			} else {
				changed = true
			}
			i++
			j++
		}
	}
	return out, changed
}

// splitEven splits recs into ceil(n/maxRecs) runs whose sizes differ by at
// most one.
func splitEven(recs []materialize.Record, maxRecs int) [][]materialize.Record {
	n := len(recs)
	if n == 0 {
		return nil
	}
	k := (n + maxRecs - 1) / maxRecs
	parts := make([][]materialize.Record, 0, k)
	size, extra := n/k, n%k
	for p := range k {
		sz := size
		if p < extra {
			sz++
		}
		parts = append(parts, recs[:sz:sz])
		recs = recs[sz:]
	}
	return parts
}

// sameRecord reports whether a and b would be stored identically.
func sameRecord(a, b materialize.Record) bool {
	if a.ID != b.ID || len(a.Embedding) != len(b.Embedding) || (a.Embedding == nil) != (b.Embedding == nil) ||
		(a.Document == nil) != (b.Document == nil) || (a.Metadata == nil) != (b.Metadata == nil) ||
		len(a.Metadata) != len(b.Metadata) {
		return false
	}
	if a.Document != nil && *a.Document != *b.Document {
		return false
	}
	for i, v := range a.Embedding {
		if math.Float32bits(v) != math.Float32bits(b.Embedding[i]) {
			return false
		}
	}
	for k, v := range a.Metadata {
		u, ok := b.Metadata[k]
		if !ok {
			return false
		}
		switch v := v.(type) {
		case string:
			if u, ok := u.(string); !ok || u != v {
				return false
			}
		case float64:
			if u, ok := u.(float64); !ok || math.Float64bits(u) != math.Float64bits(v) {
				return false
			}
		case bool:
			if u, ok := u.(bool); !ok || u != v {
				return false
			}
		default:
			return false
		}
	}
	return true
}

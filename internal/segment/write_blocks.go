package segment

import (
	"cmp"
	"context"
	"fmt"
	"math"

	"github.com/compactorhq/compactor/internal/materialize"
)

// writeBlocks is Write's block write over the changes next yields.
func (w *Writer) writeBlocks(ctx context.Context, next func() (Change, error, bool), opts WriteOptions) (*Manifest, WriteReport, error) {
	report := WriteReport{Kind: WroteBlocks}
	w.onChange = opts.OnChange
	// The loaded base blocks are not needed after the write: let them go.
	defer clear(w.loaded)
	// The base's deltas go into the blocks this write rewrites.
	overlay, err := w.deltaOverlay(ctx)
	if err != nil {
		return nil, report, fmt.Errorf("write segment: fold deltas: %w", err)
	}
	if len(overlay) > 0 {
		next = foldDeltaStream(overlay, next)
		report.DeltasFolded = len(w.base.Deltas)
	}
	blocks := w.baseBlocks()
	m := &Manifest{
		FormatVersion:    formatVersion,
		CollectionID:     w.collectionID,
		Version:          1,
		CompactionOffset: opts.CompactionOffset,
		Dimension:        opts.Dimension,
		CreatedAt:        w.s.now().UTC().Round(0),
		Blocks:           []BlockRef{},
	}
	if w.base != nil {
		m.Version = w.base.Version + 1
	}
	src := &changeSource{next: next, dimension: opts.Dimension}
	out := newBlockSink(ctx, w, opts.Encoders, opts.OnBlock)
	lay := &layout{w: w, ctx: ctx, blocks: blocks, min: w.s.cfg.MinBlockRecords, max: w.s.cfg.MaxBlockRecords, out: out, openIdx: -1}
	lay.trimAt = max(cmp.Or(max(opts.Window, 0), 8*lay.max), 2*lay.max)
	err = w.merge(ctx, blocks, src, lay)
	if err == nil {
		err = lay.finish()
	}
	if err != nil {
		out.cancel() // stop the encoders in flight
	}
	refs, werr := out.wait()
	if err == nil {
		err = werr
	}
	if err != nil {
		return nil, report, err
	}
	if m.Dimension == 0 {
		m.Dimension = src.dimension
	}
	for _, r := range refs {
		m.Blocks = append(m.Blocks, r.ref)
		m.RecordCount += r.ref.Records
		if r.reused {
			report.BlocksReused++
			continue
		}
		report.BlocksWritten++
		report.RecordsWritten += r.ref.Records
		report.BytesWritten += r.ref.Bytes
	}
	report.BlocksDropped = len(blocks) - report.BlocksReused
	if err := w.verifyWrite(m, refs); err != nil {
		return nil, report, err
	}
	// Every block is durable before the manifest that lists it is written
	// (and so before a commit can reference it).
	if ds, ok := w.s.blobs.(deferredSyncer); ok && len(w.unsynced) > 0 {
		if err := ds.syncNames(ctx, w.unsynced); err != nil {
			return nil, report, fmt.Errorf("sync blocks: %w", err)
		}
		w.unsynced = nil
	}
	if err := checkManifest(m); err != nil {
		// A bug, not bad input: the plan must keep the invariants.
		return nil, report, fmt.Errorf("write segment: new manifest: %w", err)
	}
	return m, report, nil
}

// writeCheck accumulates, during one write, the two sides of the
// identity a write must keep: the records and digest of the blocks it
// writes equal those of the base blocks it consumes (rewrites or drops)
// adjusted by the changes it applies (minus each record replaced or
// deleted, plus each record inserted or updated). Reused blocks are on
// neither side. A writer that loses, duplicates or alters a record breaks
// it.
type writeCheck struct {
	applied        Digest // Σ H(new) − Σ H(old) over the changes applied
	appliedRecords int64  // inserted − deleted
	consumed       map[int]Digest
	consumedCount  map[int]int64
}

// consume records base block i, read as recs, as an input of the write:
// its digest as recorded (so that a block damaged since it was written is
// caught), else as read.
func (c *writeCheck) consume(ref BlockRef, i int, recs []materialize.Record) {
	if _, ok := c.consumed[i]; ok {
		return
	}
	if c.consumed == nil {
		c.consumed, c.consumedCount = make(map[int]Digest), make(map[int]int64)
	}
	d, err := ParseDigest(ref.Digest)
	if err != nil {
		d = DigestOf(recs)
	}
	c.consumed[i], c.consumedCount[i] = d, int64(len(recs))
}

// apply records a change of a record from old to new (nil: absent).
func (c *writeCheck) apply(old, new *materialize.Record) {
	if old != nil {
		c.applied = c.applied.Sub(RecordHash(old))
		c.appliedRecords--
	}
	if new != nil {
		c.applied = c.applied.Add(RecordHash(new))
		c.appliedRecords++
	}
}

// verifyWrite checks the identity of writeCheck over the blocks of the new
// manifest m (refs: its blocks, reused or written) and sets m.Digest, the
// sum of its blocks' digests, when every block has one (a block reused
// from a manifest written before digests has none). A write that breaks
// the identity is a *VerificationError of phase "compaction".
func (w *Writer) verifyWrite(m *Manifest, refs []*sinkSlot) error {
	var written, consumed Digest
	var writtenRecs, consumedRecs int64
	var sum Digest
	all := true
	for _, r := range refs {
		d, err := ParseDigest(r.ref.Digest)
		if err != nil {
			all = false
		}
		sum = sum.Add(d)
		if r.reused {
			continue
		}
		written = written.Add(d)
		writtenRecs += r.ref.Records
	}
	for i, d := range w.check.consumed {
		consumed = consumed.Add(d)
		consumedRecs += w.check.consumedCount[i]
	}
	// Base blocks read by Get but reused as they are are on neither side.
	for _, r := range refs {
		if !r.reused {
			continue
		}
		for i, b := range w.baseBlocks() {
			if b.Key == r.ref.Key {
				if d, ok := w.check.consumed[i]; ok {
					consumed = consumed.Sub(d)
					consumedRecs -= w.check.consumedCount[i]
				}
				break
			}
		}
	}
	want := consumed.Add(w.check.applied)
	wantRecs := consumedRecs + w.check.appliedRecords
	if written != want || writtenRecs != wantRecs {
		return &VerificationError{CollectionID: w.collectionID, Version: m.Version, Phase: "compaction",
			Problems: []Problem{{Kind: KindManifest, Key: "(version " + fmt.Sprint(m.Version) + ", not written)",
				What: fmt.Sprintf("the blocks written hold %d records digesting to %s; the base blocks rewritten with the changes applied hold %d digesting to %s",
					writtenRecs, written, wantRecs, want)}}}
	}
	if all {
		m.Digest = sum.String()
	}
	return nil
}

// changeSource pulls changes and checks them: ids non-empty, sorted and
// unique; records of the id, of the dimension, with storable metadata.
type changeSource struct {
	next      func() (Change, error, bool)
	n         int
	prev      string
	dimension int
	peeked    bool
	cur       Change
	done      bool
}

// peek returns the next change without consuming it (ok false at the end).
func (s *changeSource) peek() (Change, bool, error) {
	if s.peeked {
		return s.cur, true, nil
	}
	if s.done {
		return Change{}, false, nil
	}
	c, err, ok := s.next()
	if !ok {
		s.done = true
		return Change{}, false, nil
	}
	if err != nil {
		s.done = true
		return Change{}, false, err
	}
	if err := s.check(c); err != nil {
		s.done = true
		return Change{}, false, fmt.Errorf("write segment: %w", err)
	}
	s.cur, s.peeked = c, true
	return c, true, nil
}

func (s *changeSource) take() { s.peeked, s.cur = false, Change{} }

func (s *changeSource) check(c Change) error {
	i := s.n
	s.n++
	if c.ID == "" {
		return fmt.Errorf("change %d: empty id", i)
	}
	if i > 0 && s.prev >= c.ID {
		return fmt.Errorf("change %d: id %q not after %q (changes must be sorted by unique id)", i, c.ID, s.prev)
	}
	s.prev = c.ID
	if c.Ops == nil && c.Record != nil {
		if c.Record.ID != c.ID {
			return fmt.Errorf("change %q: record has id %q", c.ID, c.Record.ID)
		}
		return s.checkRecord(c.Record)
	}
	return nil
}

// checkRecord checks a record that goes into a block.
func (s *changeSource) checkRecord(r *materialize.Record) error {
	if s.dimension > 0 && len(r.Embedding) != s.dimension {
		return fmt.Errorf("change %q: embedding has %d dimensions, want %d", r.ID, len(r.Embedding), s.dimension)
	}
	if s.dimension == 0 && len(r.Embedding) > 0 {
		s.dimension = len(r.Embedding)
	}
	if err := checkMetadata(r.Metadata); err != nil {
		return fmt.Errorf("change %q: %w", r.ID, err)
	}
	return nil
}

// valueOver returns the record c leaves its id with over cur, the id's
// current record (nil when absent): c.Record, or c.Ops folded onto cur
// with the materialization rules (materialize.ApplyOwning: c's operation
// records are taken over; cur is not modified). nil: the id ends absent.
// It is the one place a compaction applies the rules: to the base block's
// record as blocks are rewritten, to the current record as a delta is
// written, and to a base delta's record as deltas are folded.
func (c Change) valueOver(cur *materialize.Record) *materialize.Record {
	if c.Ops == nil {
		return c.Record
	}
	return materialize.ApplyOwning(cur, c.Ops)
}

// resolve returns the value of change c over cur (the current record of
// c.ID, nil when absent: Change.valueOver), checked as a record that goes
// into a block.
func (s *changeSource) resolve(c Change, cur *materialize.Record) (*materialize.Record, error) {
	if c.Ops == nil {
		return c.Record, nil
	}
	r := c.valueOver(cur)
	if r != nil {
		if r.ID != c.ID {
			return nil, fmt.Errorf("write segment: change %q: operation records of id %q", c.ID, r.ID)
		}
		if err := s.checkRecord(r); err != nil {
			return nil, fmt.Errorf("write segment: %w", err)
		}
	}
	return r, nil
}

// baseRecords returns the records of base block i, in id order: the one
// place the writer reads the base (the copy Get loaded, else the block).
func (w *Writer) baseRecords(ctx context.Context, i int) ([]materialize.Record, error) {
	if recs, ok := w.loaded[i]; ok {
		return recs, nil
	}
	recs, err := w.s.ReadBlock(ctx, w.base.Blocks[i])
	if err != nil {
		return nil, fmt.Errorf("write segment: %w", err)
	}
	w.check.consume(w.base.Blocks[i], i, recs)
	return recs, nil
}

// merge merge-joins the change stream with the base blocks, one block at a
// time, and feeds the layout: a block no change falls into (or whose
// changes change nothing) is reused; the merged records of a changed block
// form a rewritten span.
func (w *Writer) merge(ctx context.Context, blocks []BlockRef, src *changeSource, lay *layout) error {
	if len(blocks) == 0 {
		lay.open()
		for {
			c, ok, err := src.peek()
			if err != nil || !ok {
				if err != nil {
					return err
				}
				break
			}
			src.take()
			r, err := src.resolve(c, nil)
			if err != nil {
				return err
			}
			w.tell(c, nil, r)
			if r != nil {
				w.check.apply(nil, r)
				if err := lay.add(*r); err != nil {
					return err
				}
			}
		}
		return lay.close()
	}
	for i := range blocks {
		// The changes block i owns: ids below the next block's MinID.
		owns := func(id string) bool { return i == len(blocks)-1 || id < blocks[i+1].MinID }
		c, ok, err := src.peek()
		if err != nil {
			return err
		}
		if !ok || !owns(c.ID) {
			if err := lay.reuse(i); err != nil {
				return err
			}
			continue
		}
		recs, err := w.baseRecords(ctx, i)
		if err != nil {
			return err
		}
		// Records go to staging until the first real change: a block
		// whose changes change nothing is reused, not rewritten.
		staging := make([]materialize.Record, 0, len(recs))
		changed := false
		emit := func(r materialize.Record) error {
			if !changed {
				staging = append(staging, r)
				return nil
			}
			return lay.add(r)
		}
		markChanged := func() error {
			if changed {
				return nil
			}
			changed = true
			lay.open()
			for _, r := range staging {
				if err := lay.add(r); err != nil {
					return err
				}
			}
			staging = nil
			return nil
		}
		k := 0
		for {
			c, ok, err := src.peek()
			if err != nil {
				return err
			}
			if !ok || !owns(c.ID) {
				break
			}
			for k < len(recs) && recs[k].ID < c.ID {
				if err := emit(recs[k]); err != nil {
					return err
				}
				k++
			}
			src.take()
			var cur *materialize.Record
			if k < len(recs) && recs[k].ID == c.ID {
				cur = &recs[k]
				k++
			}
			r, err := src.resolve(c, cur)
			if err != nil {
				return err
			}
			w.tell(c, cur, r)
			switch {
			case r == nil && cur == nil: // absent from the block before and after
			case r == nil: // deleted
				err = markChanged()
				w.check.apply(cur, nil)
			case cur == nil: // inserted
				w.check.apply(nil, r)
				if err = markChanged(); err == nil {
					err = emit(*r)
				}
			default:
				if !sameRecord(*cur, *r) {
					w.check.apply(cur, r)
					err = markChanged()
				}
				if err == nil {
					err = emit(*r)
				}
			}
			if err != nil {
				return err
			}
		}
		if !changed {
			if err := lay.reuse(i); err != nil {
				return err
			}
			continue
		}
		for ; k < len(recs); k++ {
			if err := lay.add(recs[k]); err != nil {
				return err
			}
		}
		if err := lay.close(); err != nil {
			return err
		}
	}
	return nil
}

// tell calls WriteOptions.OnChange when change c, whose value is r, changes
// its id's record in the base version: against cur, the base block's
// record, or, for an id a base delta holds (c.folded), against the delta's.
func (w *Writer) tell(c Change, cur, r *materialize.Record) {
	if w.onChange == nil {
		return
	}
	if c.folded {
		cur = c.was
	}
	if (cur == nil) != (r == nil) || (r != nil && !sameRecord(*cur, *r)) {
		w.onChange(c.ID, r)
	}
}

// putBlock encodes recs as a block and puts it under a new key.
func (w *Writer) putBlock(ctx context.Context, recs []materialize.Record) (BlockRef, error) {
	if err := ctx.Err(); err != nil {
		return BlockRef{}, fmt.Errorf("write block: %w", err)
	}
	if w.s.dropRecord != nil { // tests only: a writer that loses a record
		recs = w.s.dropRecord(recs)
	}
	data, err := encodeBlock(recs)
	if err != nil {
		return BlockRef{}, fmt.Errorf("encode block: %w", err)
	}
	digest := DigestOf(recs)
	key := newBlockKey(w.collectionID)
	// Recorded before the Put: a Put that fails may still have written.
	// Encoders put concurrently: the lists are shared.
	w.mu.Lock()
	w.written = append(w.written, key)
	w.mu.Unlock()
	if ds, ok := w.s.blobs.(deferredSyncer); ok {
		if err := ds.putDeferred(ctx, key, data); err != nil {
			return BlockRef{}, fmt.Errorf("put block %s: %w", key, err)
		}
		w.mu.Lock()
		w.unsynced = append(w.unsynced, key)
		w.mu.Unlock()
	} else if err := w.s.blobs.Put(ctx, key, data); err != nil {
		return BlockRef{}, fmt.Errorf("put block %s: %w", key, err)
	}
	ref := BlockRef{
		Key:      key,
		MinID:    recs[0].ID,
		MaxID:    recs[len(recs)-1].ID,
		Records:  int64(len(recs)),
		Bytes:    int64(len(data)),
		Digest:   digest.String(),
		Checksum: Checksum(data),
	}
	if err := w.readBack(ctx, KindBlock, ref.Key, ref.Checksum, func(back []byte) (Digest, error) {
		return blockDigestOf(ref, back, digest)
	}, digest); err != nil {
		return BlockRef{}, err
	}
	return ref, nil
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

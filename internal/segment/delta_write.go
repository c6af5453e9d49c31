package segment

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/compactorhq/compactor/internal/materialize"
)

// Delta policy defaults (Config).
const (
	defaultDeltaMinBlocks   = 4
	defaultDeltaMaxFraction = 0.05
	defaultMaxDeltas        = 16
)

// withDeltaDefaults fills the zero delta fields of c: DeltaMinBlocks 4,
// DeltaMaxFraction 0.05 (above 1: 1), MaxDeltas 16; DeltaFoldRecords < 0
// becomes 0 (the default rule).
func (c Config) withDeltaDefaults() Config {
	if c.DeltaMinBlocks <= 0 {
		c.DeltaMinBlocks = defaultDeltaMinBlocks
	}
	if !(c.DeltaMaxFraction > 0) {
		c.DeltaMaxFraction = defaultDeltaMaxFraction
	}
	c.DeltaMaxFraction = min(c.DeltaMaxFraction, 1)
	if c.MaxDeltas <= 0 {
		c.MaxDeltas = defaultMaxDeltas
	}
	c.DeltaFoldRecords = max(c.DeltaFoldRecords, 0)
	return c
}

// foldRecords is the most delta rows base may carry with a new delta:
// Config.DeltaFoldRecords, or max(MaxBlockRecords, 10% of base's records).
func (c Config) foldRecords(base *Manifest) int64 {
	if c.DeltaFoldRecords > 0 {
		return int64(c.DeltaFoldRecords)
	}
	return max(int64(c.MaxBlockRecords), base.RecordCount/10)
}

// maxDeltaRows is the most changes one delta file takes with embeddings of
// dimension: half of what a decode may hold (MaxBlockDecodeBytes), as
// estimated for rows of that dimension with short documents and metadata,
// so that a delta is never refused as too large to read back.
func maxDeltaRows(dimension int) int64 {
	perRow := int64(decodeBytesPerRow + decodeBytesPerValue*(dimension+4) + 4*dimension + 256)
	return MaxBlockDecodeBytes / 2 / perRow
}

// deltaRows returns the rows (records and tombstones) of the deltas of m.
func deltaRows(m *Manifest) int64 {
	var n int64
	for _, d := range m.Deltas {
		n += d.Records + d.Tombstones
	}
	return n
}

// preferDelta reports whether changes (sorted by unique id) over base are
// written as a delta rather than by rewriting blocks (which folds base's
// deltas into the blocks it rewrites): Writer.Write's rule. With the
// Config fields:
//   - never with NoDeltas, without base blocks, or for more changes than
//     one delta file can hold back to a read (about 46,000 rows at
//     dimension 128);
//   - never when base lists MaxDeltas deltas, or when base's delta rows
//     and the changes would pass DeltaFoldRecords: the deltas are folded;
//   - always when base has deltas otherwise (folding them for a change
//     that touches few blocks would rewrite every block they touch);
//   - else when the changes touch more than DeltaMinBlocks blocks and
//     number less than DeltaMaxFraction of those blocks' records.
func (s *Store) preferDelta(base *Manifest, changes []Change) bool {
	c := s.cfg
	switch {
	case c.NoDeltas || base == nil || len(base.Blocks) == 0:
		return false
	case len(base.Deltas) >= c.MaxDeltas:
		return false
	case int64(len(changes)) > maxDeltaRows(base.Dimension):
		return false
	case deltaRows(base)+int64(len(changes)) > c.foldRecords(base):
		return false
	case len(base.Deltas) > 0:
		return true
	case len(changes) == 0:
		return false
	}
	touched, records, last := 0, int64(0), -1
	for _, ch := range changes {
		if i := owner(base.Blocks, ch.ID); i != last {
			touched++
			records += base.Blocks[i].Records
			last = i
		}
	}
	return touched > c.DeltaMinBlocks && float64(len(changes)) < c.DeltaMaxFraction*float64(records)
}

// maxDeltaChanges is the most operation records Writer.Write gathers over
// base to consider a delta (preferDelta): none when deltas are off, base
// has no blocks or lists MaxDeltas deltas, else what the deltas may still
// take before a fold, within what one delta file holds. A longer stream
// is written as blocks.
func (s *Store) maxDeltaChanges(base *Manifest) int64 {
	if s.cfg.NoDeltas || base == nil || len(base.Blocks) == 0 || len(base.Deltas) >= s.cfg.MaxDeltas {
		return 0
	}
	return max(0, min(maxDeltaRows(base.Dimension), s.cfg.foldRecords(base)-deltaRows(base)))
}

// writeDelta is Write's delta write of changes (sorted by unique id, with
// Records or Ops) over a base with blocks: base's blocks and deltas by
// reference, the new delta last (none when no change changes anything).
func (w *Writer) writeDelta(ctx context.Context, changes []Change, opts WriteOptions) (*Manifest, WriteReport, error) {
	report := WriteReport{Kind: WroteDelta}
	if w.base == nil || len(w.base.Blocks) == 0 {
		return nil, report, errors.New("write delta: the base has no blocks (write blocks instead)")
	}
	src := &changeSource{dimension: cmp.Or(opts.Dimension, w.base.Dimension)}
	ids := make([]string, len(changes))
	for i, c := range changes {
		if err := src.check(c); err != nil {
			return nil, report, fmt.Errorf("write delta: %w", err)
		}
		ids[i] = c.ID
	}
	current, err := w.readFew(ctx, ids)
	if err != nil {
		return nil, report, fmt.Errorf("write delta: %w", err)
	}
	m := *w.base
	m.Version = w.base.Version + 1
	m.CompactionOffset = opts.CompactionOffset
	m.CreatedAt = w.s.now().UTC().Round(0)
	m.Blocks = slices.Clone(w.base.Blocks)
	m.Deltas = slices.Clone(w.base.Deltas)
	m.Index = nil // the base's index is not this version's: the caller sets one
	rows := make([]Change, 0, len(changes))
	var ref DeltaRef
	// The version's digest moves by what the delta changes in the view:
	// minus each current record it replaces or deletes, plus each record
	// it holds. A base without a digest gives a version without one.
	view, viewErr := ParseDigest(w.base.Digest)
	var recDigest, tombDigest Digest
	for _, c := range changes {
		var cur *materialize.Record
		if r, ok := current[c.ID]; ok {
			cur = &r
		}
		r, err := src.resolve(c, cur)
		if err != nil {
			return nil, report, err
		}
		switch {
		case r == nil && cur == nil:
			continue // absent before and after
		case r != nil && cur != nil && sameRecord(*cur, *r):
			continue
		case r == nil:
			m.RecordCount--
			ref.Tombstones++
			tombDigest = tombDigest.Add(tombstoneHash(c.ID))
		default:
			if cur == nil {
				m.RecordCount++
			}
			ref.Records++
			h := RecordHash(r)
			recDigest = recDigest.Add(h)
			view = view.Add(h)
		}
		if cur != nil {
			view = view.Sub(RecordHash(cur))
		}
		if opts.OnChange != nil {
			opts.OnChange(c.ID, r)
		}
		rows = append(rows, Change{ID: c.ID, Record: r})
	}
	m.Digest = ""
	if viewErr == nil {
		m.Digest = view.String()
	}
	m.Dimension = cmp.Or(src.dimension, m.Dimension)
	report.BlocksReused = len(m.Blocks)
	if len(rows) > 0 {
		if err := ctx.Err(); err != nil {
			return nil, report, fmt.Errorf("write delta: %w", err)
		}
		data, err := encodeDelta(rows)
		if err != nil {
			return nil, report, fmt.Errorf("encode delta: %w", err)
		}
		ref.Key = newDeltaKey(w.collectionID)
		ref.MinID, ref.MaxID = rows[0].ID, rows[len(rows)-1].ID
		ref.Bytes = int64(len(data))
		ref.Digest, ref.TombstoneDigest, ref.Checksum = recDigest.String(), tombDigest.String(), Checksum(data)
		// Recorded before the Put: a Put that fails may still have written.
		w.written = append(w.written, ref.Key)
		if err := w.s.blobs.Put(ctx, ref.Key, data); err != nil {
			return nil, report, fmt.Errorf("put delta %s: %w", ref.Key, err)
		}
		if err := w.readBack(ctx, KindDelta, ref.Key, ref.Checksum, func(back []byte) (Digest, error) {
			cs, err := decodeDeltaOf(ref, back)
			var d Digest
			for _, c := range cs {
				if c.Record != nil {
					d = d.Add(RecordHash(c.Record))
				} else {
					d = d.Add(tombstoneHash(c.ID))
				}
			}
			return d, err
		}, recDigest.Add(tombDigest)); err != nil {
			return nil, report, err
		}
		m.Deltas = append(m.Deltas, ref)
		m.FormatVersion = formatVersionDeltas
		report.DeltasWritten = 1
		report.RecordsWritten = int64(len(rows))
		report.BytesWritten = ref.Bytes
	}
	if err := checkManifest(&m); err != nil {
		return nil, report, fmt.Errorf("write delta: new manifest: %w", err)
	}
	return &m, report, nil
}

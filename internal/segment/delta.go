package segment

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding"

	"github.com/compactorhq/compactor/internal/materialize"
)

// KindDelta is the CorruptError.Kind of a delta file.
const KindDelta = "delta"

// deltaFormatKey is a key of the Parquet key/value metadata of every delta;
// its value is deltaFormatVersion.
const (
	deltaFormatKey     = "compactor.delta_format"
	deltaFormatVersion = "1"
)

// deltaRow is one row of a delta file: the columns of a block, and deleted
// (true: a tombstone, the id is absent from the version; its other columns
// are null). The column names and types are the public format (see the
// package documentation).
//
// The block columns are spelled out (an embedded blockRow decodes a null
// after a non-null value of an optional column wrongly in parquet-go
// v0.32): keep them as blockRow's.
type deltaRow struct {
	ID        string    `parquet:"id,zstd"`
	Embedding []float32 `parquet:"embedding,optional,list,zstd"`
	Document  *string   `parquet:"document,optional,zstd"`
	Metadata  *string   `parquet:"metadata,optional,zstd"` // a JSON object
	Deleted   bool      `parquet:"deleted,zstd"`
}

// deltaColumns are the leaf columns of a delta, by path: the block's and
// deleted.
var deltaColumns = append(slices.Clip(blockColumns), []string{"deleted"})

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

// readOverlay reads the deltas of m (all, or those want accepts) and
// merges them, oldest first, so that the newest change of each id wins:
// the result is sorted by unique id; a change with a nil Record is a
// tombstone. cached reads the deltas through the decoded block cache (the
// read path's: the changes are then shared and must not be modified).
func (s *Store) readOverlay(ctx context.Context, deltas []DeltaRef, want func(DeltaRef) bool, cached bool) ([]Change, error) {
	read := s.ReadDelta
	if cached {
		read = s.readDeltaCached
	}
	var out []Change
	for _, d := range deltas {
		if want != nil && !want(d) {
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("read delta %s: %w", d.Key, err)
		}
		cs, err := read(ctx, d)
		if err != nil {
			return nil, err
		}
		out = mergeNewer(out, cs)
	}
	return out, nil
}

// coversAny returns a filter of the deltas whose id range holds one of ids.
func coversAny(ids []string) func(DeltaRef) bool {
	return func(d DeltaRef) bool {
		return slices.ContainsFunc(ids, func(id string) bool { return id >= d.MinID && id <= d.MaxID })
	}
}

// mergeNewer merges two lists of changes sorted by unique id into a new
// one; for an id in both, newer's change wins.
func mergeNewer(older, newer []Change) []Change {
	if len(older) == 0 {
		return newer
	}
	if len(newer) == 0 {
		return older
	}
	out := make([]Change, 0, len(older)+len(newer))
	i, j := 0, 0
	for i < len(older) && j < len(newer) {
		switch a, b := older[i].ID, newer[j].ID; {
		case a < b:
			out = append(out, older[i])
			i++
		case b < a:
			out = append(out, newer[j])
			j++
		default:
			out = append(out, newer[j])
			i++
			j++
		}
	}
	out = append(out, older[i:]...)
	return append(out, newer[j:]...)
}

// findChange returns the change of cs (sorted by unique id) for id.
func findChange(cs []Change, id string) (Change, bool) {
	i, ok := slices.BinarySearchFunc(cs, id, func(c Change, id string) int { return strings.Compare(c.ID, id) })
	if !ok {
		return Change{}, false
	}
	return cs[i], true
}

// overlayCursor walks the merged deltas of a scan alongside the blocks.
type overlayCursor struct{ ov []Change }

// upTo passes to fn the delta records with ids up to id (tombstones hide
// their id and pass nothing). It returns whether the deltas hold id itself
// (the block's record is overridden) and whether fn asked to stop.
func (c *overlayCursor) upTo(id string, fn func(materialize.Record) bool) (overridden, stop bool) {
	for len(c.ov) > 0 && c.ov[0].ID <= id {
		ch := c.ov[0]
		c.ov = c.ov[1:]
		overridden = ch.ID == id
		if ch.Record != nil && !fn(*ch.Record) {
			return overridden, true
		}
	}
	return overridden, false
}

// rest passes the delta records left to fn, until it returns false.
func (c *overlayCursor) rest(fn func(materialize.Record) bool) {
	for _, ch := range c.ov {
		if ch.Record != nil && !fn(*ch.Record) {
			return
		}
	}
	c.ov = nil
}

// scanOverlay returns a cursor over the deltas of m with ids after after.
func (s *Store) scanOverlay(ctx context.Context, m *Manifest, after string, cached bool) (*overlayCursor, error) {
	ov, err := s.readOverlay(ctx, m.Deltas, func(d DeltaRef) bool { return d.MaxID > after }, cached)
	if err != nil {
		return nil, err
	}
	j := sort.Search(len(ov), func(j int) bool { return ov[j].ID > after })
	return &overlayCursor{ov: ov[j:]}, nil
}

// deltaOverlay returns the base's deltas merged (readOverlay), reading them
// once per Writer.
func (w *Writer) deltaOverlay(ctx context.Context) ([]Change, error) {
	if w.base == nil || len(w.base.Deltas) == 0 {
		return nil, nil
	}
	if w.overlay == nil {
		ov, err := w.s.readOverlay(ctx, w.base.Deltas, nil, false)
		if err != nil {
			return nil, err
		}
		w.overlay = &ov
	}
	return *w.overlay, nil
}

// overlayGet applies the base's deltas to out, the base blocks' records of
// ids (Writer.Get).
func (w *Writer) overlayGet(ctx context.Context, ids []string, out map[string]materialize.Record) error {
	ov, err := w.deltaOverlay(ctx)
	if err != nil {
		return err
	}
	for _, id := range ids {
		if c, ok := findChange(ov, id); ok {
			if c.Record == nil {
				delete(out, id)
			} else {
				out[id] = c.Record.Clone()
			}
		}
	}
	return nil
}

// foldDeltaStream merges the base's delta rows (overlay: sorted by unique
// id, a nil Record a tombstone) under the changes next pulls, for a write
// that folds the deltas into the blocks it rewrites: an id only in overlay
// becomes a change to its delta value; a change whose id the overlay holds
// applies over the delta value (a Change with Ops is folded onto it here,
// Change.valueOver, since the block's record is older), and a Change with
// a Record replaces it. An error of next ends the stream.
func foldDeltaStream(overlay []Change, next func() (Change, error, bool)) func() (Change, error, bool) {
	i := 0
	var held Change
	holding, ended := false, false
	return func() (Change, error, bool) {
		if !holding && !ended {
			c, err, ok := next()
			switch {
			case !ok:
				ended = true
			case err != nil:
				ended, i = true, len(overlay)
				return Change{}, err, true
			default:
				held, holding = c, true
			}
		}
		if i < len(overlay) && (!holding || overlay[i].ID < held.ID) {
			i++
			c := overlay[i-1]
			c.folded, c.was = true, c.Record
			return c, nil, true
		}
		if !holding {
			return Change{}, nil, false
		}
		c := held
		held, holding = Change{}, false
		if i < len(overlay) && overlay[i].ID == c.ID {
			was := overlay[i].Record
			if c.Ops != nil {
				c = Change{ID: c.ID, Record: c.valueOver(was)}
			}
			c.folded, c.was = true, was
			i++
		}
		return c, nil, true
	}
}

// ReadDelta reads all rows of a delta, in id order, as changes (a nil Record
// is a tombstone). Errors wrap ErrNotExist when missing; a delta that cannot
// be decoded, claims more than its file can hold or MaxBlockDecodeBytes
// allows, or contradicts ref (size, record and tombstone counts, id range)
// is a *CorruptError of KindDelta naming the key and the collection.
func (s *Store) ReadDelta(ctx context.Context, ref DeltaRef) ([]Change, error) {
	data, err := s.getBlob(ctx, KindDelta, ref.Key)
	if err != nil {
		return nil, fmt.Errorf("read delta %s: %w", ref.Key, err)
	}
	return decodeDeltaOf(ref, data)
}

// checkDeltas checks the deltas of m: keys of the collection (each once),
// rows a read can hold, non-empty ranges, and a record count that the
// blocks (blockRecords) and the delta records can make.
func checkDeltas(m *Manifest, blockRecords int64) error {
	prefix := deltasPrefix(m.CollectionID)
	keys := make(map[string]bool, len(m.Deltas))
	var records int64
	for i, d := range m.Deltas {
		name, ok := strings.CutPrefix(d.Key, prefix)
		switch {
		case !ok || !strings.HasSuffix(name, ".parquet") || strings.ContainsAny(name, "/\\") || strings.HasPrefix(name, "."):
			return fmt.Errorf("delta %d: key %q is not a delta key under %s", i, d.Key, prefix)
		case keys[d.Key]:
			return fmt.Errorf("delta %d: key %s listed twice", i, d.Key)
		case d.Records < 0 || d.Tombstones < 0 || d.Records > maxBlockRecords || d.Tombstones > maxBlockRecords-d.Records || d.Records+d.Tombstones < 1:
			return fmt.Errorf("delta %s: %d records and %d tombstones, rows outside 1..%d", d.Key, d.Records, d.Tombstones, maxBlockRecords)
		case d.Bytes < 0:
			return fmt.Errorf("delta %s: %d bytes", d.Key, d.Bytes)
		case d.MinID == "":
			return fmt.Errorf("delta %s: empty min id", d.Key)
		case d.MinID > d.MaxID:
			return fmt.Errorf("delta %s: min id %q > max id %q", d.Key, d.MinID, d.MaxID)
		}
		keys[d.Key] = true
		records += d.Records
	}
	if m.RecordCount < 0 || m.RecordCount > blockRecords+records {
		return fmt.Errorf("record count %d outside 0..%d (blocks hold %d, deltas %d records)", m.RecordCount, blockRecords+records, blockRecords, records)
	}
	return nil
}

// encodeDelta encodes changes (sorted by unique id, non-empty) as one
// Parquet file of deltaRows. It refuses a delta that decodeDelta would
// refuse (ErrBlockTooLarge).
func encodeDelta(changes []Change) ([]byte, error) {
	return encodeDeltaWithin(changes, MaxBlockDecodeBytes)
}

// encodeDeltaWithin is encodeDelta with limit in place of
// MaxBlockDecodeBytes.
func encodeDeltaWithin(changes []Change, limit int64) ([]byte, error) {
	rows := make([]deltaRow, len(changes))
	var meta bytes.Buffer
	enc := json.NewEncoder(&meta)
	enc.SetEscapeHTML(false)
	for i, c := range changes {
		if i > 0 && changes[i-1].ID >= c.ID {
			return nil, fmt.Errorf("changes not sorted by unique id at %q", c.ID)
		}
		rows[i].ID = c.ID
		if c.Record == nil {
			rows[i].Deleted = true
			continue
		}
		r := c.Record
		rows[i].Embedding, rows[i].Document = r.Embedding, r.Document
		if r.Metadata != nil {
			if err := checkMetadata(r.Metadata); err != nil {
				return nil, fmt.Errorf("record %q: %w", r.ID, err)
			}
			meta.Reset()
			if err := enc.Encode(map[string]any(r.Metadata)); err != nil {
				return nil, fmt.Errorf("record %q: metadata: %w", r.ID, err)
			}
			s := string(bytes.TrimSuffix(meta.Bytes(), []byte("\n")))
			rows[i].Metadata = &s
		}
	}
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[deltaRow](&buf,
		parquet.KeyValueMetadata(deltaFormatKey, deltaFormatVersion),
		parquet.MaxRowsPerRowGroup(int64(max(len(rows), 1))),
	)
	if _, err := w.Write(rows); err != nil {
		return nil, fmt.Errorf("write parquet: %w", err)
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("write parquet: %w", err)
	}
	if _, err := inspectDelta(buf.Bytes(), int64(len(rows)), limit); err != nil {
		return nil, fmt.Errorf("%w: delta of %d rows: %w", ErrBlockTooLarge, len(rows), err)
	}
	return buf.Bytes(), nil
}

// decodeDeltaOf decodes the delta ref names from its data and checks it
// against ref: size, record and tombstone counts, id range. Errors are
// *CorruptError of KindDelta.
func decodeDeltaOf(ref DeltaRef, data []byte) ([]Change, error) {
	if ref.Bytes > 0 && int64(len(data)) != ref.Bytes {
		return nil, corrupt(KindDelta, ref.Key, fmt.Errorf("%d bytes, manifest says %d", len(data), ref.Bytes))
	}
	cs, err := decodeDelta(data, ref.Records+ref.Tombstones)
	if err != nil {
		return nil, corrupt(KindDelta, ref.Key, err)
	}
	var tombstones int64
	for _, c := range cs {
		if c.Record == nil {
			tombstones++
		}
	}
	if tombstones != ref.Tombstones || int64(len(cs))-tombstones != ref.Records {
		return nil, corrupt(KindDelta, ref.Key, fmt.Errorf("%d records and %d tombstones, manifest says %d and %d",
			int64(len(cs))-tombstones, tombstones, ref.Records, ref.Tombstones))
	}
	if len(cs) > 0 && (cs[0].ID != ref.MinID || cs[len(cs)-1].ID != ref.MaxID) {
		return nil, corrupt(KindDelta, ref.Key, fmt.Errorf("ids [%q, %q], manifest says [%q, %q]",
			cs[0].ID, cs[len(cs)-1].ID, ref.MinID, ref.MaxID))
	}
	return cs, nil
}

// decodeDelta decodes a delta file written by encodeDelta, with the checks
// of decodeBlock (inspectDelta before parquet-go allocates from the file's
// claims; schema; ids sorted and unique). wantRows < 0: unknown.
func decodeDelta(data []byte, wantRows int64) (cs []Change, err error) {
	defer func() {
		if p := recover(); p != nil {
			cs, err = nil, fmt.Errorf("read parquet: %v", p)
		}
	}()
	info, err := inspectDelta(data, wantRows, MaxBlockDecodeBytes)
	if err != nil {
		return nil, err
	}
	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)),
		parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true))
	if err != nil {
		return nil, fmt.Errorf("open parquet: %w", err)
	}
	schema := f.Schema()
	for _, path := range deltaColumns {
		if _, ok := schema.Lookup(path...); !ok {
			return nil, fmt.Errorf("parquet schema lacks column %q", path)
		}
	}
	r := parquet.NewGenericReader[deltaRow](f)
	defer r.Close()
	return readRows(r, info.rows, func(row *deltaRow) (Change, string, error) {
		if row.Deleted {
			return Change{ID: row.ID}, row.ID, nil
		}
		rec, err := recordOf(&blockRow{ID: row.ID, Embedding: row.Embedding, Document: row.Document, Metadata: row.Metadata})
		if err != nil {
			return Change{}, row.ID, err
		}
		return Change{ID: row.ID, Record: &rec}, row.ID, nil
	})
}

// inspectDelta is inspectBlock for a delta file: the same checks of the
// footer, every column chunk and every page, with the delta's columns.
func inspectDelta(data []byte, wantRows, limit int64) (blockInfo, error) {
	return inspectParquet(data, wantRows, limit, deltaColumns)
}

// getFew is Writer.Get for few ids spread over many blocks (ok true): when
// the ids, taken as changes, would be written as a delta (preferDelta), it
// reads them with readFew. ok false: Get reads whole blocks.
func (w *Writer) getFew(ctx context.Context, ids []string) (_ map[string]materialize.Record, ok bool, _ error) {
	if w.base == nil || len(ids) == 0 {
		return nil, false, nil
	}
	sorted := slices.Sorted(slices.Values(ids))
	asChanges := make([]Change, 0, len(sorted))
	for i, id := range sorted {
		if i == 0 || sorted[i-1] != id {
			asChanges = append(asChanges, Change{ID: id})
		}
	}
	if !w.s.preferDelta(w.base, asChanges) {
		return nil, false, nil
	}
	out, err := w.readFew(ctx, ids)
	return out, true, err
}

// readFew returns the current records of ids in the base, its deltas
// applied (missing ids absent), reading from each block only its id
// column and the rows of the ids (readBlockRows) instead of decoding the
// whole block (a block Get loaded is looked up instead), and keeping no
// block for a block write (which reads what it rewrites).
func (w *Writer) readFew(ctx context.Context, ids []string) (map[string]materialize.Record, error) {
	out := make(map[string]materialize.Record)
	byBlock, order := idsByBlock(w.base.Blocks, ids)
	for _, i := range order {
		if recs, loaded := w.loaded[i]; loaded {
			for _, id := range byBlock[i] {
				if r, ok := findRecord(recs, id); ok {
					out[id] = r.Clone()
				}
			}
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("read block %s: %w", w.base.Blocks[i].Key, err)
		}
		found, err := w.s.readBlockRows(ctx, w.base.Blocks[i], byBlock[i])
		if err != nil {
			return nil, err
		}
		maps.Copy(out, found)
	}
	if err := w.overlayGet(ctx, ids, out); err != nil {
		return nil, err
	}
	return out, nil
}

// readBlockRows reads from the block ref names the records of ids (absent
// ids are left out): it checks the file as ReadBlock does (inspectBlock),
// decodes the id column alone (checking the ids sorted, unique and as ref
// says), then only the rows holding ids. A block of more than one row group
// is read whole. Errors as ReadBlock's.
func (s *Store) readBlockRows(ctx context.Context, ref BlockRef, ids []string) (map[string]materialize.Record, error) {
	data, err := s.getBlob(ctx, KindBlock, ref.Key)
	if err != nil {
		return nil, fmt.Errorf("read block %s: %w", ref.Key, err)
	}
	out, err := blockRows(ref, data, ids)
	if err != nil {
		return nil, corrupt(KindBlock, ref.Key, err)
	}
	return out, nil
}

// blockRows is readBlockRows on the block's data.
func blockRows(ref BlockRef, data []byte, ids []string) (out map[string]materialize.Record, err error) {
	defer func() {
		if p := recover(); p != nil {
			out, err = nil, fmt.Errorf("read parquet: %v", p)
		}
	}()
	if ref.Bytes > 0 && int64(len(data)) != ref.Bytes {
		return nil, fmt.Errorf("%d bytes, manifest says %d", len(data), ref.Bytes)
	}
	if _, err := inspectBlock(data, ref.Records, MaxBlockDecodeBytes); err != nil {
		return nil, err
	}
	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)),
		parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true))
	if err != nil {
		return nil, fmt.Errorf("open parquet: %w", err)
	}
	for _, path := range blockColumns {
		if _, ok := f.Schema().Lookup(path...); !ok {
			return nil, fmt.Errorf("parquet schema lacks column %q", path)
		}
	}
	if len(f.RowGroups()) != 1 {
		recs, err := decodeBlock(data, ref.Records)
		if err != nil {
			return nil, err
		}
		out = make(map[string]materialize.Record, len(ids))
		for _, id := range ids {
			if r, ok := findRecord(recs, id); ok {
				out[id] = r
			}
		}
		return out, nil
	}
	want := make(map[string]bool, len(ids))
	for _, id := range ids {
		want[id] = true
	}
	idCol, _ := f.Schema().Lookup("id")
	pages := f.RowGroups()[0].ColumnChunks()[idCol.ColumnIndex].Pages()
	defer pages.Close()
	var rows []int64
	var rowIDs []string
	var n int64
	var first, last string
	vals := make([]parquet.Value, 256)
	for {
		p, err := pages.ReadPage()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read id column: %w", err)
		}
		vr := p.Values()
		for {
			k, err := vr.ReadValues(vals)
			for _, v := range vals[:k] {
				id := v.String()
				if n > 0 && id <= last {
					return nil, fmt.Errorf("ids not sorted and unique at row %d (%q)", n, id)
				}
				if n == 0 {
					first = id
				}
				last = id
				if want[id] {
					rows = append(rows, n)
					rowIDs = append(rowIDs, id)
				}
				n++
			}
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("read id column: %w", err)
			}
			if k == 0 {
				return nil, fmt.Errorf("read id column: no progress at row %d", n)
			}
		}
		parquet.Release(p)
	}
	switch {
	case n != ref.Records:
		return nil, fmt.Errorf("%d records, manifest says %d", n, ref.Records)
	case n > 0 && (first != ref.MinID || last != ref.MaxID):
		return nil, fmt.Errorf("ids [%q, %q], manifest says [%q, %q]", first, last, ref.MinID, ref.MaxID)
	}
	// The rows' values, column by column: every page of a column is
	// decoded once (a seek per row would decode its page again each time).
	cols := make([][][]parquet.Value, len(blockColumns)) // column → wanted row → values
	for c, path := range blockColumns[1:] {
		leaf, _ := f.Schema().Lookup(path...)
		vs, err := columnRows(f.RowGroups()[0].ColumnChunks()[leaf.ColumnIndex], rows, n, len(path) > 1)
		if err != nil {
			return nil, fmt.Errorf("read column %s: %w", strings.Join(path, "."), err)
		}
		cols[c+1] = vs
	}
	out = make(map[string]materialize.Record, len(rows))
	for i := range rows {
		row := blockRow{ID: rowIDs[i]}
		emb, doc, meta := cols[1][i], cols[2][i], cols[3][i]
		if len(doc) != 1 || len(meta) != 1 || len(emb) == 0 {
			return nil, fmt.Errorf("row %d: %d, %d and %d values in the embedding, document and metadata columns", rows[i], len(emb), len(doc), len(meta))
		}
		if emb[0].DefinitionLevel() > 0 {
			row.Embedding = make([]float32, 0, len(emb))
			for _, v := range emb {
				if !v.IsNull() {
					row.Embedding = append(row.Embedding, v.Float())
				}
			}
		}
		if !doc[0].IsNull() {
			d := string(doc[0].ByteArray())
			row.Document = &d
		}
		if !meta[0].IsNull() {
			m := string(meta[0].ByteArray())
			row.Metadata = &m
		}
		rec, err := recordOf(&row)
		if err != nil {
			return nil, err
		}
		out[rec.ID] = rec
	}
	return out, nil
}

// columnRows returns the values of the given rows (sorted, unique) of
// chunk, a column of a block of total rows: every page is decoded once, and
// only the wanted rows' values are read from it (Page.Slice; one pass over
// the page for a repeated column). The pages' row counts must add up to
// total. repeated: the column is the embedding list's element (its values
// carry repetition levels).
func columnRows(chunk parquet.ColumnChunk, rows []int64, total int64, repeated bool) ([][]parquet.Value, error) {
	out := make([][]parquet.Value, len(rows))
	pages := chunk.Pages()
	defer pages.Close()
	vals := make([]parquet.Value, 256)
	next, base := 0, int64(0)
	for {
		p, err := pages.ReadPage()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		n := p.NumRows()
		if n < 0 || n > total-base {
			return nil, fmt.Errorf("page of %d rows after row %d of %d", n, base, total)
		}
		if repeated && next < len(rows) && rows[next] < base+n {
			// Slicing a repeated page walks its levels from the start: one
			// pass over the page takes every wanted row instead, over its
			// levels and floats when the page holds them plainly.
			var err error
			ok := false
			if next, ok, err = floatListRows(p, rows, next, base, out); !ok && err == nil {
				next, err = repeatedRows(p, rows, next, base, out, vals)
			}
			if err != nil {
				return nil, err
			}
		}
		for ; next < len(rows) && rows[next] < base+n; next++ {
			vr := p.Slice(rows[next]-base, rows[next]-base+1).Values()
			for {
				k, err := vr.ReadValues(vals)
				for _, v := range vals[:k] {
					out[next] = append(out[next], v.Clone())
				}
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					return nil, err
				}
				if k == 0 {
					return nil, fmt.Errorf("no progress at row %d", rows[next])
				}
			}
		}
		base += n
		parquet.Release(p)
	}
	if base != total {
		return nil, fmt.Errorf("pages hold %d rows, the block %d", base, total)
	}
	return out, nil
}

// repeatedRows reads the values of page p (holding the rows from base on)
// in one pass, appending to out[i] the values of rows[i] for every i from
// next on whose row p holds; it returns the first i whose row is past p.
// A row starts at each value of repetition level 0.
func repeatedRows(p parquet.Page, rows []int64, next int, base int64, out [][]parquet.Value, vals []parquet.Value) (int, error) {
	vr := p.Values()
	row := base - 1
	end := base + p.NumRows()
	for next < len(rows) && rows[next] < end {
		k, err := vr.ReadValues(vals)
		for _, v := range vals[:k] {
			if v.RepetitionLevel() == 0 {
				row++
			}
			for next < len(rows) && rows[next] < row {
				next++
			}
			if next < len(rows) && rows[next] == row {
				out[next] = append(out[next], v.Clone())
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return next, err
		}
		if k == 0 {
			return next, fmt.Errorf("no progress at row %d", row)
		}
	}
	if row >= end {
		return next, fmt.Errorf("page of %d rows holds a row %d after row %d", p.NumRows(), row-base, base)
	}
	// Every wanted row before end was read; the loop stops at the first
	// row past the page.
	for next < len(rows) && rows[next] < end {
		next++
	}
	return next, nil
}

// embeddingMaxDefinition is the definition level of a present float of the
// embedding list (optional group, repeated list, required element).
const embeddingMaxDefinition = 2

// floatListRows is repeatedRows over the page's levels and float data
// directly, for a page of the embedding column whose values are plain
// floats (not dictionary indexes); ok false, with nothing read, for any
// other page.
func floatListRows(p parquet.Page, rows []int64, next int, base int64, out [][]parquet.Value) (int, bool, error) {
	data := p.Data()
	if data.Kind() != encoding.Float {
		return next, false, nil
	}
	floats := data.Float()
	reps, defs := p.RepetitionLevels(), p.DefinitionLevels()
	if len(reps) != len(defs) {
		return next, false, nil
	}
	col := p.Column()
	row, vi := base-1, 0
	end := base + p.NumRows()
	for i := range reps {
		if reps[i] == 0 {
			row++
			if row >= end {
				return next, true, fmt.Errorf("page of %d rows holds a row %d after row %d", p.NumRows(), row-base, base)
			}
			for next < len(rows) && rows[next] < row {
				next++
			}
		}
		def := defs[i]
		var v parquet.Value
		if def == embeddingMaxDefinition {
			if vi >= len(floats) {
				return next, true, fmt.Errorf("page of %d floats has more present values", len(floats))
			}
			v = parquet.FloatValue(floats[vi])
			vi++
		}
		if next < len(rows) && rows[next] == row {
			out[next] = append(out[next], v.Level(int(reps[i]), int(def), col))
		}
	}
	if vi != len(floats) {
		return next, true, fmt.Errorf("page of %d floats has %d present values", len(floats), vi)
	}
	for next < len(rows) && rows[next] < end {
		next++
	}
	return next, true, nil
}

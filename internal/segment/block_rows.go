package segment

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"runtime"
	"slices"
	"strings"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding"
	"golang.org/x/sync/errgroup"

	"github.com/compactorhq/compactor/internal/materialize"
)

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
//
// The blocks not loaded are read by up to GOMAXPROCS goroutines at once: a
// read is a blob GET (a file read, or a request to the bucket) followed by
// decompression and decode, so the GETs of some overlap the decode of
// others; ids spread over a collection touch every block (1,000 over
// 600,000 records: about 150 of them). The first error is returned.
func (w *Writer) readFew(ctx context.Context, ids []string) (map[string]materialize.Record, error) {
	out := make(map[string]materialize.Record)
	byBlock, order := idsByBlock(w.base.Blocks, ids)
	var unread []int // indices into order of the blocks to read
	for k, i := range order {
		if recs, loaded := w.loaded[i]; loaded {
			for _, id := range byBlock[i] {
				if r, ok := findRecord(recs, id); ok {
					out[id] = r.Clone()
				}
			}
			continue
		}
		unread = append(unread, k)
	}
	found := make([]map[string]materialize.Record, len(unread))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(runtime.GOMAXPROCS(0))
	for j, k := range unread {
		i := order[k]
		g.Go(func() error {
			if err := gctx.Err(); err != nil {
				return fmt.Errorf("read block %s: %w", w.base.Blocks[i].Key, err)
			}
			var err error
			found[j], err = w.s.readBlockRows(gctx, w.base.Blocks[i], byBlock[i])
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	for _, f := range found {
		maps.Copy(out, f)
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
	data, release, err := s.getBlobBuffer(ctx, KindBlock, ref.Key) // as ReadBlock's
	defer release()
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
	f, recs, err := openBlock(ref, data, -1)
	switch {
	case err != nil:
		return nil, err
	case f == nil:
		out = make(map[string]materialize.Record, len(ids))
		addFound(out, recs, ids)
		return out, nil
	}
	want := make(map[string]bool, len(ids))
	for _, id := range ids {
		want[id] = true
	}
	all, err := blockIDs(f, ref)
	if err != nil {
		return nil, err
	}
	var rows []int64
	var rowIDs []string
	for i, id := range all {
		if want[id] {
			rows = append(rows, int64(i))
			rowIDs = append(rowIDs, id)
		}
	}
	n := int64(len(all))
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
// floats, or indexes into a dictionary of floats (the writer picks a
// dictionary for embeddings of few distinct values, such as quantised
// ones); ok false, with nothing read, for any other page. An index outside
// the dictionary is an error.
func floatListRows(p parquet.Page, rows []int64, next int, base int64, out [][]parquet.Value) (int, bool, error) {
	data := p.Data()
	var floats []float32
	var index []int32 // nil for plain floats
	switch {
	case data.Kind() == encoding.Float:
		floats = data.Float()
	case data.Kind() == encoding.Int32 && p.Dictionary() != nil:
		dict := p.Dictionary().Page().Data()
		if dict.Kind() != encoding.Float {
			return next, false, nil
		}
		floats, index = dict.Float(), data.Int32()
	default:
		return next, false, nil
	}
	values := len(floats)
	if index != nil {
		values = len(index)
	}
	reps, defs := p.RepetitionLevels(), p.DefinitionLevels()
	if len(reps) != len(defs) {
		return next, false, nil
	}
	// A row starts at each repetition level 0. The page's row count and
	// present values are checked whole first (vectorised counts), so that
	// the walk can jump from row start to row start and read the levels of
	// the wanted rows alone.
	present := []byte{embeddingMaxDefinition}
	if n := int64(bytes.Count(reps, []byte{0})); n != p.NumRows() || (n > 0 && reps[0] != 0) {
		return next, true, fmt.Errorf("page of %d rows holds %d row starts", p.NumRows(), n)
	}
	if n := bytes.Count(defs, present); n != values {
		return next, true, fmt.Errorf("page of %d floats has %d present values", values, n)
	}
	col := p.Column()
	end := base + p.NumRows()
	row, pos, vi := base, 0, 0 // pos: the level of row's start; vi: present values before it
	for ; next < len(rows) && rows[next] < end; next++ {
		if rows[next] < row {
			continue // a repeated id's row, already taken
		}
		for row < rows[next] {
			j := pos + 1 + bytes.IndexByte(reps[pos+1:], 0) // the next row starts there: the count above says it exists
			vi += bytes.Count(defs[pos:j], present)
			pos, row = j, row+1
		}
		stop := len(reps)
		if k := bytes.IndexByte(reps[pos+1:], 0); k >= 0 {
			stop = pos + 1 + k
		}
		for i := pos; i < stop; i++ {
			def := defs[i]
			var v parquet.Value
			if def == embeddingMaxDefinition {
				f := vi
				if index != nil {
					if f = int(index[vi]); f < 0 || f >= len(floats) {
						return next, true, fmt.Errorf("float index %d outside the page's dictionary of %d", f, len(floats))
					}
				}
				v = parquet.FloatValue(floats[f])
				vi++
			}
			out[next] = append(out[next], v.Level(int(reps[i]), int(def), col))
		}
		if stop == len(reps) {
			next++
			break // the page's last row
		}
		pos, row = stop, row+1
	}
	for next < len(rows) && rows[next] < end {
		next++
	}
	return next, true, nil
}

package segment

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/parquet-go/parquet-go"

	"github.com/compactorhq/compactor/internal/materialize"
)

// DefaultRowCacheBytes is the default bound of the row cache
// (Config.RowCacheBytes): 64 MiB, the ids, documents and metadata of
// about 1,500,000 records of the size scripts/bench writes (a 9-byte id,
// no document, 14 bytes of metadata JSON: about 45 bytes a record).
const DefaultRowCacheBytes = 64 << 20

// rowCacheHelp names the row cache's metrics.
var rowCacheHelp = cacheHelp{
	name:      "row_cache",
	hits:      "Reads of a segment block's ids, documents and metadata (a query's hits without their embeddings) served by the row cache (or by a read of it already in flight).",
	misses:    "Reads of a segment block's ids, documents and metadata not in the row cache: the block was read from the blob store and those columns decoded.",
	evictions: "Blocks' ids, documents and metadata dropped from the row cache to stay within --row-cache-bytes.",
	bytes:     "Estimated size of the blocks' ids, documents and metadata the row cache holds, in bytes.",
	entries:   "Blocks whose ids, documents and metadata the row cache holds.",
	maxed:     "The bound of the row cache (--row-cache-bytes), in bytes.",
}

// lightBlock is a block without its embeddings: the id, document and
// metadata columns as stored (the metadata as its JSON text, parsed per
// record read), in the block's row order. Immutable once built: the row
// cache shares it between readers. The ends fit 32 bits: a block's decode
// is bounded by MaxBlockDecodeBytes.
type lightBlock struct {
	ids     []string // sorted, unique
	docs    []byte   // the present documents, back to back
	docEnd  []uint32 // per row: the end of its document in docs
	metas   []byte   // the present metadata JSON texts, back to back
	metaEnd []uint32 // per row: the end of its metadata in metas
	has     []uint8  // per row: hasDocument | hasMetadata
	// recs, instead of the columns, holds the records of a block of more
	// than one row group, decoded whole (never written by this store).
	recs []materialize.Record
}

// Bits of lightBlock.has.
const (
	hasDocument = 1 << iota
	hasMetadata
)

// lightRowBytes is the estimated memory of a lightBlock's row beside its
// bytes: the id's string header, two ends and a flag.
const lightRowBytes = 16 + 4 + 4 + 1

// lightBytes is the row cache's size estimate of a *lightBlock.
func lightBytes(v any) int64 {
	b := v.(*lightBlock)
	if b.recs != nil {
		return recordsBytes(b.recs)
	}
	n := int64(128 + len(b.docs) + len(b.metas) + lightRowBytes*len(b.ids))
	for _, id := range b.ids {
		n += int64(len(id))
	}
	return n
}

// find returns the row of id.
func (b *lightBlock) find(id string) (int, bool) {
	if b.recs != nil {
		return slices.BinarySearchFunc(b.recs, id, func(r materialize.Record, id string) int {
			return strings.Compare(r.ID, id)
		})
	}
	return slices.BinarySearch(b.ids, id)
}

// record returns row i as a record without its embedding. Errors: metadata
// that is not a JSON object of scalars.
func (b *lightBlock) record(i int) (materialize.Record, error) {
	if b.recs != nil {
		r := b.recs[i]
		r.Embedding = nil
		return r, nil
	}
	r := materialize.Record{ID: b.ids[i]}
	if b.has[i]&hasDocument != 0 {
		d := string(b.docs[endBefore(b.docEnd, i):b.docEnd[i]])
		r.Document = &d
	}
	if b.has[i]&hasMetadata != 0 {
		m, err := decodeMetadata(b.metas[endBefore(b.metaEnd, i):b.metaEnd[i]])
		if err != nil {
			return materialize.Record{}, fmt.Errorf("record %q: metadata: %w", r.ID, err)
		}
		r.Metadata = m
	}
	return r, nil
}

// endBefore is where row i's bytes start: the end of row i-1's.
func endBefore[E uint32 | int](ends []E, i int) E {
	if i == 0 {
		return 0
	}
	return ends[i-1]
}

// readLightBlock reads block ref without its embeddings (lightBlock): it
// checks the file as ReadBlock does but for the pages of the embedding
// column, which it never decodes. Errors as ReadBlock's.
func (s *Store) readLightBlock(ctx context.Context, ref BlockRef) (*lightBlock, error) {
	data, release, err := s.getBlobBuffer(ctx, KindBlock, ref.Key) // as ReadBlock's
	defer release()
	if err != nil {
		return nil, fmt.Errorf("read block %s: %w", ref.Key, err)
	}
	b, err := lightBlockOf(ref, data)
	if err != nil {
		return nil, corrupt(KindBlock, ref.Key, err)
	}
	return b, nil
}

// readLightCached is readLightBlock through the row cache (readLightBlock
// itself when there is none).
func (s *Store) readLightCached(ctx context.Context, ref BlockRef) (*lightBlock, error) {
	if s.rows == nil {
		return s.readLightBlock(ctx, ref)
	}
	v, err := s.rows.get(ctx, ref.Key, func() (any, error) { return s.readLightBlock(ctx, ref) }, lightBytes)
	if err != nil {
		return nil, err
	}
	return v.(*lightBlock), nil
}

// embeddingColumn is the index of the embedding column in blockColumns.
const embeddingColumn = 1

// lightBlockOf is readLightBlock on the block's data.
func lightBlockOf(ref BlockRef, data []byte) (b *lightBlock, err error) {
	defer func() {
		if p := recover(); p != nil {
			b, err = nil, fmt.Errorf("read parquet: %v", p)
		}
	}()
	f, recs, err := openBlock(ref, data, embeddingColumn)
	switch {
	case err != nil:
		return nil, err
	case f == nil:
		return &lightBlock{recs: recs}, nil
	}
	ids, err := blockIDs(f, ref)
	if err != nil {
		return nil, err
	}
	n := len(ids)
	b = &lightBlock{ids: ids, docEnd: make([]uint32, 0, n), metaEnd: make([]uint32, 0, n), has: make([]uint8, n)}
	chunks := f.RowGroups()[0].ColumnChunks()
	for _, c := range []struct {
		name  string
		bytes *[]byte
		ends  *[]uint32
		bit   uint8
	}{{"document", &b.docs, &b.docEnd, hasDocument}, {"metadata", &b.metas, &b.metaEnd, hasMetadata}} {
		leaf, _ := f.Schema().Lookup(c.name)
		row := 0
		err := eachValue(chunks[leaf.ColumnIndex], func(v parquet.Value) error {
			if row >= n {
				return fmt.Errorf("more values than the %d rows", n)
			}
			if !v.IsNull() {
				*c.bytes = append(*c.bytes, v.ByteArray()...)
				b.has[row] |= c.bit
			}
			*c.ends = append(*c.ends, uint32(len(*c.bytes)))
			row++
			return nil
		})
		if err == nil && row != n {
			err = fmt.Errorf("%d values for %d rows", row, n)
		}
		if err != nil {
			return nil, fmt.Errorf("read column %s: %w", c.name, err)
		}
	}
	return b, nil
}

// openBlock checks the data of block ref (its size against ref, then
// inspectBlockUnread with unread; -1: every column is read) and opens it as
// a Parquet file of one row group; a block of more than one row group is
// decoded whole instead, as recs (f nil).
func openBlock(ref BlockRef, data []byte, unread int) (f *parquet.File, recs []materialize.Record, err error) {
	if ref.Bytes > 0 && int64(len(data)) != ref.Bytes {
		return nil, nil, fmt.Errorf("%d bytes, manifest says %d", len(data), ref.Bytes)
	}
	if _, err := inspectBlockUnread(data, ref.Records, MaxBlockDecodeBytes, unread); err != nil {
		return nil, nil, err
	}
	if f, err = openParquet(data, blockColumns); err != nil {
		return nil, nil, err
	}
	if len(f.RowGroups()) != 1 {
		recs, err := decodeBlock(data, ref.Records)
		return nil, recs, err
	}
	return f, nil, nil
}

// blockIDs decodes the id column of f, a block of one row group, and
// checks it against ref: sorted, unique, ref.Records of them, from
// ref.MinID to ref.MaxID.
//
// The ids are substrings of one string holding them back to back: one
// allocation per block instead of one per id, which a cache of many blocks
// (the row cache: a million ids at 1,000,000 records) would otherwise hand
// the garbage collector to mark one by one.
func blockIDs(f *parquet.File, ref BlockRef) ([]string, error) {
	idCol, _ := f.Schema().Lookup("id")
	var text []byte
	ends := make([]int, 0, max(0, min(ref.Records, 1<<16)))
	err := eachValue(f.RowGroups()[0].ColumnChunks()[idCol.ColumnIndex], func(v parquet.Value) error {
		id := v.ByteArray()
		if n := len(ends); n > 0 && bytes.Compare(id, text[endBefore(ends, n):]) <= 0 {
			return fmt.Errorf("ids not sorted and unique at row %d (%q)", n, id)
		}
		text = append(text, id...)
		ends = append(ends, len(text))
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read id column: %w", err)
	}
	all := string(text)
	ids := make([]string, len(ends))
	for i, end := range ends {
		ids[i] = all[endBefore(ends, i):end]
	}
	n := int64(len(ids))
	switch {
	case n != ref.Records:
		return nil, fmt.Errorf("%d records, manifest says %d", n, ref.Records)
	case n > 0 && (ids[0] != ref.MinID || ids[n-1] != ref.MaxID):
		return nil, fmt.Errorf("ids [%q, %q], manifest says [%q, %q]", ids[0], ids[n-1], ref.MinID, ref.MaxID)
	}
	return ids, nil
}

// eachValue calls fn with every value of chunk in order, page by page (a
// value's bytes are valid during the call only), until fn returns an
// error, which it returns.
func eachValue(chunk parquet.ColumnChunk, fn func(parquet.Value) error) error {
	pages := chunk.Pages()
	defer pages.Close()
	vals := make([]parquet.Value, 256)
	for {
		p, err := pages.ReadPage()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		vr := p.Values()
		for {
			k, err := vr.ReadValues(vals)
			for _, v := range vals[:k] {
				if ferr := fn(v); ferr != nil {
					parquet.Release(p)
					return ferr
				}
			}
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				parquet.Release(p)
				return err
			}
			if k == 0 {
				parquet.Release(p)
				return errors.New("no progress reading a page")
			}
		}
		parquet.Release(p)
	}
}

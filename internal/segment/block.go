package segment

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"slices"
	"sync"

	kzstd "github.com/klauspost/compress/zstd"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
	"github.com/parquet-go/parquet-go/compress/zstd"

	"github.com/compactorhq/compactor/internal/materialize"
)

// blockFormatKey is a key of the Parquet key/value metadata of every block;
// its value is the block format version: blockFormatVersion for the blocks
// written now, any of readableBlockFormats for the blocks read.
//
// Version 1: the embedding element column PLAIN-encoded, data pages v2 of
// 256 KiB. Version 2 (same schema, same values): the embedding element
// column dictionary-encoded when the block has few distinct float values
// (see dictionaryFits), BYTE_STREAM_SPLIT otherwise; data pages v1 (levels
// compressed with the values) of 1 MiB. Both read as the same rows.
//
// Version 2 blocks written since 2026-12 differ in what a Parquet reader
// decodes by itself, so they keep the version (readers of every earlier
// release read them): the document and metadata columns PLAIN (before:
// DELTA_LENGTH_BYTE_ARRAY), the string columns at a higher zstd level
// (stringCodec), and no min/max statistics for the embedding, document and
// metadata columns (see blockWriterOptions).
const (
	blockFormatKey     = "compactor.block_format"
	blockFormatVersion = "2"
)

// readableBlockFormats are the block format versions decodeBlock reads.
var readableBlockFormats = []string{"1", "2"}

// blockRow is one row of a block file. The column names and types are the
// public format (see the package documentation): do not change them without
// a new format version. Metadata is the record's metadata as a JSON object
// (UTF-8, a Parquet STRING), nil for none.
type blockRow struct {
	ID        string    `parquet:"id,zstd"`
	Embedding []float32 `parquet:"embedding,optional,list,zstd"`
	Document  *string   `parquet:"document,optional,zstd"`
	Metadata  *string   `parquet:"metadata,optional,zstd"` // a JSON object
}

// blockRowDict and blockRowSplit are blockRow as written by format version
// 2, with the embedding element column dictionary-encoded or
// BYTE_STREAM_SPLIT. The schema is blockRow's: only the encoding differs.
// The string columns carry no codec tag: they take stringCodec, the
// writer's default (blockWriterOptions); the embedding keeps zstd's default
// level, which gains nothing more on dictionary indices or split floats.
type (
	blockRowDict struct {
		ID        string    `parquet:"id"`
		Embedding []float32 `parquet:"embedding,optional,list,zstd" parquet-element:",dict"`
		Document  *string   `parquet:"document,optional,plain"`
		Metadata  *string   `parquet:"metadata,optional,plain"` // a JSON object
	}
	blockRowSplit struct {
		ID        string    `parquet:"id"`
		Embedding []float32 `parquet:"embedding,optional,list,zstd" parquet-element:",split"`
		Document  *string   `parquet:"document,optional,plain"`
		Metadata  *string   `parquet:"metadata,optional,plain"` // a JSON object
	}
)

// stringCodec compresses the id, document and metadata columns of a block:
// zstd at klauspost/compress's SpeedBetterCompression (about zstd level 7)
// in place of its default. On scripts/bench's records (60,438 rows in 16
// blocks) it saved 51 KB of 1.45 MB of string columns at about the same
// encode CPU; SpeedBestCompression would save 105 KB but allocates 34 MiB
// of match tables per encoder and clears them per page (five to ten times
// the CPU). One value shared by every encoder.
var stringCodec = newWindowedZstd(zstd.SpeedBetterCompression)

// embeddingCodec compresses the embedding column of a block: zstd at
// the library's default level, as the column's tag says, through a
// windowedZstd (17.7 MiB an encoder after a 1 MiB page with the default
// window, 6.4 MiB with windowedZstd's; the same bytes out). A struct tag
// can only name parquet-go's own codec, so blockWriterOptions sets it on
// the schema (withLeafCodec).
var embeddingCodec compress.Codec = newWindowedZstd(zstd.DefaultLevel)

// withLeafCodec returns node with the leaf column at path (field names
// from node down) compressed by codec; every other column, and every
// other property of that leaf, as node has them.
func withLeafCodec(node parquet.Node, codec compress.Codec, path ...string) parquet.Node {
	return codecNode{Node: node, path: path, codec: codec}
}

// codecNode is a schema node on the way to the leaf withLeafCodec changes.
type codecNode struct {
	parquet.Node
	path  []string // from this node to the leaf; empty at the leaf
	codec compress.Codec
}

func (n codecNode) Compression() compress.Codec {
	if len(n.path) == 0 {
		return n.codec
	}
	return n.Node.Compression()
}

func (n codecNode) Fields() []parquet.Field {
	fields := n.Node.Fields()
	if len(n.path) == 0 {
		return fields
	}
	out := slices.Clone(fields)
	for i, f := range out {
		if f.Name() == n.path[0] {
			out[i] = codecField{codecNode: codecNode{Node: f, path: n.path[1:], codec: n.codec}, field: f}
		}
	}
	return out
}

// codecField is a codecNode that is a field of its parent.
type codecField struct {
	codecNode
	field parquet.Field
}

func (f codecField) Name() string                           { return f.field.Name() }
func (f codecField) Value(base reflect.Value) reflect.Value { return f.field.Value(base) }

// windowedZstd is parquet-go's zstd codec with the encoder's window bounded
// by the size of a block's pages: a page is compressed as one frame, so a
// match never reaches further back than the page, and for a page up to the
// window a larger window only sizes the encoder's history buffer (a rarer,
// larger page, one row's value past the window, finds its matches up to the
// window back: a valid frame, perhaps a few bytes longer). At
// SpeedBetterCompression an encoder held 20.5 MiB after a 1 MiB page with
// the library's 8 MiB default window and 6.4 MiB with a 2 MiB window (and
// its lower-memory option), for the same bytes out. The encoders are
// pooled: one per goroutine compressing at a time. Decoding is parquet-go's.
type windowedZstd struct {
	zstd.Codec // String, CompressionCodec, Decode
	level      zstd.Level
	encoders   sync.Pool // *kzstd.Encoder
}

// zstdWindowBytes is windowedZstd's encoder window: a power of two of at
// least blockPageBytes, as parquet-go may let a page run past that size by
// a row's values.
const zstdWindowBytes = 2 * blockPageBytes

func newWindowedZstd(level zstd.Level) *windowedZstd {
	return &windowedZstd{Codec: zstd.Codec{Level: level}, level: level}
}

// Encode appends the zstd frame of src to dst[:0] and returns it.
func (c *windowedZstd) Encode(dst, src []byte) ([]byte, error) {
	e, _ := c.encoders.Get().(*kzstd.Encoder)
	if e == nil {
		var err error
		e, err = kzstd.NewWriter(nil, kzstd.WithEncoderLevel(c.level), kzstd.WithEncoderConcurrency(1),
			kzstd.WithWindowSize(zstdWindowBytes), kzstd.WithLowerEncoderMem(true),
			kzstd.WithZeroFrames(true), kzstd.WithEncoderCRC(false))
		if err != nil {
			return nil, fmt.Errorf("zstd encoder: %w", err)
		}
	}
	out := e.EncodeAll(src, dst[:0])
	c.encoders.Put(e)
	return out, nil
}

// unprunedColumns are the block columns no reader prunes by (page index or
// chunk statistics): their min/max bounds are left out of the column index
// and the chunk metadata. The id column keeps them (DuckDB and other
// readers of a block may skip it by id).
var unprunedColumns = [][]string{{"embedding", "list", "element"}, {"document"}, {"metadata"}}

// blockWriterOptions are the parquet-go writer options of a block of rows
// of type T (format version 2): the schema named as format version 1's,
// the format key, data pages v1 of blockPageBytes, stringCodec for the
// untagged columns, no page header statistics (the readers here skip the
// page index and never read them; the column index carries the same), and
// no bounds for unprunedColumns.
func blockWriterOptions[T any]() []parquet.WriterOption {
	var zero T
	opts := []parquet.WriterOption{
		// The root keeps the name of format version 1's schema.
		parquet.NewSchema("blockRow", withLeafCodec(parquet.SchemaOf(zero), embeddingCodec, "embedding", "list", "element")),
		parquet.KeyValueMetadata(blockFormatKey, blockFormatVersion),
		parquet.DataPageVersion(1),
		parquet.PageBufferSize(blockPageBytes),
		parquet.Compression(stringCodec),
		parquet.DataPageStatistics(false),
	}
	for _, path := range unprunedColumns {
		opts = append(opts, parquet.SkipPageBounds(path...))
	}
	return opts
}

// blockPageBytes is the target size of a data page before compression:
// larger pages compress better (zstd sees more of a column at once) and a
// block holds at most a few MiB per column.
const blockPageBytes = 1 << 20

// maxDictionaryValues bounds the distinct float values of a block whose
// embedding column is dictionary-encoded (indices of at most 16 bits).
const maxDictionaryValues = 1 << 16

// blockEncoder holds the buffers encoding one block needs, reused across
// blocks through encoders (a sync.Pool): the rows, the metadata JSON of all
// rows, the output buffer and the set that counts distinct float values.
// One goroutine uses it at a time. (The Parquet writer itself is made per
// block: parquet-go's GenericWriter.Reset loses the column paths of the
// footer on reuse.)
type blockEncoder struct {
	dictRows  []blockRowDict
	splitRows []blockRowSplit
	meta      []byte // metadata JSON of every record, back to back
	metaEnd   []int  // end offset in meta of record i's JSON; -1: none
	metaBuf   bytes.Buffer
	metaEnc   *json.Encoder
	out       bytes.Buffer
	distinct  floatSet
}

// encoders pools blockEncoders: encodeBlock is called from several
// goroutines at once, each takes its own.
var encoders = sync.Pool{New: func() any {
	e := &blockEncoder{}
	e.metaEnc = json.NewEncoder(&e.metaBuf)
	e.metaEnc.SetEscapeHTML(false)
	return e
}}

// encodeBlock encodes recs (sorted by id, unique, non-empty) as one Parquet
// file of the current block format. It refuses a block that decodeBlock
// would refuse: one whose decode needs more than MaxBlockDecodeBytes. Safe
// for concurrent use.
func encodeBlock(recs []materialize.Record) ([]byte, error) {
	return encodeBlockWithin(recs, MaxBlockDecodeBytes)
}

// encodeBlockWithin is encodeBlock with limit in place of
// MaxBlockDecodeBytes.
func encodeBlockWithin(recs []materialize.Record, limit int64) ([]byte, error) {
	e := encoders.Get().(*blockEncoder)
	defer encoders.Put(e)
	defer e.release()
	if err := e.encodeMetadata(recs); err != nil {
		return nil, err
	}
	values := 0
	for i := range recs {
		values += len(recs[i].Embedding)
	}
	var err error
	if e.distinct.fits(recs, min(maxDictionaryValues, values/8)) {
		e.dictRows, err = writeBlock(&e.out, e.dictRows, recs, e)
	} else {
		e.splitRows, err = writeBlock(&e.out, e.splitRows, recs, e)
	}
	if err != nil {
		return nil, err
	}
	data := bytes.Clone(e.out.Bytes())
	// Never write a block that decodeBlock would refuse.
	if _, err := inspectBlock(data, int64(len(recs)), limit); err != nil {
		return nil, fmt.Errorf("%w: %d records (lower --max-block-records if records are this large): %w", ErrBlockTooLarge, len(recs), err)
	}
	return data, nil
}

// release drops the references to the caller's records, so that a pooled
// encoder keeps no record alive.
func (e *blockEncoder) release() {
	clear(e.dictRows)
	clear(e.splitRows)
	e.dictRows, e.splitRows = e.dictRows[:0], e.splitRows[:0]
	e.out.Reset()
}

// encodeMetadata checks the ids' order and every record's metadata, and
// encodes the metadata as JSON into e.meta.
func (e *blockEncoder) encodeMetadata(recs []materialize.Record) error {
	e.meta = e.meta[:0]
	e.metaEnd = slices.Grow(e.metaEnd[:0], len(recs))[:len(recs)]
	for i := range recs {
		r := &recs[i]
		if i > 0 && recs[i-1].ID >= r.ID {
			return fmt.Errorf("records not sorted by unique id at %q", r.ID)
		}
		e.metaEnd[i] = -1
		if r.Metadata == nil {
			continue
		}
		if err := checkMetadata(r.Metadata); err != nil {
			return fmt.Errorf("record %q: %w", r.ID, err)
		}
		e.metaBuf.Reset()
		if err := e.metaEnc.Encode(map[string]any(r.Metadata)); err != nil {
			return fmt.Errorf("record %q: metadata: %w", r.ID, err)
		}
		e.meta = append(e.meta, bytes.TrimSuffix(e.metaBuf.Bytes(), []byte("\n"))...)
		e.metaEnd[i] = len(e.meta)
	}
	return nil
}

// writeBlock writes recs into out as one Parquet file of rows of type T
// (one row group: a block holds at most MaxBlockRecords rows), reusing
// rows' array; it returns rows.
func writeBlock[T blockRowDict | blockRowSplit](out *bytes.Buffer, rows []T, recs []materialize.Record, e *blockEncoder) ([]T, error) {
	rows = slices.Grow(rows[:0], len(recs))[:len(recs)]
	start := 0
	for i := range recs {
		r := &recs[i]
		row := blockRow{ID: r.ID, Embedding: r.Embedding, Document: r.Document}
		if end := e.metaEnd[i]; end >= 0 {
			// A *string, not a []byte: parquet-go writes an optional nil
			// []byte of some rows as an empty string instead of null.
			m := string(e.meta[start:end])
			row.Metadata = &m
			start = end
		}
		rows[i] = T(row)
	}
	out.Reset()
	w := parquet.NewGenericWriter[T](out, blockWriterOptions[T]()...)
	if _, err := w.Write(rows); err != nil {
		return rows, fmt.Errorf("write parquet: %w", err)
	}
	if err := w.Close(); err != nil {
		return rows, fmt.Errorf("write parquet: %w", err)
	}
	return rows, nil
}

// floatSet counts the distinct float32 values (bit patterns) of a block's
// embeddings, up to a limit: an open-addressing hash set of
// 2*maxDictionaryValues slots, reused across blocks.
type floatSet struct {
	slots []uint32 // bit pattern + 1 would overflow: 0 marks an empty slot
	used  []int    // indices of the occupied slots, to clear them
	zero  bool     // the bit pattern 0 (+0.0) was seen
}

const floatSetBits = 17 // 2^17 = 2*maxDictionaryValues slots

// fits reports whether the embeddings of recs hold at most limit distinct
// values (stopping at the first value past it).
func (s *floatSet) fits(recs []materialize.Record, limit int) bool {
	if s.slots == nil {
		s.slots = make([]uint32, 1<<floatSetBits)
	}
	defer func() {
		for _, i := range s.used {
			s.slots[i] = 0
		}
		s.used = s.used[:0]
		s.zero = false
	}()
	n := 0
	const mask = 1<<floatSetBits - 1
	for i := range recs {
		for _, f := range recs[i].Embedding {
			v := math.Float32bits(f)
			if v == 0 {
				if !s.zero {
					s.zero = true
					if n++; n > limit {
						return false
					}
				}
				continue
			}
			h := (v * 0x9e3779b1) >> (32 - floatSetBits)
			for {
				switch s.slots[h] {
				case v:
				case 0:
					s.slots[h] = v
					s.used = append(s.used, int(h))
					if n++; n > limit {
						return false
					}
				default:
					h = (h + 1) & mask
					continue
				}
				break
			}
		}
	}
	return true
}

// checkMetadata rejects values that would not decode to what they are:
// anything but strings, bools and finite float64s.
func checkMetadata(m materialize.Metadata) error {
	for k, v := range m {
		switch v := v.(type) {
		case string, bool:
		case float64:
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return fmt.Errorf("metadata key %q: %v cannot be stored", k, v)
			}
		default:
			return fmt.Errorf("metadata key %q: value of type %T is not a string, float64 or bool", k, v)
		}
	}
	return nil
}

// openParquet opens data as a Parquet file (page indexes and bloom filters
// skipped) whose schema has every leaf column of columns, by path.
func openParquet(data []byte, columns [][]string) (*parquet.File, error) {
	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)),
		parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true))
	if err != nil {
		return nil, fmt.Errorf("open parquet: %w", err)
	}
	schema := f.Schema()
	for _, path := range columns {
		if _, ok := schema.Lookup(path...); !ok {
			return nil, fmt.Errorf("parquet schema lacks column %q", path)
		}
	}
	return f, nil
}

// decodeBlock decodes a block file written by encodeBlock. It checks the
// file's structure and every size it claims before parquet-go allocates from
// them (see inspectBlock), the schema, and that ids are sorted and unique.
// wantRows is the record count the manifest gives for the block (< 0:
// unknown, only the file's own consistency and MaxBlockDecodeBytes bound the
// decode).
//
// A block whose pages have the shapes the writer gives them is decoded
// from its column pages (columnBuffers.records): 2.3× (64-dim embeddings
// and the Debian sample's metadata) to 4× (128-dim) the records/s of
// parquet-go's row reconstruction (BenchmarkDecodeBlock), which reads every
// other block and gives every error: a block the direct path refuses for
// any reason is decoded again by rows, so errors are the row decode's.
func decodeBlock(data []byte, wantRows int64) ([]materialize.Record, error) {
	d := columnBufferPool.Get().(*columnBuffers)
	recs, err := d.records(data, wantRows)
	d.release()
	columnBufferPool.Put(d)
	if err == nil {
		return recs, nil
	}
	return decodeBlockRows(data, wantRows)
}

// decodeBlockRows is decodeBlock through parquet-go's row reconstruction.
func decodeBlockRows(data []byte, wantRows int64) (recs []materialize.Record, err error) {
	// parquet-go panics on some malformed inputs; a corrupt block must be an
	// error, not a crash.
	defer func() {
		if p := recover(); p != nil {
			recs, err = nil, fmt.Errorf("read parquet: %v", p)
		}
	}()
	info, err := inspectBlock(data, wantRows, MaxBlockDecodeBytes)
	if err != nil {
		return nil, err
	}
	f, err := openParquet(data, blockColumns)
	if err != nil {
		return nil, err
	}
	if v, ok := f.Lookup(blockFormatKey); !ok || !slices.Contains(readableBlockFormats, v) {
		return nil, fmt.Errorf("parquet key/value metadata %s = %.20q: not a block format this version reads (%v)", blockFormatKey, v, readableBlockFormats)
	}
	r := parquet.NewGenericReader[blockRow](f)
	defer r.Close()
	return readRows(r, info.rows, func(row *blockRow) (materialize.Record, string, error) {
		rec, err := recordOf(row)
		return rec, rec.ID, err
	})
}

// readRows reads the rows rows of r in batches (so that memory grows with
// the rows that actually decode rather than with what the footer claims),
// converts each with conv, which also returns the row's id, and checks that
// the ids ascend strictly. Blocks and deltas share it.
func readRows[R, T any](r *parquet.GenericReader[R], rows int64, conv func(*R) (T, string, error)) ([]T, error) {
	const batch = 256
	buf := make([]R, min(rows, batch))
	out := make([]T, 0, min(rows, batch))
	var last string
	for int64(len(out)) < rows {
		want := min(rows-int64(len(out)), int64(len(buf)))
		m, err := r.Read(buf[:want])
		for i := range buf[:m] {
			v, id, cerr := conv(&buf[i])
			if cerr != nil {
				return nil, cerr
			}
			if n := len(out); n > 0 && last >= id {
				return nil, fmt.Errorf("ids not sorted and unique at row %d (%q)", n, id)
			}
			last = id
			out = append(out, v)
		}
		clear(buf[:m])
		if err != nil {
			if errors.Is(err, io.EOF) && int64(len(out)) == rows {
				break
			}
			if errors.Is(err, io.EOF) {
				return nil, fmt.Errorf("read parquet: %d of %d rows", len(out), rows)
			}
			return nil, fmt.Errorf("read parquet: %w", err)
		}
		if m == 0 {
			return nil, fmt.Errorf("read parquet: no progress at row %d of %d", len(out), rows)
		}
	}
	return out, nil
}

// decodeBlockOf decodes the block ref names from its data and checks it
// against ref: size, record count and id range. Errors are *CorruptError.
func decodeBlockOf(ref BlockRef, data []byte) ([]materialize.Record, error) {
	if ref.Bytes > 0 && int64(len(data)) != ref.Bytes {
		return nil, corrupt(KindBlock, ref.Key, fmt.Errorf("%d bytes, manifest says %d", len(data), ref.Bytes))
	}
	recs, err := decodeBlock(data, ref.Records)
	if err != nil {
		return nil, corrupt(KindBlock, ref.Key, err)
	}
	if int64(len(recs)) != ref.Records {
		return nil, corrupt(KindBlock, ref.Key, fmt.Errorf("%d records, manifest says %d", len(recs), ref.Records))
	}
	if len(recs) > 0 && (recs[0].ID != ref.MinID || recs[len(recs)-1].ID != ref.MaxID) {
		return nil, corrupt(KindBlock, ref.Key, fmt.Errorf("ids [%q, %q], manifest says [%q, %q]",
			recs[0].ID, recs[len(recs)-1].ID, ref.MinID, ref.MaxID))
	}
	return recs, nil
}

// records is decodeBlock's direct path: the block's records built from
// its columns as read by d.read, with the row decode's values (a null
// embedding list is nil, an empty one empty; metadata decodes as
// decodeMetadata does). Each record owns its id, document and embedding,
// as the row decode's do: a record kept after its block (a query's hit, a
// merge's survivor) keeps its own bytes alive, not the block's columns.
// Any error means "not read here".
func (d *columnBuffers) records(data []byte, wantRows int64) (recs []materialize.Record, err error) {
	defer func() {
		if p := recover(); p != nil {
			recs, err = nil, fmt.Errorf("read parquet: %v", p)
		}
	}()
	rows, err := d.read(data, wantRows)
	if err != nil {
		return nil, err
	}
	recs = make([]materialize.Record, rows)
	idStart, embStart, docStart, metStart := 0, 0, 0, 0
	for i := range recs {
		r := &recs[i]
		id := d.ids[idStart:d.idEnd[i]]
		idStart = d.idEnd[i]
		if i > 0 && recs[i-1].ID >= string(id) {
			return nil, fmt.Errorf("ids not sorted and unique at row %d (%q)", i, id)
		}
		r.ID = string(id)
		if end := d.embEnd[i]; !d.embNull[i] {
			r.Embedding = append(make([]float32, 0, end-embStart), d.floats[embStart:end]...)
		}
		embStart = d.embEnd[i]
		if end := d.docEnd[i]; end >= 0 {
			doc := string(d.docs[docStart:end])
			r.Document = &doc
			docStart = end
		}
		if end := d.metEnd[i]; end >= 0 {
			m, err := decodeMetadata(d.meta[metStart:end])
			if err != nil {
				return nil, fmt.Errorf("record %q: metadata: %w", r.ID, err)
			}
			r.Metadata = m // nil for the JSON literal null
			metStart = end
		}
	}
	return recs, nil
}

// recordOf converts one decoded row.
func recordOf(row *blockRow) (materialize.Record, error) {
	rec := materialize.Record{ID: row.ID, Embedding: row.Embedding, Document: row.Document}
	if row.Metadata != nil {
		m, err := decodeMetadata([]byte(*row.Metadata))
		if err != nil {
			return materialize.Record{}, fmt.Errorf("record %q: metadata: %w", row.ID, err)
		}
		rec.Metadata = m // nil for the JSON literal null
	}
	return rec, nil
}

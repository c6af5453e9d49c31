package segment

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"sync"
	"unicode/utf8"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding"
	"github.com/parquet-go/parquet-go/format"
)

// blockDigestOf returns the digest of the records that the block ref
// names holds, as read from data: DigestOf(decodeBlockOf(ref, data)),
// with the same checks and the same errors (*CorruptError). want is the
// digest the caller expects: a block of the current format whose column
// pages have the shapes the writer gives them (one row group; ids, documents
// and metadata plain byte arrays; embedding floats plain or from a
// dictionary) is hashed straight from its decoded pages, without
// reconstructing rows; when that fails, or yields a digest other than
// want, the block is decoded and digested as decodeBlockOf does, whose
// result is returned. Safe for concurrent use.
func blockDigestOf(ref BlockRef, data []byte, want Digest) (Digest, error) {
	d := columnBufferPool.Get().(*columnBuffers)
	got, err := d.digest(ref, data)
	d.release()
	columnBufferPool.Put(d)
	if err == nil && got == want {
		return got, nil
	}
	recs, err := decodeBlockOf(ref, data)
	if err != nil {
		return Digest{}, err
	}
	return DigestOf(recs), nil
}

// columnBuffers holds the columns of one block, as flat buffers reused
// across blocks (columnBufferPool), while its records are hashed
// (blockDigestOf) or built (decodeBlock).
type columnBuffers struct {
	ids     []byte
	idEnd   []int     // end in ids of row i's id
	floats  []float32 // the embeddings' values, row after row
	embEnd  []int     // end in floats of row i's embedding
	embNull []bool    // row i's embedding is a null list (not an empty one)
	docs    []byte
	docEnd  []int // end in docs of row i's document; -1: null
	meta    []byte
	metEnd  []int // end in meta of row i's metadata JSON; -1: null
	buf     []byte
	pairs   []metaPair
}

var columnBufferPool = sync.Pool{New: func() any { return &columnBuffers{} }}

// maxPooledColumnBuffers bounds the buffer bytes a pooled columnBuffers keeps.
const maxPooledColumnBuffers = 64 << 20

// release empties d's buffers, dropping the ones too large to keep.
func (d *columnBuffers) release() {
	ends := 8 * (cap(d.idEnd) + cap(d.embEnd) + cap(d.docEnd) + cap(d.metEnd))
	if cap(d.ids)+cap(d.docs)+cap(d.meta)+4*cap(d.floats)+ends+cap(d.embNull) > maxPooledColumnBuffers {
		*d = columnBuffers{}
		return
	}
	d.ids, d.idEnd, d.floats, d.embEnd, d.embNull = d.ids[:0], d.idEnd[:0], d.floats[:0], d.embEnd[:0], d.embNull[:0]
	d.docs, d.docEnd, d.meta, d.metEnd = d.docs[:0], d.docEnd[:0], d.meta[:0], d.metEnd[:0]
	d.buf = d.buf[:0]
	clear(d.pairs)
	d.pairs = d.pairs[:0]
}

// errPageShape: a page of a shape the direct paths do not read (the row
// reconstruction reads it).
var errPageShape = errors.New("page of another shape")

// digest is blockDigestOf's direct path: any error means "not shown", the
// caller then decodes the block in full.
func (d *columnBuffers) digest(ref BlockRef, data []byte) (_ Digest, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("read parquet: %v", p)
		}
	}()
	if ref.Bytes > 0 && int64(len(data)) != ref.Bytes {
		return Digest{}, fmt.Errorf("%d bytes, manifest says %d", len(data), ref.Bytes)
	}
	rows, err := d.read(data, ref.Records)
	if err != nil {
		return Digest{}, err
	}
	if int64(rows) != ref.Records {
		return Digest{}, fmt.Errorf("%d records, manifest says %d", rows, ref.Records)
	}
	var sum Digest
	var prevID []byte
	idStart, embStart, docStart, metStart := 0, 0, 0, 0
	for i := range rows {
		id := d.ids[idStart:d.idEnd[i]]
		idStart = d.idEnd[i]
		if i > 0 && string(prevID) >= string(id) {
			return Digest{}, fmt.Errorf("ids not sorted and unique at row %d (%q)", i, id)
		}
		prevID = id
		buf := appendBytes(append(d.buf[:0], recordHashDomain...), id)
		buf = appendCanonicalEmbedding(buf, d.floats[embStart:d.embEnd[i]])
		embStart = d.embEnd[i]
		if end := d.docEnd[i]; end < 0 {
			buf = append(buf, 0)
		} else {
			buf = appendBytes(append(buf, 1), d.docs[docStart:end])
			docStart = end
		}
		if end := d.metEnd[i]; end < 0 {
			buf = appendCanonicalMetadata(buf, nil)
		} else {
			text := d.meta[metStart:end]
			metStart = end
			var ok bool
			if buf, d.pairs, ok = appendFlatMetadata(buf, text, d.pairs); !ok {
				m, err := decodeMetadata(text)
				if err != nil {
					return Digest{}, fmt.Errorf("record %q: metadata: %w", id, err)
				}
				buf = appendCanonicalMetadata(buf, m)
			}
		}
		h := sha256.Sum256(buf)
		sum = sum.Add(Digest{Hi: binary.BigEndian.Uint64(h[:8]), Lo: binary.BigEndian.Uint64(h[8:16])})
		d.buf = buf
	}
	if rows > 0 && (string(d.ids[:d.idEnd[0]]) != ref.MinID || string(prevID) != ref.MaxID) {
		return Digest{}, fmt.Errorf("ids [%q, %q], manifest says [%q, %q]", d.ids[:d.idEnd[0]], prevID, ref.MinID, ref.MaxID)
	}
	return sum, nil
}

// read fills d with the four columns of the block file data, read from
// their pages without reconstructing rows, and returns its row count.
// wantRows is as decodeBlock's. It checks what decodeBlock checks before
// it allocates (inspectBlock), and that every column has one value (or
// null) per row; errPageShape for a block the direct path does not read
// (another format, several row groups, pages of other encodings). The
// caller recovers parquet-go's panics.
func (d *columnBuffers) read(data []byte, wantRows int64) (rows int, err error) {
	info, err := inspectBlock(data, wantRows, MaxBlockDecodeBytes)
	if err != nil {
		return 0, err
	}
	f, err := openParquet(data, blockColumns)
	if err != nil {
		return 0, err
	}
	if v, ok := f.Lookup(blockFormatKey); !ok || !slices.Contains(readableBlockFormats, v) {
		return 0, errPageShape
	}
	if len(f.RowGroups()) != 1 {
		return 0, errPageShape
	}
	chunks := f.RowGroups()[0].ColumnChunks()
	schema := f.Schema()
	meta := f.Metadata().RowGroups[0].Columns
	leaf := func(i int, kind parquet.Kind, rep, def int) (parquet.ColumnChunk, error) {
		c, _ := schema.Lookup(blockColumns[i]...)
		if c.Node.Type().Kind() != kind || c.MaxRepetitionLevel != rep || c.MaxDefinitionLevel != def || c.ColumnIndex >= len(chunks) || c.ColumnIndex >= len(meta) {
			return nil, errPageShape
		}
		// The chunk must say it is that column, of that type: a file
		// whose footer disagrees with its schema is read by rows.
		if cm := meta[c.ColumnIndex].MetaData; !slices.Equal(cm.PathInSchema, blockColumns[i]) || cm.Type != format.Type(kind) {
			return nil, errPageShape
		}
		return chunks[c.ColumnIndex], nil
	}
	rows = int(info.rows)
	idc, err := leaf(0, parquet.ByteArray, 0, 0)
	if err != nil {
		return 0, err
	}
	if d.ids, d.idEnd, err = readByteArrays(idc, d.ids, d.idEnd, false); err != nil {
		return 0, err
	}
	embc, err := leaf(1, parquet.Float, 1, embeddingMaxDefinition)
	if err != nil {
		return 0, err
	}
	if err = d.readFloatLists(embc); err != nil {
		return 0, err
	}
	docc, err := leaf(2, parquet.ByteArray, 0, 1)
	if err != nil {
		return 0, err
	}
	if d.docs, d.docEnd, err = readByteArrays(docc, d.docs, d.docEnd, true); err != nil {
		return 0, err
	}
	metc, err := leaf(3, parquet.ByteArray, 0, 1)
	if err != nil {
		return 0, err
	}
	if d.meta, d.metEnd, err = readByteArrays(metc, d.meta, d.metEnd, true); err != nil {
		return 0, err
	}
	if len(d.idEnd) != rows || len(d.embEnd) != rows || len(d.docEnd) != rows || len(d.metEnd) != rows {
		return 0, fmt.Errorf("columns of %d, %d, %d and %d rows in a block of %d", len(d.idEnd), len(d.embEnd), len(d.docEnd), len(d.metEnd), rows)
	}
	return rows, nil
}

// readByteArrays appends the values of chunk, a byte array column of plain
// (not dictionary) pages, to data, and the end of each row's value in data
// to ends (-1 for a null, when optional: its definition level 0).
func readByteArrays(chunk parquet.ColumnChunk, data []byte, ends []int, optional bool) ([]byte, []int, error) {
	pages := chunk.Pages()
	defer pages.Close()
	for {
		p, err := pages.ReadPage()
		if errors.Is(err, io.EOF) {
			return data, ends, nil
		}
		if err != nil {
			return data, ends, err
		}
		data, ends, err = appendByteArrayPage(p, data, ends, optional)
		parquet.Release(p)
		if err != nil {
			return data, ends, err
		}
	}
}

func appendByteArrayPage(p parquet.Page, data []byte, ends []int, optional bool) ([]byte, []int, error) {
	if p.Dictionary() != nil || len(p.RepetitionLevels()) != 0 {
		return data, ends, errPageShape
	}
	vals := p.Data()
	if vals.Kind() != encoding.ByteArray {
		return data, ends, errPageShape
	}
	b, offs := vals.ByteArray()
	n := len(offs) - 1
	if n < 0 {
		n = 0
	}
	defs := p.DefinitionLevels()
	if !optional {
		if len(defs) != 0 || int64(n) != p.NumRows() {
			return data, ends, errPageShape
		}
		for k := range n {
			data = append(data, b[offs[k]:offs[k+1]]...)
			ends = append(ends, len(data))
		}
		return data, ends, nil
	}
	if int64(len(defs)) != p.NumRows() {
		return data, ends, errPageShape
	}
	k := 0
	for _, def := range defs {
		switch def {
		case 0:
			ends = append(ends, -1)
		case 1:
			if k >= n {
				return data, ends, fmt.Errorf("page of %d values has more present levels", n)
			}
			data = append(data, b[offs[k]:offs[k+1]]...)
			ends = append(ends, len(data))
			k++
		default:
			return data, ends, errPageShape
		}
	}
	if k != n {
		return data, ends, fmt.Errorf("page of %d values has %d present levels", n, k)
	}
	return data, ends, nil
}

// readFloatLists appends the values of chunk, the embedding list's
// element column (plain floats, or indexes into a dictionary of floats),
// to d.floats, the end of each row's list in d.floats to d.embEnd, and
// whether it is a null list to d.embNull. A null or empty list has no
// value (the canonical encoding does not tell them apart; the records
// decodeBlock builds do).
func (d *columnBuffers) readFloatLists(chunk parquet.ColumnChunk) error {
	pages := chunk.Pages()
	defer pages.Close()
	for {
		p, err := pages.ReadPage()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		err = d.appendFloatListPage(p)
		parquet.Release(p)
		if err != nil {
			return err
		}
	}
}

func (d *columnBuffers) appendFloatListPage(p parquet.Page) error {
	data := p.Data()
	var vals []float32
	var index []int32 // nil for plain floats
	switch {
	case data.Kind() == encoding.Float && p.Dictionary() == nil:
		vals = data.Float()
	case data.Kind() == encoding.Int32 && p.Dictionary() != nil:
		dict := p.Dictionary().Page().Data()
		if dict.Kind() != encoding.Float {
			return errPageShape
		}
		vals, index = dict.Float(), data.Int32()
	default:
		return errPageShape
	}
	values := len(vals)
	if index != nil {
		values = len(index)
	}
	reps, defs := p.RepetitionLevels(), p.DefinitionLevels()
	if len(reps) != len(defs) || (len(reps) > 0 && reps[0] != 0) {
		return errPageShape
	}
	// The rows' ends first, from the levels (a row starts at each
	// repetition level 0), then the present values in one pass.
	base := len(d.floats)
	rows := int64(0)
	v := 0
	for i, def := range defs {
		if reps[i] == 0 {
			if rows > 0 {
				d.embEnd = append(d.embEnd, base+v)
			}
			d.embNull = append(d.embNull, def == 0)
			rows++
		} else if reps[i] != 1 || defs[i-1] != embeddingMaxDefinition || def != embeddingMaxDefinition {
			// Another element after a null or empty list, or a null
			// element: shapes the writer does not make.
			return errPageShape
		}
		switch def {
		case 0, 1: // a null or empty list
		case embeddingMaxDefinition:
			v++
		default:
			return errPageShape
		}
	}
	if rows > 0 {
		d.embEnd = append(d.embEnd, base+v)
	}
	if v != values || rows != p.NumRows() {
		return fmt.Errorf("page of %d rows and %d floats holds %d row starts and %d present values", p.NumRows(), values, rows, v)
	}
	if index == nil {
		d.floats = append(d.floats, vals...)
		return nil
	}
	for _, x := range index {
		if x < 0 || int(x) >= len(vals) {
			return fmt.Errorf("float index %d outside the page's dictionary of %d", x, len(vals))
		}
		d.floats = append(d.floats, vals[x])
	}
	return nil
}

// metaPair is one key and value of a flat metadata object, as bytes of the
// JSON text it was read from.
type metaPair struct {
	key []byte
	tag byte    // tagString, tagNumber, tagBool, or 0 for null
	s   []byte  // tagString
	num float64 // tagNumber
	b   bool    // tagBool
}

// appendFlatMetadata appends the metadata part of the canonical encoding of
// the metadata JSON text b to buf, as appendCanonicalMetadata of
// decodeMetadata(b) does, for the objects decodeMetadata decodes itself (a
// flat object of strings without escapes, numbers, booleans and nulls;
// a repeated key takes its last value), without building the map. ok
// false, with buf as it was, for any other text: the caller decodes it.
// pairs is scratch space, returned for reuse.
func appendFlatMetadata(buf, b []byte, pairs []metaPair) (_ []byte, _ []metaPair, ok bool) {
	pairs = pairs[:0]
	if !utf8.Valid(b) {
		return buf, pairs, false
	}
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return buf, pairs, false
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		if skipSpace(b, i+1) != len(b) {
			return buf, pairs, false
		}
		return binary.LittleEndian.AppendUint32(buf, 0), pairs, true
	}
	for {
		key, j, ok := plainBytes(b, i)
		if !ok {
			return buf, pairs, false
		}
		i = skipSpace(b, j)
		if i >= len(b) || b[i] != ':' {
			return buf, pairs, false
		}
		i = skipSpace(b, i+1)
		if i >= len(b) {
			return buf, pairs, false
		}
		p := metaPair{key: key}
		switch c := b[i]; {
		case c == '"':
			s, j, ok := plainBytes(b, i)
			if !ok {
				return buf, pairs, false
			}
			p.tag, p.s, i = tagString, s, j
		case c == 't' && hasAt(b, i, "true"):
			p.tag, p.b, i = tagBool, true, i+4
		case c == 'f' && hasAt(b, i, "false"):
			p.tag, i = tagBool, i+5
		case c == 'n' && hasAt(b, i, "null"):
			i += 4
		case c == '-' || c >= '0' && c <= '9':
			j := numberEnd(b, i)
			if j < 0 {
				return buf, pairs, false
			}
			f, err := strconv.ParseFloat(string(b[i:j]), 64)
			if err != nil {
				return buf, pairs, false
			}
			p.tag, p.num, i = tagNumber, f, j
		default:
			return buf, pairs, false
		}
		pairs = append(pairs, p)
		i = skipSpace(b, i)
		if i >= len(b) {
			return buf, pairs, false
		}
		if b[i] == '}' {
			if skipSpace(b, i+1) != len(b) {
				return buf, pairs, false
			}
			break
		}
		if b[i] != ',' {
			return buf, pairs, false
		}
		i = skipSpace(b, i+1)
	}
	// Keys in ascending byte order; of a repeated key, the last value (the
	// stable sort keeps the text's order among equal keys).
	slices.SortStableFunc(pairs, func(x, y metaPair) int { return bytes.Compare(x.key, y.key) })
	n := 0
	for k := range pairs {
		if k+1 < len(pairs) && bytes.Equal(pairs[k].key, pairs[k+1].key) {
			continue
		}
		pairs[n] = pairs[k]
		n++
	}
	pairs = pairs[:n]
	buf = binary.LittleEndian.AppendUint32(buf, uint32(len(pairs)))
	for _, p := range pairs {
		buf = appendBytes(buf, p.key)
		switch p.tag {
		case tagString:
			buf = appendBytes(append(buf, tagString), p.s)
		case tagNumber:
			buf = binary.LittleEndian.AppendUint64(append(buf, tagNumber), math.Float64bits(p.num))
		case tagBool:
			v := byte(0)
			if p.b {
				v = 1
			}
			buf = append(buf, tagBool, v)
		default: // null: as appendCanonicalMetadata encodes a nil value
			buf = appendString(append(buf, '?'), fmt.Sprintf("%T", nil))
		}
	}
	return buf, pairs, true
}

// plainBytes is plainString returning the string's bytes in b.
func plainBytes(b []byte, i int) ([]byte, int, bool) {
	if i >= len(b) || b[i] != '"' {
		return nil, 0, false
	}
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			return b[i+1 : j], j + 1, true
		case c == '\\' || c < 0x20:
			return nil, 0, false
		}
	}
	return nil, 0, false
}

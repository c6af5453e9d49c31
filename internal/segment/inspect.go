package segment

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/klauspost/compress/zstd"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
)

// MaxBlockDecodeBytes bounds the memory one block decode may need, as
// estimated from what the file claims (the uncompressed size of its pages,
// plus per value and per row overheads, see blockInfo.decodeBytes): a block
// that claims more is refused as corrupt before anything is allocated from
// its claims, and the writer refuses to write one (lower
// --max-block-records when records are that large).
const MaxBlockDecodeBytes = 256 << 20

// Estimated bytes of decoded memory per value (levels, offsets, the value
// itself) and per row (a blockRow and a materialize.Record) of a block.
const (
	decodeBytesPerValue = 16
	decodeBytesPerRow   = 200
)

// maxEmbeddingValuesPerRow bounds the values of the embedding column per
// row: the catalog's largest embedding dimension (catalog.maxDimension).
const maxEmbeddingValuesPerRow = 65536

// Limits of a block footer's lists of large structs (the writer writes one
// row group of four leaf columns, whose schema has seven elements).
const (
	maxSchemaElements = 64
	maxRowGroups      = 64
	maxColumnChunks   = 16
)

// blockColumns are the leaf columns of a block, by path.
var blockColumns = [][]string{{"id"}, {"embedding", "list", "element"}, {"document"}, {"metadata"}}

// footerLimit is the thriftWalker limit of a FileMetaData.
func footerLimit(path []int16) int {
	switch {
	case slices.Equal(path, []int16{2}): // schema
		return maxSchemaElements
	case slices.Equal(path, []int16{4}): // row_groups
		return maxRowGroups
	case slices.Equal(path, []int16{4, 1}): // row_groups[*].columns
		return maxColumnChunks
	}
	return 0
}

// blockInfo is what inspectBlock found.
type blockInfo struct {
	rows int64
	// decodeBytes estimates the memory a decode needs: the uncompressed size
	// of every page, decodeBytesPerValue per value and decodeBytesPerRow per
	// row.
	decodeBytes int64
	limit       int64 // most decodeBytes allowed: MaxBlockDecodeBytes
}

// inspectBlock checks the structure of a Parquet block and every size it
// claims, reading the footer and every page header itself with bounded
// decoders, before parquet-go sees the file (parquet-go allocates from the
// claims: a 900-byte file whose footer claims 2^26 rows, or a page header
// that claims 2 GiB, would otherwise exhaust memory). It checks:
//   - magic bytes, and the footer length against the file size;
//   - every list in the footer and the page headers against the bytes left,
//     and the lists of large structs against small limits;
//   - the row count against wantRows (the manifest's record count; < 0:
//     unknown) and against the row groups';
//   - every column chunk: a known column, codec zstd or none, its byte range
//     inside the file, its value count against the rows (exactly the rows
//     for a flat column);
//   - every page: its header and compressed bytes inside the chunk, the
//     value counts of its data pages adding up to the chunk's, and its
//     zstd data decompressing to no more than the uncompressed size it
//     claims (decompressed with that size as the limit);
//   - the estimated decode memory against limit (MaxBlockDecodeBytes but
//     in tests).
func inspectBlock(data []byte, wantRows, limit int64) (blockInfo, error) {
	return inspectParquet(data, wantRows, limit, blockColumns, -1)
}

// inspectBlockUnread is inspectBlock for a read that decodes every column
// but the one at index unread of blockColumns: that column's chunk is
// checked as every other (codec, value count, byte range), its pages are
// not (parquet-go never reads them).
func inspectBlockUnread(data []byte, wantRows, limit int64, unread int) (blockInfo, error) {
	return inspectParquet(data, wantRows, limit, blockColumns, unread)
}

// inspectParquet is inspectBlock for a file of the given columns (paths in
// the schema; a path of more than one element is the embedding list, whose
// values may outnumber the rows): blocks and deltas share it.
func inspectParquet(data []byte, wantRows, limit int64, columns [][]string, unread int) (blockInfo, error) {
	info := blockInfo{limit: limit}
	size := int64(len(data))
	if size < 12 || string(data[:4]) != "PAR1" || string(data[size-4:]) != "PAR1" {
		return info, fmt.Errorf("not a parquet file (%d bytes, no PAR1 magic at both ends)", size)
	}
	footerLen := int64(binary.LittleEndian.Uint32(data[size-8:]))
	if footerLen > size-12 {
		return info, fmt.Errorf("footer of %d bytes claimed in a file of %d bytes", footerLen, size)
	}
	footerStart := size - 8 - footerLen
	footer := data[footerStart : size-8]
	n, err := walkThriftStruct(footer, footerLimit)
	if err != nil {
		return info, fmt.Errorf("footer: %w", err)
	}
	if n != len(footer) {
		return info, fmt.Errorf("footer: %d trailing bytes", len(footer)-n)
	}
	var meta format.FileMetaData
	if err := thrift.Unmarshal(new(thrift.CompactProtocol), footer, &meta); err != nil {
		return info, fmt.Errorf("footer: %w", err)
	}
	if meta.NumRows < 0 || (wantRows >= 0 && meta.NumRows != wantRows) {
		return info, fmt.Errorf("footer claims %d rows, the manifest %d records", meta.NumRows, wantRows)
	}
	if meta.NumRows > limit/decodeBytesPerRow { // before multiplying: no overflow
		return info, fmt.Errorf("footer claims %d rows: over the %d bytes a block decode may use", meta.NumRows, limit)
	}
	info.rows = meta.NumRows
	info.decodeBytes = meta.NumRows * decodeBytesPerRow
	p := &pageChecker{}
	defer p.close()
	var rows int64
	for g := range meta.RowGroups {
		rg := &meta.RowGroups[g]
		if rg.NumRows < 0 || rg.NumRows > meta.NumRows-rows {
			return info, fmt.Errorf("row group %d claims %d rows, the file %d", g, rg.NumRows, meta.NumRows)
		}
		rows += rg.NumRows
		seen := make([]bool, len(columns))
		for c := range rg.Columns {
			cc := &rg.Columns[c]
			if cc.FilePath != "" {
				return info, fmt.Errorf("row group %d column %d: in another file %q", g, c, cc.FilePath)
			}
			col := slices.IndexFunc(columns, func(p []string) bool { return slices.Equal(p, cc.MetaData.PathInSchema) })
			if col < 0 || seen[col] {
				return info, fmt.Errorf("row group %d column %d: unknown or repeated column %q", g, c, strings.Join(cc.MetaData.PathInSchema, "."))
			}
			seen[col] = true
			if err := p.inspectChunk(data[:footerStart], &cc.MetaData, rg.NumRows, len(columns[col]) > 1, col != unread, &info); err != nil {
				return info, fmt.Errorf("row group %d column %s: %w", g, strings.Join(cc.MetaData.PathInSchema, "."), err)
			}
		}
	}
	if rows != meta.NumRows {
		return info, fmt.Errorf("row groups hold %d rows, the footer claims %d", rows, meta.NumRows)
	}
	return info, nil
}

// inspectChunk checks one column chunk and its pages; body is the file up to
// the footer. repeated: the embedding column, whose values may outnumber the
// rows. pages false checks the chunk's claims but not its pages (a column
// the read leaves alone).
func (p *pageChecker) inspectChunk(body []byte, cm *format.ColumnMetaData, rows int64, repeated, pages bool, info *blockInfo) error {
	if cm.Codec != format.Uncompressed && cm.Codec != format.Zstd {
		return fmt.Errorf("codec %s, want ZSTD or UNCOMPRESSED", cm.Codec)
	}
	maxValues := rows
	if repeated {
		maxValues = max(rows, rows*maxEmbeddingValuesPerRow)
	}
	switch {
	case cm.NumValues < 0 || cm.NumValues > maxValues || (!repeated && cm.NumValues != rows):
		return fmt.Errorf("%d values for %d rows", cm.NumValues, rows)
	case cm.NumValues > (info.limit-info.decodeBytes)/decodeBytesPerValue:
		return fmt.Errorf("%d values: over the %d bytes a block decode may use", cm.NumValues, info.limit)
	}
	info.decodeBytes += cm.NumValues * decodeBytesPerValue
	start := cm.DataPageOffset
	if cm.DictionaryPageOffset > 0 {
		start = min(start, cm.DictionaryPageOffset)
	}
	if start < 4 || cm.TotalCompressedSize < 0 || cm.TotalCompressedSize > int64(len(body))-start {
		return fmt.Errorf("bytes [%d, %d+%d) outside the %d bytes before the footer", start, start, cm.TotalCompressedSize, len(body))
	}
	if !pages {
		return nil
	}
	chunk := body[start : start+cm.TotalCompressedSize]
	var values int64
	for off, page := 0, 0; off < len(chunk); page++ {
		n, err := walkThriftStruct(chunk[off:], nil)
		if err != nil {
			return fmt.Errorf("page %d header: %w", page, err)
		}
		var h format.PageHeader
		if err := thrift.Unmarshal(new(thrift.CompactProtocol), chunk[off:off+n], &h); err != nil {
			return fmt.Errorf("page %d header: %w", page, err)
		}
		off += n
		if h.CompressedPageSize < 0 || int(h.CompressedPageSize) > len(chunk)-off {
			return fmt.Errorf("page %d: %d compressed bytes claimed, %d left in the chunk", page, h.CompressedPageSize, len(chunk)-off)
		}
		body := chunk[off : off+int(h.CompressedPageSize)]
		off += int(h.CompressedPageSize)
		if h.UncompressedPageSize < 0 || int64(h.UncompressedPageSize) > info.limit-info.decodeBytes {
			return fmt.Errorf("page %d: %d uncompressed bytes claimed, over the %d bytes a block decode may use", page, h.UncompressedPageSize, info.limit)
		}
		info.decodeBytes += int64(h.UncompressedPageSize)
		var pageValues int64
		levels := 0 // bytes of levels stored uncompressed before the data (v2)
		compressed := cm.Codec == format.Zstd
		switch {
		case h.Type == format.DataPage && h.DataPageHeader.Valid:
			pageValues = int64(h.DataPageHeader.V.NumValues)
		case h.Type == format.DataPageV2 && h.DataPageHeaderV2.Valid:
			v2 := &h.DataPageHeaderV2.V
			pageValues = int64(v2.NumValues)
			if v2.NumNulls < 0 || v2.NumNulls > v2.NumValues || v2.NumRows < 0 || int64(v2.NumRows) > rows {
				return fmt.Errorf("page %d: %d values, %d nulls, %d rows claimed for a chunk of %d rows", page, v2.NumValues, v2.NumNulls, v2.NumRows, rows)
			}
			if v2.DefinitionLevelsByteLength < 0 || v2.RepetitionLevelsByteLength < 0 ||
				int64(v2.DefinitionLevelsByteLength)+int64(v2.RepetitionLevelsByteLength) > int64(min(h.CompressedPageSize, h.UncompressedPageSize)) {
				return fmt.Errorf("page %d: levels of %d+%d bytes in a page of %d", page, v2.RepetitionLevelsByteLength, v2.DefinitionLevelsByteLength, h.CompressedPageSize)
			}
			levels = int(v2.DefinitionLevelsByteLength + v2.RepetitionLevelsByteLength)
			if v2.IsCompressed.Valid && !v2.IsCompressed.V {
				compressed = false
			}
		case h.Type == format.DictionaryPage && h.DictionaryPageHeader.Valid:
			n := int64(h.DictionaryPageHeader.V.NumValues)
			if n < 0 || n > maxValues {
				return fmt.Errorf("page %d: dictionary of %d values for %d values", page, n, maxValues)
			}
			info.decodeBytes += n * decodeBytesPerValue
		default:
			return fmt.Errorf("page %d: type %s without its header", page, h.Type)
		}
		if pageValues < 0 || pageValues > cm.NumValues-values {
			return fmt.Errorf("page %d: %d values claimed, %d of the chunk's %d left", page, pageValues, cm.NumValues-values, cm.NumValues)
		}
		values += pageValues
		if info.decodeBytes > info.limit {
			return fmt.Errorf("page %d: over the %d bytes a block decode may use", page, info.limit)
		}
		if err := p.checkPageData(body, levels, int(h.UncompressedPageSize), compressed); err != nil {
			return fmt.Errorf("page %d: %w", page, err)
		}
	}
	if values != cm.NumValues {
		return fmt.Errorf("pages hold %d values, the chunk claims %d", values, cm.NumValues)
	}
	return nil
}

// checkPageData checks that a page's data (after levels bytes of levels)
// is no larger than its claimed uncompressed size. Zstd data whose frames
// all declare their content size is checked from the frame headers alone
// (zstdDeclaredSize): the sizes must add up to the claim, and the decoder
// parquet-go reads the page with stops a frame that decodes past the size
// it declares. Other zstd data is decompressed with the claim as the
// decoder's limit.
func (p *pageChecker) checkPageData(body []byte, levels, uncompressed int, compressed bool) error {
	want := uncompressed - levels
	if !compressed {
		if len(body) != uncompressed {
			return fmt.Errorf("%d bytes stored uncompressed, %d claimed", len(body), uncompressed)
		}
		return nil
	}
	n, declared := zstdDeclaredSize(body[levels:], want)
	if !declared {
		var err error
		if n, err = p.zstdSize(body[levels:], want); err != nil {
			return fmt.Errorf("zstd data (%d bytes claimed): %w", want, err)
		}
	}
	if n != want {
		what := "zstd data of"
		if declared {
			what = "zstd frames declaring"
		}
		return fmt.Errorf("%s %d bytes, %d claimed", what, n, want)
	}
	return nil
}

// Zstandard frame layout (RFC 8878, section 3.1).
const (
	zstdMagic          = 0xFD2FB528
	zstdSkippableMagic = 0x184D2A50 // the low 4 bits are free
	zstdMaxBlock       = 128 << 10  // Block_Maximum_Size
)

// zstdDeclaredSize returns the content size that the frames of src declare
// in their headers, walking the frames and their block headers without
// decompressing anything. declared is false, and src must be decompressed
// to know its size, unless every frame is a zstd frame that declares its
// content size (Frame_Content_Size), uses no dictionary, has a window of
// at most maxZstdWindow and a reserved bit of 0, and whose blocks (of a
// known type, at most Block_Maximum_Size compressed) and checksum end
// exactly at the end of src; skippable frames are passed over. It stops,
// declared, as soon as the sizes add up past limit (a claim exceeded: the
// size returned then differs from the claim).
//
// Why the declared sizes bound the decode: klauspost/compress's zstd
// DecodeAll, which parquet-go's zstd codec reads pages with, fails a frame
// with ErrFrameSizeExceeded once its output passes the content size it
// declares (checked after every block, so past it by less than a block)
// and with ErrFrameSizeMismatch when it ends short of it.
func zstdDeclaredSize(src []byte, limit int) (size int, declared bool) {
	total := uint64(0)
	for len(src) > 0 {
		if len(src) < 4 {
			return 0, false
		}
		magic := binary.LittleEndian.Uint32(src)
		if magic&^0xF == zstdSkippableMagic {
			if len(src) < 8 {
				return 0, false
			}
			n := uint64(binary.LittleEndian.Uint32(src[4:]))
			if n > uint64(len(src)-8) {
				return 0, false
			}
			src = src[8+n:]
			continue
		}
		if magic != zstdMagic || len(src) < 5 {
			return 0, false
		}
		fhd := src[4]
		fcsFlag, single, checksum, dictFlag := fhd>>6, fhd>>5&1 == 1, fhd>>2&1 == 1, fhd&3
		if fhd>>3&1 != 0 || dictFlag != 0 {
			return 0, false // reserved bit set, or a dictionary
		}
		pos := 5
		window := uint64(0)
		if !single {
			if len(src) <= pos {
				return 0, false
			}
			wd := src[pos]
			pos++
			base := uint64(1) << (10 + wd>>3)
			window = base + base/8*uint64(wd&7)
		}
		fcsBytes := [4]int{0, 2, 4, 8}[fcsFlag]
		if fcsFlag == 0 && single {
			fcsBytes = 1
		}
		if fcsBytes == 0 || len(src) < pos+fcsBytes {
			return 0, false // no content size declared
		}
		var fcs uint64
		switch fcsBytes {
		case 1:
			fcs = uint64(src[pos])
		case 2:
			fcs = uint64(binary.LittleEndian.Uint16(src[pos:])) + 256
		case 4:
			fcs = uint64(binary.LittleEndian.Uint32(src[pos:]))
		case 8:
			fcs = binary.LittleEndian.Uint64(src[pos:])
		}
		pos += fcsBytes
		if single {
			window = fcs
		}
		if window > maxZstdWindow {
			return 0, false
		}
		for last := false; !last; {
			if len(src) < pos+3 {
				return 0, false
			}
			h := uint32(src[pos]) | uint32(src[pos+1])<<8 | uint32(src[pos+2])<<16
			pos += 3
			last = h&1 == 1
			n := int(h >> 3)
			switch h >> 1 & 3 {
			case 0, 2: // raw, compressed: n bytes follow
			case 1: // RLE: one byte, repeated n times
				n = 1
			default: // reserved
				return 0, false
			}
			if n > zstdMaxBlock || len(src) < pos+n {
				return 0, false
			}
			pos += n
		}
		if checksum {
			pos += 4
			if len(src) < pos {
				return 0, false
			}
		}
		src = src[pos:]
		if total += fcs; total > uint64(limit) || total < fcs {
			return int(min(max(total, fcs), math.MaxInt)), true
		}
	}
	return int(total), true
}

// maxZstdWindow bounds the window (history) of a zstd frame in a page,
// which the decoder keeps in memory: the writer's zstd encoder uses at most
// 8 MiB; zstd's levels up to 19 use at most 8 MiB too.
const maxZstdWindow = 32 << 20

// smallPage is the claimed size up to which a page is decompressed into a
// buffer of that size (cheaper than a stream's window for small pages).
const smallPage = 1 << 20

// pageChecker decompresses pages to check their size (those whose zstd
// frames do not declare it): small ones into one reused buffer, larger ones
// through a streaming decoder that counts the output instead of keeping it.
// Its decoders are made at the first page that needs them.
type pageChecker struct {
	all    *zstd.Decoder // DecodeAll, limited to the buffer's capacity
	stream *zstd.Decoder
	buf    []byte
}

func (p *pageChecker) decoders() error {
	if p.all != nil {
		return nil
	}
	all, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true), zstd.WithDecodeAllCapLimit(true))
	if err != nil {
		return fmt.Errorf("zstd decoder: %w", err)
	}
	stream, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true), zstd.WithDecoderMaxWindow(maxZstdWindow))
	if err != nil {
		all.Close()
		return fmt.Errorf("zstd decoder: %w", err)
	}
	p.all, p.stream = all, stream
	return nil
}

func (p *pageChecker) close() {
	if p.all != nil {
		p.all.Close()
		p.stream.Close()
	}
}

// zstdSize returns the decompressed size of src, failing once it would grow
// past limit (a zstd bomb: a few hundred bytes can expand to gigabytes).
// Memory: min(limit, smallPage), or the frame's window (at most
// maxZstdWindow) for larger limits.
func (p *pageChecker) zstdSize(src []byte, limit int) (int, error) {
	if err := p.decoders(); err != nil {
		return 0, err
	}
	if limit <= smallPage {
		if cap(p.buf) < limit {
			p.buf = make([]byte, 0, max(limit, 4096))
		}
		out, err := p.all.DecodeAll(src, p.buf[:0:limit])
		if err != nil {
			return 0, err
		}
		return len(out), nil
	}
	if err := p.stream.Reset(bytes.NewReader(src)); err != nil {
		return 0, err
	}
	n, err := io.Copy(io.Discard, io.LimitReader(p.stream, int64(limit)+1))
	switch {
	case err != nil:
		return 0, err
	case n > int64(limit):
		return 0, fmt.Errorf("decompresses past %d bytes", limit)
	}
	return int(n), nil
}

package segment

import (
	"bytes"
	"encoding/binary"
	"errors"
	"runtime"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"

	"github.com/compactorhq/compactor/internal/materialize"
)

// pageEdit changes one page of a block before rebuildBlock lays it out
// again; it returns the page's new data.
type pageEdit func(column []string, page int, h *format.PageHeader, data []byte) []byte

// rebuildBlock splits a block into its footer and pages, applies the edits,
// and writes a file whose offsets and sizes match the edited pages: a
// consistent file that lies only where an edit lies.
func rebuildBlock(t testing.TB, good []byte, editPage pageEdit, editFooter func(*format.FileMetaData)) []byte {
	t.Helper()
	size := len(good)
	footerLen := int(binary.LittleEndian.Uint32(good[size-8:]))
	var meta format.FileMetaData
	if err := thrift.Unmarshal(new(thrift.CompactProtocol), good[size-8-footerLen:size-8], &meta); err != nil {
		t.Fatal(err)
	}
	out := bytes.NewBufferString("PAR1")
	for g := range meta.RowGroups {
		for c := range meta.RowGroups[g].Columns {
			cm := &meta.RowGroups[g].Columns[c].MetaData
			start := cm.DataPageOffset
			if cm.DictionaryPageOffset > 0 {
				start = min(start, cm.DictionaryPageOffset)
			}
			chunk := good[start : start+cm.TotalCompressedSize]
			newStart := int64(out.Len())
			cm.DictionaryPageOffset, cm.DataPageOffset = 0, 0
			for off, page := 0, 0; off < len(chunk); page++ {
				var h format.PageHeader
				r := new(thrift.CompactProtocol).NewReaderFromBytes(chunk[off:])
				if err := thrift.NewDecoder(r).Decode(&h); err != nil {
					t.Fatal(err)
				}
				off += r.BytesRead()
				data := chunk[off : off+int(h.CompressedPageSize)]
				off += int(h.CompressedPageSize)
				h.CRC = 0
				if editPage != nil {
					data = editPage(cm.PathInSchema, page, &h, bytes.Clone(data))
				}
				hb, err := thrift.Marshal(new(thrift.CompactProtocol), &h)
				if err != nil {
					t.Fatal(err)
				}
				switch {
				case h.Type == format.DictionaryPage:
					cm.DictionaryPageOffset = int64(out.Len())
				case cm.DataPageOffset == 0:
					cm.DataPageOffset = int64(out.Len())
				}
				out.Write(hb)
				out.Write(data)
			}
			cm.TotalCompressedSize = int64(out.Len()) - newStart
			meta.RowGroups[g].Columns[c].FileOffset = newStart
			meta.RowGroups[g].Columns[c].OffsetIndexOffset, meta.RowGroups[g].Columns[c].OffsetIndexLength = 0, 0
			meta.RowGroups[g].Columns[c].ColumnIndexOffset, meta.RowGroups[g].Columns[c].ColumnIndexLength = 0, 0
		}
	}
	if editFooter != nil {
		editFooter(&meta)
	}
	fb, err := thrift.Marshal(new(thrift.CompactProtocol), &meta)
	if err != nil {
		t.Fatal(err)
	}
	out.Write(fb)
	out.Write(binary.LittleEndian.AppendUint32(nil, uint32(len(fb))))
	out.WriteString("PAR1")
	return out.Bytes()
}

// smallBlock is a valid two-record block of a few hundred bytes.
func smallBlock(t testing.TB) ([]byte, []materialize.Record) {
	t.Helper()
	recs := []materialize.Record{
		{ID: "a", Embedding: []float32{1, 2}, Document: ptr("doc"), Metadata: materialize.Metadata{"k": "v"}},
		{ID: "b", Embedding: []float32{3, 4}},
	}
	data, err := encodeBlock(recs)
	if err != nil {
		t.Fatal(err)
	}
	return data, recs
}

// allocatedBy returns the bytes fn allocates (runtime.MemStats.TotalAlloc).
// Tests in this file do not run in parallel, so the figure is fn's alone,
// up to the runtime's own small allocations.
func allocatedBy(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// maxAttackAlloc is what decoding one hostile block of a few hundred bytes
// may allocate in these tests: far below what the claims would cost.
const maxAttackAlloc = 16 << 20

func TestRebuildBlockKeepsAValidBlockValid(t *testing.T) {
	good, recs := smallBlock(t)
	got, err := decodeBlock(rebuildBlock(t, good, nil, nil), int64(len(recs)))
	if err != nil || len(got) != len(recs) {
		t.Fatalf("rebuilt block: %d records, %v", len(got), err)
	}
}

// A known attack: a block of under 1 KiB whose footer claims 2^26
// rows made the decoder allocate gigabytes from the claim (fatal error: out
// of memory, which recover cannot catch).
func TestDecodeBlockRefusesARowCountItCannotHold(t *testing.T) {
	good, recs := smallBlock(t)
	const claim = 1 << 26
	bad := rebuildBlock(t, good, nil, func(m *format.FileMetaData) {
		m.NumRows = claim
		m.RowGroups[0].NumRows = claim
	})
	if len(bad) > 1200 {
		t.Fatalf("the hostile block is %d bytes; the attack needs under ~1 KiB", len(bad))
	}
	overflow := rebuildBlock(t, good, nil, func(m *format.FileMetaData) {
		m.NumRows = 1 << 62 // times the bytes per row overflows int64
		m.RowGroups[0].NumRows = 1 << 62
	})
	if _, err := decodeBlock(overflow, -1); err == nil || !strings.Contains(err.Error(), "over the") {
		t.Errorf("a footer claiming 2^62 rows: %v, want the decode limit named", err)
	}
	for name, want := range map[string]int64{
		"manifest says 2 records":        int64(len(recs)),
		"manifest agrees with the claim": claim,
		"record count unknown":           -1,
	} {
		var err error
		alloc := allocatedBy(func() { _, err = decodeBlock(bad, want) })
		if err == nil {
			t.Errorf("%s: a %d-byte block claiming %d rows decoded", name, len(bad), claim)
		}
		if alloc > maxAttackAlloc {
			t.Errorf("%s: decoding allocated %d bytes, want at most %d", name, alloc, maxAttackAlloc)
		}
		t.Logf("%s: %v (%d bytes allocated)", name, err, alloc)
	}
}

func TestDecodeBlockRefusesHostileClaims(t *testing.T) {
	good, recs := smallBlock(t)
	isID := func(col []string) bool { return strings.Join(col, ".") == "id" }
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	bomb := enc.EncodeAll(make([]byte, 64<<20), nil) // 64 MiB of zeros in a few KiB
	// replaced replaces the id column's data pages by zstd data, claiming
	// claim uncompressed bytes.
	replaced := func(zdata []byte, claim int32) []byte {
		return rebuildBlock(t, good, func(col []string, page int, h *format.PageHeader, data []byte) []byte {
			if !isID(col) || h.Type == format.DictionaryPage {
				return data
			}
			levels := 0
			if h.DataPageHeaderV2.Valid {
				levels = int(h.DataPageHeaderV2.V.DefinitionLevelsByteLength + h.DataPageHeaderV2.V.RepetitionLevelsByteLength)
			}
			data = append(data[:levels:levels], zdata...)
			h.CompressedPageSize = int32(len(data))
			h.UncompressedPageSize = int32(levels) + claim
			return data
		}, nil)
	}
	bombed := func(claim int32) []byte { return replaced(bomb, claim) }
	// understated is the bomb with a header declaring 16 bytes of content:
	// the header check passes it, the decoder must stop it.
	understated := bytes.Clone(bomb)
	{
		fhd := understated[4]
		pos := 5
		if fhd>>5&1 == 0 {
			pos++ // window descriptor
		}
		switch fhd >> 6 {
		case 2:
			binary.LittleEndian.PutUint32(understated[pos:], 16)
		case 3:
			binary.LittleEndian.PutUint64(understated[pos:], 16)
		default:
			t.Fatalf("the bomb's frame declares its size in %d-bit flags %02x: not a 4- or 8-byte field", fhd>>6, fhd)
		}
	}
	cases := map[string][]byte{
		"zstd frame declaring 16 bytes of its 64 MiB": replaced(understated, 16),
		"page claims 2 GiB compressed": rebuildBlock(t, good, func(col []string, page int, h *format.PageHeader, data []byte) []byte {
			if isID(col) {
				h.CompressedPageSize = 1<<31 - 1
			}
			return data
		}, nil),
		"page claims 2 GiB uncompressed": rebuildBlock(t, good, func(col []string, page int, h *format.PageHeader, data []byte) []byte {
			if isID(col) {
				h.UncompressedPageSize = 1<<31 - 1
			}
			return data
		}, nil),
		"page claims 2^30 values": rebuildBlock(t, good, func(col []string, page int, h *format.PageHeader, data []byte) []byte {
			if isID(col) && h.DataPageHeaderV2.Valid {
				h.DataPageHeaderV2.V.NumValues = 1 << 30
			}
			if isID(col) && h.DataPageHeader.Valid {
				h.DataPageHeader.V.NumValues = 1 << 30
			}
			return data
		}, nil),
		"zstd bomb under a small size claim": bombed(16),
		"zstd bomb under a 2 MiB size claim": bombed(2 << 20), // decompressed as a stream
		"chunk claims bytes past the file": rebuildBlock(t, good, nil, func(m *format.FileMetaData) {
			m.RowGroups[0].Columns[0].MetaData.TotalCompressedSize = 1 << 40
		}),
		"column chunk claims 2^40 values": rebuildBlock(t, good, nil, func(m *format.FileMetaData) {
			m.RowGroups[0].Columns[1].MetaData.NumValues = 1 << 40
		}),
		"snappy codec": rebuildBlock(t, good, nil, func(m *format.FileMetaData) {
			m.RowGroups[0].Columns[0].MetaData.Codec = format.Snappy
		}),
	}
	// Lists whose headers claim 2^30 elements: parquet-go's thrift decoder
	// allocates them before reading one (16 GiB of SchemaElement, 600 GiB of
	// ColumnChunk).
	footerLen := int(binary.LittleEndian.Uint32(good[len(good)-8:]))
	footer := good[len(good)-8-footerLen : len(good)-8]
	{
		// FileMetaData starts with version (i32, field header 0x15, value
		// 0x02) and schema (list, field header 0x19, then the list header).
		if footer[0] != 0x15 || footer[2] != 0x19 {
			t.Fatalf("footer starts with % x", footer[:3])
		}
		// Replace the list header by "size in a varint" and 2^30.
		f := append(append(bytes.Clone(footer[:3]), 0xfc, 0x80, 0x80, 0x80, 0x80, 0x04), footer[4:]...)
		bad := append(bytes.Clone(good[:len(good)-8-footerLen]), f...)
		bad = binary.LittleEndian.AppendUint32(bad, uint32(len(f)))
		cases["schema list claims 2^30 elements"] = append(bad, "PAR1"...)
	}
	cases["footer claims 4 GiB"] = append(bytes.Clone(good[:len(good)-8]), 0xff, 0xff, 0xff, 0xff, 'P', 'A', 'R', '1')
	for name, bad := range cases {
		var err error
		alloc := allocatedBy(func() { _, err = decodeBlock(bad, int64(len(recs))) })
		if err == nil {
			t.Errorf("%s: decoded", name)
		}
		if alloc > maxAttackAlloc {
			t.Errorf("%s: decoding allocated %d bytes, want at most %d", name, alloc, maxAttackAlloc)
		}
		t.Logf("%s: %v (%d bytes allocated)", name, err, alloc)
	}
}

func TestEncodeBlockRefusesABlockOverTheDecodeLimit(t *testing.T) {
	doc := strings.Repeat("x", 1<<20)
	recs := make([]materialize.Record, 3) // 3 MiB of documents, compressing to little
	for i := range recs {
		recs[i] = materialize.Record{ID: string(rune('a' + i)), Document: &doc}
	}
	if _, err := encodeBlockWithin(recs, 4<<20); err != nil {
		t.Fatalf("under the limit: %v", err)
	}
	_, err := encodeBlockWithin(recs, 2<<20)
	if !errors.Is(err, ErrBlockTooLarge) || !strings.Contains(err.Error(), "max-block-records") {
		t.Fatalf("a block over MaxBlockDecodeBytes: %v, want an error naming --max-block-records", err)
	}
	if errors.Is(err, ErrCorrupt) {
		t.Errorf("refusing to write is not corruption: %v", err)
	}
}

func TestThriftWalkerBoundsLists(t *testing.T) {
	rowGroups := func(n int) []byte {
		b := []byte{0x49, 0xfc} // field 4: list of structs, size in a varint
		b = binary.AppendUvarint(b, uint64(n))
		for range n {
			b = append(b, 0) // an empty struct
		}
		return append(b, 0)
	}
	if n, err := walkThriftStruct(rowGroups(3), footerLimit); err != nil || n != len(rowGroups(3)) {
		t.Fatalf("three row groups: %d, %v", n, err)
	}
	huge := rowGroups(0)
	huge = append(huge[:2], binary.AppendUvarint(nil, 1<<30)...)
	for name, b := range map[string][]byte{
		"2^30 elements in a few bytes":      huge,
		"more row groups than the limit":    rowGroups(maxRowGroups + 1),
		"truncated":                         rowGroups(3)[:5],
		"binary longer than the input":      {0x18, 0xff, 0x01, 'x', 0},
		"structs nested past the depth cap": append(bytes.Repeat([]byte{0x1c}, maxThriftDepth+2), make([]byte, maxThriftDepth+3)...),
		"unknown type":                      {0x1e, 0},
	} {
		if _, err := walkThriftStruct(b, footerLimit); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

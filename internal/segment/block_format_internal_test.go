package segment

import (
	"bytes"
	"math"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"

	"github.com/compactorhq/compactor/internal/materialize"
)

// formatFixtureRecords are the records of testdata/block-v1.parquet (written
// by format version 1's encoder) and of the format tests: every shape of
// record (no embedding, an empty one, special floats, no, empty and
// non-empty documents and metadata) and the first 40 records of the Debian
// sample.
func formatFixtureRecords(tb testing.TB) []materialize.Record {
	s := func(v string) *string { return &v }
	recs := []materialize.Record{
		{ID: "!a-nil-everything"},
		{ID: "!b-empty-embedding", Embedding: []float32{}, Document: s("")},
		{ID: "!c-special-floats", Embedding: []float32{
			math.MaxFloat32, math.SmallestNonzeroFloat32, float32(math.Copysign(0, -1)), float32(math.Inf(-1)), 1.0 / 3,
		}, Metadata: materialize.Metadata{}},
		{ID: "!d-metadata", Embedding: []float32{0.5, -0.25}, Document: s("héllo <b>&\n\"wörld\""), Metadata: materialize.Metadata{
			"s": "text", "html": "<a & b>", "f": 0.1, "big": float64(1 << 60), "t": true, "false": false, "ключ": "значение",
		}},
	}
	recs = append(recs, debianRecords(tb)[:40]...)
	slices.SortFunc(recs, func(a, b materialize.Record) int { return strings.Compare(a.ID, b.ID) })
	return recs
}

// Blocks of format version 1 (existing segments) stay readable.
func TestDecodeBlockReadsFormatVersion1(t *testing.T) {
	data, err := os.ReadFile("testdata/format/block-v1.parquet")
	if err != nil {
		t.Fatal(err)
	}
	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := f.Lookup(blockFormatKey); v != "1" {
		t.Fatalf("fixture has format %q, want 1", v)
	}
	want := formatFixtureRecords(t)
	got, err := decodeBlock(data, int64(len(want)))
	if err != nil {
		t.Fatal(err)
	}
	checkRecords(t, got, want)
}

// Version 2 blocks of the earlier string encodings (id, document and
// metadata DELTA_LENGTH_BYTE_ARRAY at zstd's default level, with min/max
// statistics on every column; testdata/format/block-v2-delta.parquet,
// written by that encoder) stay readable.
func TestDecodeBlockReadsFormatVersion2DeltaStrings(t *testing.T) {
	data, err := os.ReadFile("testdata/format/block-v2-delta.parquet")
	if err != nil {
		t.Fatal(err)
	}
	want := formatFixtureRecords(t)
	if got := columnEncodings(t, data)["document"]; !slices.Contains(got, format.DeltaLengthByteArray) {
		t.Fatalf("fixture's document encodings %v, want DELTA_LENGTH_BYTE_ARRAY among them", got)
	}
	got, err := decodeBlock(data, int64(len(want)))
	if err != nil {
		t.Fatal(err)
	}
	checkRecords(t, got, want)
}

// Blocks write the document and metadata columns PLAIN and min/max bounds
// only for the id column: what the byte goal against DuckDB rests on
// (docs/performance.md). Readers never prune by the other columns.
func TestBlockStringColumnsArePlainAndUnboundedButID(t *testing.T) {
	recs := formatFixtureRecords(t)
	data, err := encodeBlock(recs)
	if err != nil {
		t.Fatal(err)
	}
	encs := columnEncodings(t, data)
	for _, col := range []string{"document", "metadata"} {
		if slices.Contains(encs[col], format.DeltaLengthByteArray) || !slices.Contains(encs[col], format.Plain) {
			t.Errorf("%s encodings %v, want PLAIN", col, encs[col])
		}
	}
	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range f.Metadata().RowGroups[0].Columns {
		path := strings.Join(c.MetaData.PathInSchema, ".")
		st := c.MetaData.Statistics
		hasBounds := st.MinValue != nil || st.MaxValue != nil || st.Min != nil || st.Max != nil
		if c.MetaData.Codec != format.Zstd {
			t.Errorf("%s: codec %v, want ZSTD", path, c.MetaData.Codec)
		}
		if want := path == "id"; hasBounds != want {
			t.Errorf("%s: chunk min/max present %v, want %v", path, hasBounds, want)
		}
	}
	got, err := decodeBlock(data, int64(len(recs)))
	if err != nil {
		t.Fatal(err)
	}
	checkRecords(t, got, recs)
}

// columnEncodings returns the encodings of each column chunk of a block,
// by dotted path.
func columnEncodings(t *testing.T, data []byte) map[string][]format.Encoding {
	t.Helper()
	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]format.Encoding{}
	for _, c := range f.Metadata().RowGroups[0].Columns {
		out[strings.Join(c.MetaData.PathInSchema, ".")] = c.MetaData.Encoding
	}
	return out
}

// Format version 2 chooses the embedding column's encoding per block:
// dictionary for few distinct values, BYTE_STREAM_SPLIT otherwise; both
// decode to the records written.
func TestFormatVersion2EncodesEmbeddingsByTheirDistinctValues(t *testing.T) {
	for set, want := range map[string]format.Encoding{
		"debian64":  format.RLEDictionary,
		"anchor128": format.RLEDictionary,
		"random128": format.ByteStreamSplit,
	} {
		recs := benchRecords(t, set)[:1000]
		data, err := encodeBlock(recs)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			t.Fatal(err)
		}
		if v, _ := f.Lookup(blockFormatKey); v != "2" {
			t.Errorf("%s: format %q, want 2", set, v)
		}
		md := f.Metadata()
		var encs []format.Encoding
		for _, c := range md.RowGroups[0].Columns {
			if slices.Equal(c.MetaData.PathInSchema, []string{"embedding", "list", "element"}) {
				encs = c.MetaData.Encoding
			}
		}
		if !slices.Contains(encs, want) {
			t.Errorf("%s: embedding encodings %v, want %v among them", set, encs, want)
		}
		got, err := decodeBlock(data, int64(len(recs)))
		if err != nil {
			t.Fatal(err)
		}
		checkRecords(t, got, recs)
	}
}

// An encoder taken from the pool again writes the same bytes: nothing of
// the previous block leaks into the next.
func TestEncodeBlockIsDeterministicAcrossReuse(t *testing.T) {
	a, b := benchRecords(t, "random128")[:300], formatFixtureRecords(t)
	first, err := encodeBlock(b)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := encodeBlock(a); err != nil {
			t.Fatal(err)
		}
		again, err := encodeBlock(b)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(first, again) {
			t.Fatal("the same records encoded to different bytes after the encoder was reused")
		}
	}
}

// checkRecords compares records field by field (embeddings bit for bit).
func checkRecords(t *testing.T, got, want []materialize.Record) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d records, want %d", len(got), len(want))
	}
	for i := range want {
		if !sameRecord(got[i], want[i]) || (got[i].Embedding == nil) != (want[i].Embedding == nil) ||
			(got[i].Document == nil) != (want[i].Document == nil) || (got[i].Metadata == nil) != (want[i].Metadata == nil) {
			t.Fatalf("record %d:\n got %#v\nwant %#v", i, got[i], want[i])
		}
	}
}

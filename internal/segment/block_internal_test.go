package segment

import (
	"bytes"
	"errors"
	"go/parser"
	"go/token"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/compactorhq/compactor/internal/materialize"
)

func ptr(s string) *string { return &s }

func TestBlockRoundTripIsExact(t *testing.T) {
	recs := []materialize.Record{
		{ID: "a-nil-everything"},
		{ID: "b-empty-embedding", Embedding: []float32{}},
		{ID: "c-empty-document", Embedding: []float32{1}, Document: ptr("")},
		{ID: "d-document", Embedding: []float32{0.1, -0.2}, Document: ptr("héllo <b>&\n\"wörld\"")},
		{ID: "e-empty-metadata", Embedding: []float32{1, 2}, Metadata: materialize.Metadata{}},
		{ID: "f-metadata", Embedding: []float32{
			math.MaxFloat32, math.SmallestNonzeroFloat32, float32(math.Copysign(0, -1)), float32(math.Inf(1)), 1.0 / 3,
		}, Metadata: materialize.Metadata{
			"s": "text", "empty": "", "html": "<a & b>", "f": 0.1, "neg": -1e300, "int": 42.0,
			"big": float64(1 << 60), "tiny": 5e-324, "t": true, "false": false, "unicode ключ": "значение",
		}},
		{ID: "g-\u00e9-unicode-id", Embedding: []float32{float32(math.NaN())}, Document: ptr("x")},
	}
	data, err := encodeBlock(recs)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeBlock(data, -1)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(recs) {
		t.Fatalf("decoded %d records, want %d", len(got), len(recs))
	}
	for i := range recs {
		want, g := recs[i], got[i]
		// NaN != NaN: compare embeddings bit for bit.
		if !sameRecord(want, g) {
			t.Errorf("record %d:\n got %#v\nwant %#v", i, g, want)
		}
		if (want.Embedding == nil) != (g.Embedding == nil) {
			t.Errorf("record %q: embedding nil-ness changed: got %#v", want.ID, g.Embedding)
		}
		if (want.Document == nil) != (g.Document == nil) {
			t.Errorf("record %q: document nil-ness changed", want.ID)
		}
		if (want.Metadata == nil) != (g.Metadata == nil) {
			t.Errorf("record %q: metadata nil-ness changed", want.ID)
		}
		for k, v := range want.Metadata {
			if reflect.TypeOf(g.Metadata[k]) != reflect.TypeOf(v) {
				t.Errorf("record %q: metadata %q is %T, want %T", want.ID, k, g.Metadata[k], v)
			}
		}
	}
}

// The schema is a public format read by DuckDB and pyarrow: pin it.
func TestBlockSchemaIsTheDocumentedOne(t *testing.T) {
	data, err := encodeBlock([]materialize.Record{{ID: "a", Embedding: []float32{1}}})
	if err != nil {
		t.Fatal(err)
	}
	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	want := `message blockRow {
	required binary id (STRING);
	optional group embedding (LIST) {
		repeated group list {
			required float element;
		}
	}
	optional binary document (STRING);
	optional binary metadata (STRING);
}`
	if got := f.Schema().String(); got != want {
		t.Errorf("schema:\n%s\nwant:\n%s", got, want)
	}
	if v, ok := f.Lookup(blockFormatKey); !ok || v != blockFormatVersion {
		t.Errorf("key/value metadata %s = %q, %v; want %q", blockFormatKey, v, ok, blockFormatVersion)
	}
	for _, rg := range f.Metadata().RowGroups {
		for _, c := range rg.Columns {
			if c.MetaData.Codec.String() != "ZSTD" {
				t.Errorf("column %v: codec %v, want ZSTD", c.MetaData.PathInSchema, c.MetaData.Codec)
			}
		}
	}
	// The documented DuckDB/pyarrow recipe relies on this sentence.
	if !strings.Contains(docOfPackage(t), "read_parquet('data/blobs/collections/<id>/blocks/*.parquet')") {
		t.Error("package documentation lacks the DuckDB recipe")
	}
}

func TestEncodeBlockRejectsWhatCannotRoundTrip(t *testing.T) {
	for name, recs := range map[string][]materialize.Record{
		"unsorted ids":       {{ID: "b"}, {ID: "a"}},
		"duplicate ids":      {{ID: "a"}, {ID: "a"}},
		"int metadata":       {{ID: "a", Metadata: materialize.Metadata{"n": 1}}},
		"nested metadata":    {{ID: "a", Metadata: materialize.Metadata{"m": map[string]any{}}}},
		"null metadata":      {{ID: "a", Metadata: materialize.Metadata{"n": nil}}},
		"NaN metadata value": {{ID: "a", Metadata: materialize.Metadata{"n": math.NaN()}}},
	} {
		if _, err := encodeBlock(recs); err == nil {
			t.Errorf("%s: encodeBlock succeeded, want an error", name)
		}
	}
}

func TestDecodeBlockRejectsGarbage(t *testing.T) {
	good, err := encodeBlock([]materialize.Record{{ID: "a", Embedding: []float32{1, 2}}, {ID: "b"}})
	if err != nil {
		t.Fatal(err)
	}
	type other struct {
		Name string `parquet:"name"`
	}
	var otherFile bytes.Buffer
	if err := parquet.Write(&otherFile, []other{{Name: "x"}}); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{
		"empty":        nil,
		"not parquet":  []byte("hello, world"),
		"truncated":    good[:len(good)/2],
		"other schema": otherFile.Bytes(),
	} {
		if _, err := decodeBlock(data, -1); err == nil {
			t.Errorf("%s: decodeBlock succeeded, want an error", name)
		}
	}
}

func TestManifestRoundTrip(t *testing.T) {
	m := &Manifest{
		FormatVersion: 1, CollectionID: "c1", Version: 7, CompactionOffset: 1234, Dimension: 64, RecordCount: 5,
		CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC),
		Blocks: []BlockRef{
			{Key: "collections/c1/blocks/a.parquet", MinID: "a", MaxID: "c", Records: 3, Bytes: 100},
			{Key: "collections/c1/blocks/b.parquet", MinID: "d", MaxID: "e", Records: 2, Bytes: 90},
		},
	}
	data, err := encodeManifest(m)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeManifest(data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, m) {
		t.Errorf("round trip:\n got %+v\nwant %+v", got, m)
	}
	for _, field := range []string{`"format_version": 1`, `"collection_id": "c1"`, `"compaction_offset": 1234`, `"min_id": "a"`, `"record_count": 5`} {
		if !bytes.Contains(data, []byte(field)) {
			t.Errorf("manifest JSON lacks %s:\n%s", field, data)
		}
	}
}

func TestDecodeManifestRejectsBrokenInvariants(t *testing.T) {
	valid := func() Manifest {
		return Manifest{FormatVersion: 1, CollectionID: "c", Version: 1, RecordCount: 2, Blocks: []BlockRef{
			{Key: "collections/c/blocks/1.parquet", MinID: "a", MaxID: "b", Records: 1},
			{Key: "collections/c/blocks/2.parquet", MinID: "c", MaxID: "d", Records: 1},
		}}
	}
	for name, edit := range map[string]func(m *Manifest){
		"format version 3":       func(m *Manifest) { m.FormatVersion = 3 },
		"version 0":              func(m *Manifest) { m.Version = 0 },
		"no collection":          func(m *Manifest) { m.CollectionID = "" },
		"wrong record count":     func(m *Manifest) { m.RecordCount = 3 },
		"overlapping ranges":     func(m *Manifest) { m.Blocks[1].MinID = "b" },
		"unsorted blocks":        func(m *Manifest) { m.Blocks[0], m.Blocks[1] = m.Blocks[1], m.Blocks[0] },
		"min above max":          func(m *Manifest) { m.Blocks[0].MinID = "bb" },
		"empty block":            func(m *Manifest) { m.Blocks[0].Records = 0; m.RecordCount = 1 },
		"foreign block key":      func(m *Manifest) { m.Blocks[0].Key = "collections/other/blocks/1.parquet" },
		"block outside blocks":   func(m *Manifest) { m.Blocks[0].Key = "collections/c/manifests/x.json" },
		"block key climbing out": func(m *Manifest) { m.Blocks[0].Key = "collections/c/blocks/../../d/blocks/1.parquet" },
		"block listed twice":     func(m *Manifest) { m.Blocks[1].Key = m.Blocks[0].Key },
		"2^40 records in a block": func(m *Manifest) {
			m.Blocks[0].Records = 1 << 40
			m.RecordCount = 1<<40 + 1
		},
		"negative records summing up": func(m *Manifest) { m.Blocks[0].Records = -1; m.RecordCount = 0 },
		"negative block bytes":        func(m *Manifest) { m.Blocks[0].Bytes = -1 },
		"empty min id":                func(m *Manifest) { m.Blocks[0].MinID = "" },
		"negative compaction offset":  func(m *Manifest) { m.CompactionOffset = -1 },
		"dimension 2^20":              func(m *Manifest) { m.Dimension = 1 << 20 },
	} {
		m := valid()
		edit(&m)
		data, err := encodeManifest(&m)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := decodeManifest(data); err == nil {
			t.Errorf("%s: decodeManifest succeeded, want an error", name)
		}
	}
	if _, err := decodeManifest([]byte("{not json")); err == nil {
		t.Error("bad JSON decoded")
	}
	if _, err := decodeManifest(append(bytes.Repeat([]byte(" "), maxManifestBytes), "{}"...)); err == nil {
		t.Error("a manifest over maxManifestBytes decoded")
	}
	m := valid()
	if err := checkManifest(&m); err != nil {
		t.Errorf("valid manifest rejected: %v", err)
	}
}

func TestConfigDefaultsAndClamping(t *testing.T) {
	for _, tc := range []struct{ in, want Config }{
		{Config{}, Config{MaxBlockRecords: 4096, MinBlockRecords: 1024}},
		{Config{MaxBlockRecords: 100}, Config{MaxBlockRecords: 100, MinBlockRecords: 25}},
		{Config{MaxBlockRecords: -1, MinBlockRecords: -1}, Config{MaxBlockRecords: 4096, MinBlockRecords: 1024}},
		{Config{MaxBlockRecords: 1}, Config{MaxBlockRecords: 2, MinBlockRecords: 1}},
		{Config{MaxBlockRecords: 3}, Config{MaxBlockRecords: 3, MinBlockRecords: 1}},
		{Config{MaxBlockRecords: 100, MinBlockRecords: 100}, Config{MaxBlockRecords: 100, MinBlockRecords: 50}},
		{Config{MaxBlockRecords: 100, MinBlockRecords: 10}, Config{MaxBlockRecords: 100, MinBlockRecords: 10}},
	} {
		got := tc.in.withDefaults()
		tc.want.DeltaMinBlocks, tc.want.DeltaMaxFraction, tc.want.MaxDeltas = 4, 0.05, 16
		if got != tc.want {
			t.Errorf("%+v.withDefaults() = %+v, want %+v", tc.in, got, tc.want)
		}
		if !(0 < got.MinBlockRecords && got.MinBlockRecords < got.MaxBlockRecords) {
			t.Errorf("%+v.withDefaults() = %+v breaks 0 < Min < Max", tc.in, got)
		}
	}
}

func TestSplitEvenMakesNearEqualRunsUnderMax(t *testing.T) {
	for n := 0; n <= 50; n++ {
		for maxRecs := 1; maxRecs <= 12; maxRecs++ {
			recs := make([]materialize.Record, n)
			parts := splitEven(recs, maxRecs)
			wantK := (n + maxRecs - 1) / maxRecs
			if len(parts) != wantK {
				t.Fatalf("n=%d max=%d: %d parts, want %d", n, maxRecs, len(parts), wantK)
			}
			total, lo, hi := 0, n, 0
			for _, p := range parts {
				total += len(p)
				lo, hi = min(lo, len(p)), max(hi, len(p))
			}
			if total != n || hi > maxRecs || (n > 0 && hi-lo > 1) {
				t.Fatalf("n=%d max=%d: sizes total %d, min %d, max %d", n, maxRecs, total, lo, hi)
			}
		}
	}
}

func TestOwner(t *testing.T) {
	blocks := []BlockRef{{MinID: "c", MaxID: "d"}, {MinID: "f", MaxID: "h"}, {MinID: "m", MaxID: "p"}}
	for id, want := range map[string]int{"": 0, "a": 0, "c": 0, "e": 0, "f": 1, "i": 1, "m": 2, "z": 2} {
		if got := owner(blocks, id); got != want {
			t.Errorf("owner(%q) = %d, want %d", id, got, want)
		}
	}
}

// docOfPackage returns the package documentation as written in segment.go.
func docOfPackage(t *testing.T) string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "segment.go", nil, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil {
		t.Fatal(err)
	}
	return f.Doc.Text()
}

func TestDecodeManifestAtChecksTheKey(t *testing.T) {
	m := Manifest{FormatVersion: 1, CollectionID: "c", Version: 3}
	data, err := encodeManifest(&m)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := decodeManifestAt("collections/c/manifests/00000000000000000003-x.json", data); err != nil {
		t.Fatalf("manifest at its own key: %v", err)
	}
	for name, key := range map[string]string{
		"another collection's key": "collections/d/manifests/00000000000000000003-x.json",
		"another version's key":    "collections/c/manifests/00000000000000000004-x.json",
	} {
		_, err := decodeManifestAt(key, data)
		var ce *CorruptError
		if !errors.As(err, &ce) || ce.Kind != KindManifest || ce.Key != key || ce.CollectionID != collectionOfKey(key) {
			t.Errorf("%s: %v, want a *CorruptError of kind manifest naming %s", name, err, key)
		}
	}
}

package segment

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/compactorhq/compactor/internal/materialize"
)

// fuzzBlocks are the seeds of FuzzDecodeBlock: real blocks of the shapes a
// collection holds (a few records with every field, records without
// embedding, document or metadata, many records in a page).
func fuzzBlocks(t testing.TB) [][]byte {
	many := make([]materialize.Record, 40)
	for i := range many {
		many[i] = materialize.Record{ID: fmt.Sprintf("id-%03d", i), Embedding: []float32{float32(i), 0.5}}
	}
	sets := [][]materialize.Record{
		{{ID: "a", Embedding: []float32{1, 2}, Document: ptr("doc"), Metadata: materialize.Metadata{"k": "v", "n": 1.5, "b": true}}, {ID: "b", Embedding: []float32{3, 4}}},
		{{ID: "only"}},
		{{ID: "x", Document: ptr("")}, {ID: "y", Metadata: materialize.Metadata{}}},
		many,
	}
	var out [][]byte
	for _, recs := range sets {
		data, err := encodeBlock(recs)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, data)
	}
	return out
}

// FuzzDecodeBlock: any bytes decode to an error or to records that are
// sorted, unique, and survive a round trip through encodeBlock; the row
// decode, which decodeBlock falls back to, gives an error or sorted, unique
// records too. (On a damaged file that both read, the direct and the row
// decode may read different records: neither is right, and only the
// blob's checksum, which verification reads, tells. Their equality on
// every shape the writer makes is TestDecodeBlockReadsThePagesAsTheRowDecode's.)
// Each input is small, and decodeBlock bounds what it allocates
// (MaxBlockDecodeBytes), so no input may exhaust memory.
func FuzzDecodeBlock(f *testing.F) {
	for _, b := range fuzzBlocks(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if rows, err := decodeBlockRows(data, -1); err == nil {
			for i := 1; i < len(rows); i++ {
				if rows[i-1].ID >= rows[i].ID {
					t.Fatalf("row decode: ids out of order at %d", i)
				}
			}
		}
		recs, err := decodeBlock(data, -1)
		if err != nil {
			return
		}
		for i := 1; i < len(recs); i++ {
			if recs[i-1].ID >= recs[i].ID {
				t.Fatalf("decoded ids out of order at %d", i)
			}
		}
		if len(recs) == 0 {
			return // encodeBlock writes no empty blocks
		}
		again, err := encodeBlock(recs)
		if err != nil {
			// Records a block can hold but the writer refuses to write are
			// the values checkMetadata rejects (NaN, nested JSON).
			return
		}
		back, err := decodeBlock(again, int64(len(recs)))
		if err != nil {
			t.Fatalf("re-encoded block does not decode: %v", err)
		}
		if !reflect.DeepEqual(back, recs) && !hasNaN(recs) {
			t.Fatalf("round trip changed the records")
		}
	})
}

func hasNaN(recs []materialize.Record) bool {
	for _, r := range recs {
		for _, f := range r.Embedding {
			if f != f {
				return true
			}
		}
	}
	return false
}

// fuzzManifests are the seeds of FuzzDecodeManifest.
func fuzzManifests(t testing.TB) [][]byte {
	ms := []Manifest{
		{FormatVersion: 1, CollectionID: "c1", Version: 7, CompactionOffset: 1234, Dimension: 64, RecordCount: 5,
			CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC),
			Blocks: []BlockRef{
				{Key: "collections/c1/blocks/a.parquet", MinID: "a", MaxID: "c", Records: 3, Bytes: 100},
				{Key: "collections/c1/blocks/b.parquet", MinID: "d", MaxID: "e", Records: 2, Bytes: 90},
			}},
		{FormatVersion: 1, CollectionID: "empty", Version: 1},
	}
	var out [][]byte
	for i := range ms {
		data, err := encodeManifest(&ms[i])
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, data)
	}
	return out
}

// FuzzDecodeManifest: any bytes decode to an error or to a manifest that
// keeps the invariants and survives a round trip; decodeManifestAt names
// the key in every error.
func FuzzDecodeManifest(f *testing.F) {
	for _, b := range fuzzManifests(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		const key = "collections/c1/manifests/00000000000000000007-x.json"
		m, err := decodeManifestAt(key, data)
		if err != nil {
			var ce *CorruptError
			if !errors.As(err, &ce) || ce.Key != key || ce.Kind != KindManifest {
				t.Fatalf("error %v is not a *CorruptError naming the manifest", err)
			}
			return
		}
		if m.CollectionID != "c1" || m.Version != 7 {
			t.Fatalf("manifest of %s version %d accepted at %s", m.CollectionID, m.Version, key)
		}
		again, err := encodeManifest(m)
		if err != nil {
			t.Fatalf("decoded manifest does not encode: %v", err)
		}
		back, err := decodeManifest(again)
		if err != nil {
			t.Fatalf("re-encoded manifest does not decode: %v", err)
		}
		if !reflect.DeepEqual(back, m) && !bytes.Equal(again, mustEncode(t, back)) {
			t.Fatalf("round trip changed the manifest")
		}
	})
}

func mustEncode(t *testing.T, m *Manifest) []byte {
	data, err := encodeManifest(m)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// FuzzDecodeMetadata: decodeMetadata gives json.Unmarshal's result for
// every input, and an error exactly when it does.
func FuzzDecodeMetadata(f *testing.F) {
	for _, s := range []string{
		`{}`, `null`, `{"a":"b"}`, `{"a":1,"b":true,"c":false,"d":null}`, ` { "a" : -1.5e+3 , "b":"x y" } `,
		`{"a":"\u00e9"}`, `{"a":"\n"}`, `{"a":[1]}`, `{"a":{"b":1}}`, `{"a":1,}`, `{"a":01}`, `{"a":1e400}`,
		`{"a":-}`, `{"a":1.}`, `{"a":.5}`, `{"a":"b"}x`, `{"a":"b"`, `{"a" "b"}`, `[]`, `"s"`, `{"a":"\xff"}`,
		`{"a":1,"a":2}`, `{"":""}`, `{"a":tru}`, `{"a":nulll}`, "{\"a\":\"\t\"}", `{"k":1E5,"l":-0}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := decodeMetadata(b)
		var want map[string]any
		werr := json.Unmarshal(b, &want)
		if (err != nil) != (werr != nil) {
			t.Fatalf("decodeMetadata(%q) error %v, json.Unmarshal %v", b, err, werr)
		}
		if err == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("decodeMetadata(%q) = %#v, json.Unmarshal %#v", b, got, want)
		}
	})
}

// TestDecodeMetadataAgreesWithEncodingJSON runs the comparison of
// FuzzDecodeMetadata over random mutations (fixed seed) of metadata as the
// writer stores it: bytes replaced, inserted or cut.
func TestDecodeMetadataAgreesWithEncodingJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(20, 25))
	alphabet := []byte(`{}[]":,.-+eE0123456789 \ntruefalsnul\xff\x01é`)
	for range 20_000 {
		m := map[string]any{"s": "a b", "n": rng.NormFloat64() * 1e3, "b": rng.IntN(2) == 0, "": "x", "z": float64(rng.IntN(100))}
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		for range rng.IntN(3) {
			if len(b) == 0 {
				break
			}
			i := rng.IntN(len(b))
			switch c := alphabet[rng.IntN(len(alphabet))]; rng.IntN(3) {
			case 0:
				b[i] = c
			case 1:
				b = append(b[:i], append([]byte{c}, b[i:]...)...)
			default:
				b = b[:i]
			}
		}
		got, err := decodeMetadata(b)
		var want map[string]any
		werr := json.Unmarshal(b, &want)
		if (err != nil) != (werr != nil) || err == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("decodeMetadata(%q) = %#v, %v; json.Unmarshal %#v, %v", b, got, err, want, werr)
		}
	}
}

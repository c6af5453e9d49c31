package segment

import (
	"math"
	"os"
	"reflect"
	"runtime"
	"slices"
	"testing"

	"github.com/compactorhq/compactor/internal/materialize"
)

// refOf is the manifest entry of a block of recs encoded as data.
func refOf(recs []materialize.Record, data []byte) BlockRef {
	return BlockRef{Key: "collections/c/blocks/b.parquet", MinID: recs[0].ID, MaxID: recs[len(recs)-1].ID,
		Records: int64(len(recs)), Bytes: int64(len(data)), Checksum: Checksum(data), Digest: DigestOf(recs).String()}
}

// writerShapes are record sets whose blocks take the shapes the writer
// makes: the format fixture's records, the Debian sample, quantised
// embeddings (a dictionary), random ones (BYTE_STREAM_SPLIT, an embedding
// column of 2 MiB: several pages), a block of one record.
func writerShapes(t *testing.T) map[string][]materialize.Record {
	return map[string][]materialize.Record{
		"fixture":   formatFixtureRecords(t),
		"debian":    debianRecords(t)[:4096],
		"quantised": syntheticRecords(4096, 128, true),
		"random":    syntheticRecords(4096, 128, false),
		"one":       syntheticRecords(1, 3, false),
	}
}

// The direct digest of a block's pages is the digest of its decoded
// records, for every shape the writer makes: nulls and empties, special
// floats, dictionary and BYTE_STREAM_SPLIT embeddings, several pages per
// column, and the fixtures of format version 1 and of version 2's earlier
// string encodings. The direct path itself must
// read them (no fallback to the row decode).
func TestBlockDigestReadsThePagesAsTheRowDecode(t *testing.T) {
	sets := writerShapes(t)
	v1, err := os.ReadFile("testdata/format/block-v1.parquet")
	if err != nil {
		t.Fatal(err)
	}
	v2, err := os.ReadFile("testdata/format/block-v2-delta.parquet")
	if err != nil {
		t.Fatal(err)
	}
	blobs := map[string][]byte{"fixture-v1": v1, "fixture-v2-delta": v2}
	sets["fixture-v1"] = formatFixtureRecords(t)
	sets["fixture-v2-delta"] = formatFixtureRecords(t)
	for name, recs := range sets {
		data, ok := blobs[name]
		if !ok {
			if data, err = encodeBlock(recs); err != nil {
				t.Fatal(err)
			}
		}
		ref := refOf(recs, data)
		decoded, err := decodeBlockOf(ref, data)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		want := DigestOf(decoded)
		if want != DigestOf(recs) {
			t.Fatalf("%s: decoded records digest to %s, written ones to %s", name, want, DigestOf(recs))
		}
		d := &columnBuffers{}
		got, err := d.digest(ref, data)
		if err != nil || got != want {
			t.Errorf("%s: direct digest %s, %v; want %s", name, got, err, want)
		}
		// Reused buffers give the same again.
		d.release()
		if again, err := d.digest(ref, data); err != nil || again != want {
			t.Errorf("%s: direct digest with reused buffers %s, %v; want %s", name, again, err, want)
		}
	}
}

// A block that holds other records than the ones meant digests to what it
// holds, whichever path reads it: a record dropped, added or altered
// (one float's bit, a document, a metadata value, an id) changes the
// digest, and damaged bytes are an error or another digest.
func TestBlockDigestSeesEveryAlteredRecord(t *testing.T) {
	meant := syntheticRecords(300, 16, false)
	want := DigestOf(meant)
	clone := func() []materialize.Record {
		out := make([]materialize.Record, len(meant))
		for i := range meant {
			out[i] = meant[i].Clone()
		}
		return out
	}
	alter := map[string]func() []materialize.Record{
		"dropped": func() []materialize.Record { r := clone(); return slices.Delete(r, 100, 101) },
		"added": func() []materialize.Record {
			r := clone()
			x := r[100].Clone()
			x.ID += "-extra"
			return slices.Insert(r, 101, x)
		},
		"float bit": func() []materialize.Record {
			r := clone()
			r[7].Embedding[3] = math.Float32frombits(math.Float32bits(r[7].Embedding[3]) ^ 1)
			return r
		},
		"document":    func() []materialize.Record { r := clone(); d := *r[8].Document + "."; r[8].Document = &d; return r },
		"no document": func() []materialize.Record { r := clone(); r[9].Document = nil; return r },
		"metadata":    func() []materialize.Record { r := clone(); r[10].Metadata["n"] = 1e9; return r },
		"no metadata": func() []materialize.Record { r := clone(); r[11].Metadata = nil; return r },
		"id":          func() []materialize.Record { r := clone(); r[12].ID += "x"; return r },
	}
	for name, f := range alter {
		held := f()
		data, err := encodeBlock(held)
		if err != nil {
			t.Fatal(err)
		}
		ref := refOf(held, data)
		got, err := (&columnBuffers{}).digest(ref, data)
		if err != nil || got != DigestOf(held) {
			t.Errorf("%s: direct digest %s, %v; want the held records' %s", name, got, err, DigestOf(held))
		}
		if got == want {
			t.Errorf("%s: the block digests as the records meant", name)
		}
		if got, err := blockDigestOf(ref, data, want); err == nil && got == want {
			t.Errorf("%s: blockDigestOf passes a block of other records", name)
		}
	}
	data, err := encodeBlock(meant)
	if err != nil {
		t.Fatal(err)
	}
	ref := refOf(meant, data)
	for _, at := range []int{len(data) / 3, len(data) / 2, len(data) - 100} {
		bad := slices.Clone(data)
		bad[at] ^= 0x40
		if got, err := blockDigestOf(ref, bad, want); err == nil && got == want {
			t.Errorf("byte %d flipped: the block digests as the records meant", at)
		}
	}
	if got, err := blockDigestOf(ref, data, want); err != nil || got != want {
		t.Fatalf("the intact block: %s, %v; want %s", got, err, want)
	}
}

// The metadata's canonical encoding read straight from its JSON text is
// that of the map decodeMetadata decodes, wherever the direct read takes
// the text; it leaves the rest to decodeMetadata.
func TestFlatMetadataEncodesAsTheDecodedMap(t *testing.T) {
	texts := []string{
		`{}`, ` { } `, `{"a":"x"}`, `{"b":1,"a":2}`, `{"a":1,"a":"again"}`, `{"a":null}`, `{"z":true,"y":false,"x":null}`,
		`{"n":-0.5e-3,"m":1E+300,"o":0}`, `{"ключ":"значение","é":"<a & b>"}`, "{\n\t\"s\" : \"t\" ,\r\"u\":2 }",
		`{"big":1152921504606846976,"tiny":5e-324}`, `{"b":1,"a":2,"b":3,"a":4}`,
		// Not taken directly: escapes, nesting, errors, null.
		`{"a":"x\"y"}`, `{"a\u00e9":1}`, `{"a":[1]}`, `{"a":{"b":1}}`, `null`, `{"a":1e999}`, `{"a":1,}`, `{"a":01}`,
		`{"a":1} x`, `{"a" 1}`, "{\"a\":\"\xff\"}", `[]`, `{"a":tru}`,
	}
	for _, text := range texts {
		want := []byte("prefix")
		m, derr := decodeMetadata([]byte(text))
		if derr == nil {
			want = appendCanonicalMetadata(want, m)
		}
		got, _, ok := appendFlatMetadata([]byte("prefix"), []byte(text), nil)
		switch {
		case !ok && string(got) != "prefix":
			t.Errorf("%s: not taken, but the buffer grew to %q", text, got)
		case ok && derr != nil:
			t.Errorf("%s: taken directly, but decodeMetadata fails: %v", text, derr)
		case ok && string(got) != string(want):
			t.Errorf("%s: encodes as %q, the decoded map as %q", text, got, want)
		}
	}
	for _, text := range []string{`{"b":1,"a":2}`, `{"a":null}`, `{}`, `{"ключ":"значение"}`} {
		if _, _, ok := appendFlatMetadata(nil, []byte(text), nil); !ok {
			t.Errorf("%s: not taken directly", text)
		}
	}
}

// The direct decode of a block's pages gives the records the row decode
// gives, to the nil (a null embedding list and an empty one, documents and
// metadata absent, metadata that takes the JSON decoder), for every shape the
// writer makes and the format fixtures; the direct path itself must read
// them (no fallback to the row decode).
func TestDecodeBlockReadsThePagesAsTheRowDecode(t *testing.T) {
	odd := syntheticRecords(64, 4, false)
	odd[3].Embedding = []float32{}
	odd[4].Embedding = nil
	odd[5].Document = nil
	empty := ""
	odd[6].Document = &empty
	odd[7].Metadata = nil
	odd[8].Metadata = materialize.Metadata{"escaped": "x\"y\u00e9", "n": -1.5e-300, "b": false}
	sets := writerShapes(t)
	sets["odd"] = odd
	noEmbeddings := syntheticRecords(10, 2, false)
	for i := range noEmbeddings {
		noEmbeddings[i].Embedding = nil
	}
	noEmbeddings[2].Embedding = []float32{}
	sets["no embeddings"] = noEmbeddings
	blobs := map[string][]byte{}
	for _, name := range []string{"block-v1.parquet", "block-v2-delta.parquet"} {
		data, err := os.ReadFile("testdata/format/" + name)
		if err != nil {
			t.Fatal(err)
		}
		blobs[name], sets[name] = data, nil
	}
	for name, recs := range sets {
		data, ok := blobs[name]
		if !ok {
			var err error
			if data, err = encodeBlock(recs); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		}
		want, err := decodeBlockRows(data, -1)
		if err != nil {
			t.Fatalf("%s: row decode: %v", name, err)
		}
		d := &columnBuffers{}
		got, err := d.records(data, int64(len(want)))
		if err != nil {
			t.Fatalf("%s: direct decode: %v", name, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: direct decode differs from the row decode", name)
		}
		for i := range got {
			if (got[i].Embedding == nil) != (want[i].Embedding == nil) {
				t.Fatalf("%s: record %q: direct embedding nil %v, row decode's %v", name, got[i].ID, got[i].Embedding == nil, want[i].Embedding == nil)
			}
		}
		// Reused buffers give the same again, and the records do not
		// share them.
		d.release()
		again, err := d.records(data, int64(len(want)))
		if err != nil || !reflect.DeepEqual(again, want) {
			t.Fatalf("%s: direct decode with reused buffers: %v", name, err)
		}
		d.release()
		if _, err := d.records(blobs["block-v1.parquet"], -1); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(again, want) {
			t.Fatalf("%s: records changed when their buffers were reused", name)
		}
	}
}

// heapInUse is the live heap after two collections.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// A record kept after its block is dropped (a query's hit, a merge's
// survivor) keeps its own bytes alive, not its block's columns: one record
// kept from each of 40 decodes of a block of 4,096 records of 128
// dimensions (2 MiB of embeddings each) holds well under a MiB. Records
// that shared one array per column would hold the 40 blocks, 80 MiB and
// more. Not parallel: no other test allocates meanwhile.
func TestDecodedRecordsDoNotHoldTheirBlock(t *testing.T) {
	data, err := encodeBlock(syntheticRecords(4096, 128, false))
	if err != nil {
		t.Fatal(err)
	}
	before := heapInUse()
	kept := make([]materialize.Record, 0, 40)
	for i := range 40 {
		recs, err := decodeBlock(data, 4096)
		if err != nil {
			t.Fatal(err)
		}
		kept = append(kept, recs[i*100])
	}
	held := int64(heapInUse()) - int64(before)
	runtime.KeepAlive(kept)
	if held > 8<<20 {
		t.Fatalf("40 kept records hold %.1f MiB of heap: they keep their blocks alive", float64(held)/(1<<20))
	}
}

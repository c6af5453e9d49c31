package materialize

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"reflect"
	"runtime"
	"strings"
	"testing"
)

func TestBinaryRoundTrip(t *testing.T) {
	d := ""
	cases := []OperationRecord{
		{Op: OpDelete, ID: "x"},
		{Op: OpAdd, ID: "ünïcode id", Embedding: []float32{0, -1.5, 3.25}, Document: &d, Metadata: Metadata{}},
		{Op: OpUpsert, ID: "m", Embedding: []float32{}, Document: str("doc"),
			Metadata: Metadata{"s": "v", "n": 1e300, "neg": -0.5, "t": true, "f": false, "null": nil, "": "empty key"}},
	}
	r := rand.New(rand.NewPCG(1, 1))
	for range 200 {
		o := OperationRecord{Op: Op(1 + r.IntN(4)), ID: string(rune('a' + r.IntN(26)))}
		if r.IntN(2) == 0 {
			o.Embedding = make([]float32, r.IntN(130))
			for i := range o.Embedding {
				o.Embedding[i] = r.Float32()
			}
		}
		cases = append(cases, o)
	}
	for i, c := range cases {
		b, err := c.MarshalBinary()
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		var got OperationRecord
		if err := got.UnmarshalBinary(b); err != nil {
			t.Fatalf("case %d: decode: %v", i, err)
		}
		if !reflect.DeepEqual(got, c) {
			t.Fatalf("case %d: round trip %+v, want %+v", i, got, c)
		}
		for n := range len(b) { // every truncation is an error, never a panic
			var o OperationRecord
			if err := o.UnmarshalBinary(b[:n]); err == nil {
				t.Fatalf("case %d: %d of %d bytes decoded without error", i, n, len(b))
			}
		}
	}
	if _, err := (OperationRecord{ID: "x", Metadata: Metadata{"l": []any{1}}}).MarshalBinary(); err == nil {
		t.Fatal("a list metadata value was encoded")
	}
}

func TestUnmarshalBinaryRejectsWhatMarshalBinaryNeverWrites(t *testing.T) {
	enc := func(o OperationRecord) []byte {
		b, err := o.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	base := enc(OperationRecord{Op: OpUpsert, ID: "x", Document: str("d"), Metadata: Metadata{"a": "1", "b": 2.0}})
	// version, op, id "x", embedding absent, document "d", 2 entries:
	// "a" string "1", "b" number.
	const docFlag, metaCount, secondKey = 5, 8, 15
	edit := func(i int, v byte) []byte { b := bytes.Clone(base); b[i] = v; return b }
	cases := map[string][]byte{
		"op 0":                  edit(1, 0),
		"op 5":                  edit(1, 5),
		"document flag 2":       edit(docFlag, 2),
		"keys out of order":     edit(secondKey, 'a'),
		"2^60 embedding values": {binaryVersion, byte(OpAdd), 1, 'x', 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x10},
		"2^40 metadata entries": append(bytes.Clone(base[:metaCount]), 0x81, 0x80, 0x80, 0x80, 0x80, 0x20),
		"a non-minimal varint":  {binaryVersion, byte(OpDelete), 0x81, 0x00, 'x', 0, 0, 0},
		"version 2":             edit(0, 2),
		"trailing bytes":        append(bytes.Clone(base), 0),
	}
	if base[docFlag] != 1 || base[metaCount] != 3 || base[secondKey] != 'b' {
		t.Fatalf("layout changed: % x", base)
	}
	for name, b := range cases {
		var o OperationRecord
		var err error
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		err = o.UnmarshalBinary(b)
		runtime.ReadMemStats(&after)
		if !errors.Is(err, ErrCorruptRecord) {
			t.Errorf("%s: %v, want ErrCorruptRecord", name, err)
		}
		// The error message is all that may be allocated, not the claim.
		if n := after.TotalAlloc - before.TotalAlloc; strings.HasPrefix(name, "2^") && n > 64<<10 {
			t.Errorf("%s: %d bytes allocated before the claim was refused", name, n)
		}
	}
}

// seedRecords are FuzzUnmarshalBinary's seeds: one of every field shape.
func seedRecords() []OperationRecord {
	return []OperationRecord{
		{Op: OpAdd, ID: "x", Embedding: []float32{1}, Document: str("d"), Metadata: Metadata{"k": "v", "n": 1.0}},
		{Op: OpDelete, ID: "only an id"},
		{Op: OpUpdate, ID: "m", Embedding: []float32{}, Document: str(""), Metadata: Metadata{}},
		{Op: OpUpsert, ID: "ünï", Embedding: []float32{0, -1.5, 3.25}, Metadata: Metadata{"t": true, "f": false, "null": nil, "": "empty key", "big": 1e300}},
	}
}

// FuzzUnmarshalBinary: any input decodes to an error or to a record that
// encodes back to exactly the input (the encoding is canonical), without
// panicking or allocating more than the input can hold.
func FuzzUnmarshalBinary(f *testing.F) {
	for _, o := range seedRecords() {
		b, err := o.MarshalBinary()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var o OperationRecord
		if err := o.UnmarshalBinary(data); err != nil {
			if !errors.Is(err, ErrCorruptRecord) {
				t.Fatalf("error %v does not match ErrCorruptRecord", err)
			}
			return
		}
		again, err := o.MarshalBinary()
		if err != nil {
			t.Fatalf("decoded record does not encode: %v", err)
		}
		if !bytes.Equal(again, data) {
			t.Fatalf("decoded record encodes to % x, not to its input % x", again, data)
		}
	})
}

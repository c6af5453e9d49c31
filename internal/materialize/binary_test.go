package materialize

import (
	"bytes"
	"math/rand/v2"
	"reflect"
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

func FuzzUnmarshalBinary(f *testing.F) {
	b, _ := OperationRecord{Op: OpAdd, ID: "x", Embedding: []float32{1}, Document: str("d"), Metadata: Metadata{"k": "v", "n": 1.0}}.MarshalBinary()
	f.Add(b)
	f.Fuzz(func(t *testing.T, data []byte) {
		var o OperationRecord
		if err := o.UnmarshalBinary(data); err != nil {
			return
		}
		again, err := o.MarshalBinary()
		if err != nil {
			t.Fatalf("decoded record does not encode: %v", err)
		}
		// Compare encodings, not structs: NaN bits are not equal to
		// themselves, and duplicate keys collapse on the first decode.
		var back OperationRecord
		if err := back.UnmarshalBinary(again); err != nil {
			t.Fatalf("re-encoded record does not decode: %v", err)
		}
		if third, _ := back.MarshalBinary(); !bytes.Equal(third, again) {
			t.Fatal("encoding is not stable across a round trip")
		}
	})
}

package catalog

import (
	"errors"
	"strings"
	"testing"

	"github.com/compactorhq/compactor/internal/materialize"
)

// recordIDOf reads the id where MarshalBinary writes it, for every op and
// for ids whose length takes one or two uvarint bytes.
func TestRecordIDOfReadsTheEncodedID(t *testing.T) {
	doc := "d"
	for _, op := range []materialize.OperationRecord{
		{Op: materialize.OpAdd, ID: "a", Embedding: []float32{1, 2}, Document: &doc, Metadata: materialize.Metadata{"k": "v"}},
		{Op: materialize.OpUpdate, ID: "é-ü"},
		{Op: materialize.OpUpsert, ID: strings.Repeat("x", 127), Embedding: []float32{1}},
		{Op: materialize.OpDelete, ID: strings.Repeat("y", 1024)},
	} {
		b, err := op.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		id, err := recordIDOf(b)
		if err != nil || string(id) != op.ID {
			t.Fatalf("recordIDOf(%s of %.10q) = %.10q, %v", op.Op, op.ID, id, err)
		}
		if _, err := recordIDOf(b[:2+len(op.ID)/2]); !errors.Is(err, materialize.ErrCorruptRecord) {
			t.Fatalf("truncated %s: %v, want a corrupt record", op.Op, err)
		}
	}
	for _, b := range [][]byte{nil, {1, 1}, {1, 1, 0x80}} {
		if _, err := recordIDOf(b); !errors.Is(err, materialize.ErrCorruptRecord) {
			t.Fatalf("recordIDOf(%v): %v, want a corrupt record", b, err)
		}
	}
}

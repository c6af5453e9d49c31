package segment

import (
	"testing"

	"github.com/compactorhq/compactor/internal/materialize"
)

// TestBlockKeepsMissingMetadataNull: a record without metadata reads back
// without metadata wherever it stands among records with metadata (a
// layout that wrote such a row as an empty string made the block
// unreadable).
func TestBlockKeepsMissingMetadataNull(t *testing.T) {
	recs := []materialize.Record{
		{ID: "id-31", Embedding: []float32{1, 2, 3}, Metadata: materialize.Metadata{"a": false, "c": "s6"}},
		{ID: "id-32", Embedding: []float32{4, 5, 6}},
		{ID: "id-33", Embedding: []float32{7, 8, 9}, Metadata: materialize.Metadata{"a": true, "c": 12.0}},
		{ID: "id-36", Embedding: []float32{1, 5, 9}, Metadata: materialize.Metadata{"b": "s6"}},
		{ID: "id-37", Embedding: []float32{2, 4, 8}},
	}
	data, err := encodeBlock(recs)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeBlock(data, int64(len(recs)))
	if err != nil {
		t.Fatal(err)
	}
	for i := range recs {
		if (got[i].Metadata == nil) != (recs[i].Metadata == nil) || len(got[i].Metadata) != len(recs[i].Metadata) {
			t.Errorf("record %s: metadata %#v, want %#v", recs[i].ID, got[i].Metadata, recs[i].Metadata)
		}
	}
}

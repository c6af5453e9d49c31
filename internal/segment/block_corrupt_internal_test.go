//go:build !race

package segment

import (
	"bytes"
	"testing"

	"github.com/compactorhq/compactor/internal/materialize"
)

// Flipping bytes anywhere in a block must give an error or records, never a
// crash: parquet-go panics on some corrupt footers, and decodeBlock recovers.
// Not under -race: its checkptr instrumentation turns parquet-go's unsafe.Slice
// of a nil pointer into a fatal error instead of a panic.
func TestDecodeBlockSurvivesFlippedBytes(t *testing.T) {
	good, err := encodeBlock([]materialize.Record{
		{ID: "a", Embedding: []float32{1, 2}, Metadata: materialize.Metadata{"k": "v"}},
		{ID: "b", Document: ptr("doc")},
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range good {
		bad := bytes.Clone(good)
		bad[i] ^= 0xff
		_, _ = decodeBlock(bad, -1)
	}
}

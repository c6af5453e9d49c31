package catalog_test

import (
	"testing"

	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/catalog/catalogtest"
)

// BenchmarkAppendLog appends batches of 5,000 ADD records with 64-dimension
// embeddings, a document and metadata, as PushLogs of a bulk load does.
func BenchmarkAppendLog(b *testing.B) {
	const batch, dim = 5000, 64
	c := catalogtest.Open(b)
	col := mustCreate(b, c, "bench", dim)
	ops := adds("bench", batch, dim)
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		if _, _, err := c.AppendLog(ctx, col.ID, ops, catalog.AppendLimits{}); err != nil {
			b.Fatal(err)
		}
		n += batch
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "records/s")
}

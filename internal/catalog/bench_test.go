package catalog_test

import (
	"fmt"
	"syscall"
	"testing"
	"time"

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

// BenchmarkScanLog reads 200,000 log rows of 128-dim records in batches of
// 10,000 (as a compaction does), reporting records/s and the CPU seconds
// (user + system) per op, which a busy machine disturbs less than time.
func BenchmarkScanLog(b *testing.B) {
	const n, batch, dim = 200_000, 10_000, 128
	c := catalogtest.Open(b)
	col := mustCreate(b, c, "bench", dim)
	ops := adds("bench", 5000, dim)
	for i := 0; i < n; i += len(ops) {
		for j := range ops {
			ops[j].ID = fmt.Sprintf("id-%09d", i+j)
		}
		if _, _, err := c.AppendLog(ctx, col.ID, ops, catalog.AppendLimits{}); err != nil {
			b.Fatal(err)
		}
	}
	cpu0 := cpuSeconds()
	rows := 0
	for b.Loop() {
		for after := int64(0); after < n; {
			k, err := c.ScanLog(ctx, col.ID, after, n, batch, func(off int64, rec []byte) error {
				after = off
				return nil
			})
			if err != nil || k == 0 {
				b.Fatal(k, err)
			}
			rows += k
		}
	}
	b.ReportMetric(float64(rows)/b.Elapsed().Seconds(), "records/s")
	b.ReportMetric((cpuSeconds()-cpu0)/float64(b.N), "cpu-s/op")
}

func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

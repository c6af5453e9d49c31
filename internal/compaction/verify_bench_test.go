package compaction

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/segment"
)

// BenchmarkVerifyCost: what verification costs one compaction of 100,000
// operation records (128-dim, the mix of BenchmarkCompactFull1M: 70 % ADDs,
// 15 % UPDATEs, 15 % DELETEs) into an empty collection, SQLite catalog and
// file:// bucket as in `compactor serve`, indexing on (the default) and off.
// Sub-benchmarks, each reporting the process's CPU time per operation
// (cpu-ns/op: on a shared machine a better measure than the elapsed time)
// and the blob bytes it read (read-B/op):
//
//   - compact/read-back: the compaction, with the read-back check (default);
//   - compact/no-read-back: the same compaction with --no-read-back;
//   - verify: a verify job's check of the version written (every blob);
//   - verify-replay: the same with --replay (the log slice read again and
//     materialized over the previous version, here none).
//
// The ratio of read-back to no-read-back is the check's cost in the
// compaction; verify's to compact's, a verify job's.
func BenchmarkVerifyCost(b *testing.B) { benchVerifyCost(b, 100_000) }

// BenchmarkVerifyCost1M is BenchmarkVerifyCost at 1,000,000 operation
// records. Skipped under -short.
func BenchmarkVerifyCost1M(b *testing.B) {
	if testing.Short() {
		b.Skip("1M records: skipped under -short")
	}
	benchVerifyCost(b, 1_000_000)
}

func benchVerifyCost(b *testing.B, n int) {
	const dim = 128
	for _, index := range []bool{false, true} {
		name := "index=off"
		if index {
			name = "index=on"
		}
		b.Run(name, func(b *testing.B) {
			setup := func(b *testing.B, noReadBack bool) *env {
				b.Helper()
				e := newFileEnv(b, DefaultConfig().MaxRecords)
				blobs, closer, err := segment.OpenBucket(e.ctx, "file://"+b.TempDir())
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { closer.Close() })
				e.seg = segment.NewStore(blobs, segment.Config{NoReadBack: noReadBack}, e.clock.Now)
				if e.comp, err = New(keptLog{e.cat}, e.seg, DefaultConfig(), nil); err != nil {
					b.Fatal(err)
				}
				if !index {
					c, err := e.cat.CreateCollectionSpec(e.ctx, catalog.CollectionSpec{Name: "noindex", Index: catalog.IndexSettings{Disabled: true}})
					if err != nil {
						b.Fatal(err)
					}
					e.id = c.ID
				}
				pushMix(b, e, rand.New(rand.NewPCG(5, 6)), n, dim)
				return e
			}
			for _, noReadBack := range []bool{false, true} {
				sub := "compact/read-back"
				if noReadBack {
					sub = "compact/no-read-back"
				}
				b.Run(sub, func(b *testing.B) {
					var cpu time.Duration
					var read int64
					for b.Loop() {
						b.StopTimer()
						e := setup(b, noReadBack)
						b.StartTimer()
						start := cpuTime(b)
						res := e.compact()
						cpu += cpuTime(b) - start
						if !noReadBack {
							read += res.BytesWritten // blocks read back (the manifest is not)
						}
					}
					b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
					b.ReportMetric(float64(read)/float64(b.N), "read-B/op")
				})
			}
			for _, replay := range []bool{false, true} {
				sub := "verify"
				if replay {
					sub = "verify-replay"
				}
				b.Run(sub, func(b *testing.B) {
					e := setup(b, false)
					e.compact()
					var cpu time.Duration
					var read int64
					for b.Loop() {
						start := cpuTime(b)
						res, err := e.comp.Verify(e.ctx, e.id, VerifyOptions{Replay: replay})
						cpu += cpuTime(b) - start
						if err != nil || (replay && !res.Replayed) {
							b.Fatalf("verify: %v (replayed %v: %s)", err, res.Replayed, res.ReplayNote)
						}
						read += res.BytesRead
					}
					b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
					b.ReportMetric(float64(read)/float64(b.N), "read-B/op")
				})
			}
		})
	}
}

package compaction

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/jobtype"
	"github.com/compactorhq/compactor/internal/materialize"
	"github.com/compactorhq/compactor/internal/segment"
)

// benchOps returns n ADD records with dim-dimensional embeddings, ids
// id-<i*step+offset> (zero-padded so they sort numerically), with a short
// document and three metadata keys, like the sample data.
func benchOps(r *rand.Rand, n, dim, step, offset int) []materialize.OperationRecord {
	ops := make([]materialize.OperationRecord, n)
	for i := range ops {
		e := make([]float32, dim)
		for j := range e {
			e[j] = r.Float32()*2 - 1
		}
		d := fmt.Sprintf("record number %d of the benchmark", i)
		ops[i] = materialize.OperationRecord{
			Op: materialize.OpAdd, ID: fmt.Sprintf("id-%09d", i*step+offset), Embedding: e, Document: &d,
			Metadata: materialize.Metadata{"section": "bench", "n": float64(i), "even": i%2 == 0},
		}
	}
	return ops
}

func pushAll(b *testing.B, e *env, ops []materialize.OperationRecord) {
	for i := 0; i < len(ops); i += 5000 {
		e.push(ops[i:min(i+5000, len(ops))]...)
	}
}

func report(b *testing.B, records, bytes int64) {
	s := b.Elapsed().Seconds()
	b.ReportMetric(float64(records)/s, "records/s")
	b.ReportMetric(float64(bytes)/s, "bytes/s")
}

// BenchmarkCompactFull: one compaction of 100,000 records with 128-dim
// embeddings into an empty collection (log read, materialization, Parquet
// blocks, manifest, commit). Setup (appending to the log) is not timed.
func BenchmarkCompactFull(b *testing.B) { benchCompactFull(b, false) }

// BenchmarkCompactFullNoIndex is BenchmarkCompactFull into a collection
// without a vector index: the materialization alone, the work DuckDB does
// in scripts/bench.sh.
func BenchmarkCompactFullNoIndex(b *testing.B) { benchCompactFull(b, true) }

func benchCompactFull(b *testing.B, noIndex bool) {
	const n, dim = 100_000, 128
	ops := benchOps(rand.New(rand.NewPCG(1, 2)), n, dim, 10, 0)
	var records, bytes int64
	var cpu time.Duration
	for b.Loop() {
		b.StopTimer()
		e := newEnv(b, envConfig{maxRecords: n, batchRecords: 5000, maxBlock: 4096, minBlock: 1024, noIndex: noIndex})
		pushAll(b, e, ops)
		b.StartTimer()
		c0 := cpuNow()
		res := e.compact()
		cpu += cpuNow() - c0
		records += res.OpRecordsRead
		bytes += res.BytesWritten
	}
	report(b, records, bytes)
	b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
}

// BenchmarkEstimateFull: the estimate the manager makes of a job before it
// runs it (Compactor.Estimate: a scan of the log slice, no record decoded),
// of the 100,000 records of BenchmarkCompactFull.
func BenchmarkEstimateFull(b *testing.B) {
	const n, dim = 100_000, 128
	e := newEnv(b, envConfig{maxRecords: n, batchRecords: 5000, maxBlock: 4096, minBlock: 1024, noIndex: true})
	pushAll(b, e, benchOps(rand.New(rand.NewPCG(1, 2)), n, dim, 10, 0))
	var cpu time.Duration
	for b.Loop() {
		c0 := cpuNow()
		est, err := e.comp.Estimate(e.ctx, e.id)
		cpu += cpuNow() - c0
		if err != nil || est.OpRecords != n {
			b.Fatalf("estimate: %d op records, %v; want %d", est.OpRecords, err, n)
		}
	}
	b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
}

// BenchmarkCompactFullPriced: the compaction of BenchmarkCompactFullNoIndex
// together with the estimate that prices it for the job's prediction, as
// the server runs it: sub-benchmark "estimate-first" estimates the job
// with Estimate (its own scan of the log slice) and then compacts;
// "inline" compacts with Options.OnEstimate, the estimate priced from the
// rows the compaction reads. Both report the CPU time (cpu-s/op) of the
// estimate and the compaction together.
func BenchmarkCompactFullPriced(b *testing.B) {
	const n, dim = 100_000, 128
	ops := benchOps(rand.New(rand.NewPCG(1, 2)), n, dim, 10, 0)
	for _, inline := range []bool{false, true} {
		name := "estimate-first"
		if inline {
			name = "inline"
		}
		b.Run(name, func(b *testing.B) {
			var cpu time.Duration
			for b.Loop() {
				b.StopTimer()
				e := newEnv(b, envConfig{maxRecords: n, batchRecords: 5000, maxBlock: 4096, minBlock: 1024, noIndex: true})
				pushAll(b, e, ops)
				b.StartTimer()
				c0 := cpuNow()
				var est jobtype.Estimate
				opts := Options{}
				if inline {
					opts.OnEstimate = func(e jobtype.Estimate) { est = e }
				} else {
					var err error
					if est, err = e.comp.Estimate(e.ctx, e.id); err != nil {
						b.Fatal(err)
					}
				}
				res, err := e.comp.Compact(e.ctx, e.id, opts)
				cpu += cpuNow() - c0
				if err != nil || est.OpRecords != n || res.OpRecordsRead != n {
					b.Fatalf("compact: %v; estimated %d op records, read %d; want %d", err, est.OpRecords, res.OpRecordsRead, n)
				}
			}
			b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
		})
	}
}

// cpuNow is the CPU time (user + system) the process has used: the
// measure of a benchmark on a machine that other work loads, where wall
// time stretches.
func cpuNow() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkCompactIncremental: one compaction of 1,000 new records spread
// evenly over a collection of 100,000 (128-dim). Every block owns some of
// the new ids, so copy-on-write rewrites them all: the worst case.
func BenchmarkCompactIncremental(b *testing.B) {
	benchIncremental(b, func(i, round int) string { return fmt.Sprintf("id-%09d-%d", i*1000+1+round%9, round) })
}

// BenchmarkCompactIncrementalAppend: one compaction of 1,000 new records
// whose ids sort after the existing ones (time-ordered ids), into a
// collection of 100,000: copy-on-write rewrites only the last block.
func BenchmarkCompactIncrementalAppend(b *testing.B) {
	benchIncremental(b, func(i, round int) string { return fmt.Sprintf("id-9%05d-%08d", round, i) })
}

func benchIncremental(b *testing.B, id func(i, round int) string) {
	const n, inc, dim = 100_000, 1_000, 128
	r := rand.New(rand.NewPCG(3, 4))
	e := newEnv(b, envConfig{maxRecords: n, batchRecords: 5000, maxBlock: 4096, minBlock: 1024})
	pushAll(b, e, benchOps(r, n, dim, 10, 0))
	e.compact()
	var records, bytes int64
	var blocks int
	round := 0
	for b.Loop() {
		b.StopTimer()
		round++
		fresh := benchOps(r, inc, dim, 1, 0)
		for i := range fresh {
			fresh[i].ID = id(i, round)
		}
		pushAll(b, e, fresh)
		b.StartTimer()
		res := e.compact()
		records += res.OpRecordsRead
		bytes += res.BytesWritten
		blocks += res.BlocksWritten
	}
	report(b, records, bytes)
	b.ReportMetric(float64(blocks)/float64(b.N), "blocks-written/op")
}

// BenchmarkCompactFull1M: one compaction of 1,000,000 operation records
// (128-dim) into an empty collection: 70 % ADDs of new ids, 15 % UPDATEs and
// 15 % DELETEs of ids added earlier, about 600,000 records in the end. The
// catalog is SQLite in a temp dir and the blob store a file:// bucket, as in
// `compactor serve`. It reports records/s, bytes/s, and the process's peak
// RSS (VmHWM, reset before the timed part where Linux allows) and peak Go
// heap during the compaction, and the write amplification. The compaction
// flags are the defaults (--max-compaction-size takes the backlog whole).
// Skipped under -short.
func BenchmarkCompactFull1M(b *testing.B) {
	if testing.Short() {
		b.Skip("1M records: skipped under -short")
	}
	const n, dim = 1_000_000, 128
	var records, bytes, written, final int64
	var peakRSS, peakHeap uint64
	var cpu time.Duration
	for b.Loop() {
		b.StopTimer()
		e := newFileEnv(b, DefaultConfig().MaxRecords)
		pushMix(b, e, rand.New(rand.NewPCG(5, 6)), n, dim)
		runtime.GC()
		resetPeakRSS()
		stop := samplePeakHeap()
		b.StartTimer()
		c0 := cpuNow()
		res := e.compact()
		cpu += cpuNow() - c0
		b.StopTimer()
		peakHeap = max(peakHeap, stop())
		peakRSS = max(peakRSS, readPeakRSS())
		b.StartTimer()
		records += res.OpRecordsRead
		bytes += res.BytesWritten
		written += res.RecordsWritten
		final += res.RecordCount
	}
	report(b, records, bytes)
	// Records written over the rows of the final segment (1.0: every row
	// written once; chained jobs would write more).
	b.ReportMetric(float64(written)/float64(final), "write-amp")
	b.ReportMetric(float64(peakRSS)/(1<<20), "peak-RSS-MiB")
	b.ReportMetric(float64(peakHeap)/(1<<20), "peak-heap-MiB")
	b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
}

// newFileEnv is newEnv over a file:// blob store in a temp dir (block
// bytes are not held in memory, as in production) and the default
// compaction flags except maxRecords.
func newFileEnv(b *testing.B, maxRecords int) *env {
	b.Helper()
	e := newEnv(b, envConfig{maxRecords: maxRecords, batchRecords: DefaultConfig().BatchRecords})
	blobs, closer, err := segment.OpenBucket(e.ctx, "file://"+b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { closer.Close() })
	e.seg = segment.NewStore(blobs, segment.Config{}, e.clock.Now)
	cfg := DefaultConfig()
	cfg.MaxRecords = maxRecords
	if e.comp, err = New(e.cat, e.seg, cfg, nil); err != nil {
		b.Fatal(err)
	}
	return e
}

// pushMix appends n operation records to e's log (not to its model): ADDs
// of new ids (70 %), UPDATEs (15 %) and DELETEs (15 %) of ids added
// earlier, generated and appended 5,000 at a time. The j-th ADD's id is
// j scrambled (ids arrive in no particular order).
func pushMix(b *testing.B, e *env, r *rand.Rand, n, dim int) {
	mixID := func(j int) string { return fmt.Sprintf("id-%09d", uint64(j)*2654435761%1_000_000_000) }
	added := 0
	batch := make([]materialize.OperationRecord, 0, 5000)
	for i := range n {
		var op materialize.OperationRecord
		switch k := i % 20; {
		case k < 14 || added == 0:
			op = benchOps(r, 1, dim, 1, 0)[0]
			op.ID = mixID(added)
			added++
		case k < 17:
			op = benchOps(r, 1, dim, 1, 0)[0]
			op.Op, op.ID = materialize.OpUpdate, mixID(r.IntN(added))
		default:
			op = materialize.OperationRecord{Op: materialize.OpDelete, ID: mixID(r.IntN(added))}
		}
		batch = append(batch, op)
		if len(batch) == cap(batch) || i == n-1 {
			if _, _, err := e.cat.AppendLog(e.ctx, e.id, batch, catalog.AppendLimits{}); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
}

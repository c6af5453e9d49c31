package compaction

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/compactorhq/compactor/internal/materialize"
	"github.com/compactorhq/compactor/internal/segment"
)

// BenchmarkCompactSpreadUpdates: one compaction of 1,000 UPDATEs of
// existing ids spread evenly over a collection of 100,000 records (128-dim),
// every block owning some, with the default delta policy: most compactions
// write one delta, every 16th folds the deltas into the blocks (a rewrite of
// every block they touch: here all). ns/op is the average, folds included;
// the metrics split it: delta-ns (the compactions that wrote a delta),
// fold-ns (those that folded), full-ns (one full compaction of the same
// records into an empty collection, measured once in the setup), and
// delta/full, the goal's ratio (≤ 0.05).
func BenchmarkCompactSpreadUpdates(b *testing.B) { benchSpreadUpdates(b, 100_000, segment.Config{}) }

// BenchmarkCompactSpreadUpdatesNoDeltas: the same with deltas off, every
// compaction rewriting every block (the cost before deltas).
func BenchmarkCompactSpreadUpdatesNoDeltas(b *testing.B) {
	benchSpreadUpdates(b, 100_000, segment.Config{NoDeltas: true})
}

// BenchmarkCompactSpreadUpdates1M: BenchmarkCompactSpreadUpdates over
// 1,000,000 records (skipped in -short; the setup alone takes a minute).
func BenchmarkCompactSpreadUpdates1M(b *testing.B) {
	if testing.Short() {
		b.Skip("loads 1,000,000 records")
	}
	benchSpreadUpdates(b, 1_000_000, segment.Config{})
}

func benchSpreadUpdates(b *testing.B, n int, seg segment.Config) {
	const inc, dim = 1_000, 128
	r := rand.New(rand.NewPCG(5, 6))
	e := newEnv(b, envConfig{maxRecords: n, batchRecords: 5000, maxBlock: 4096, minBlock: 1024, seg: seg})
	pushAll(b, e, benchOps(r, n, dim, 10, 0))
	start := time.Now()
	e.compact()
	full := time.Since(start)

	var deltaTime, foldTime time.Duration
	var deltas, folds int
	var records, bytes int64
	round := 0
	for b.Loop() {
		b.StopTimer()
		round++
		ops := spreadUpdates(r, n, inc, dim, round)
		pushAll(b, e, ops)
		before := e.deltaCount()
		b.StartTimer()
		start := time.Now()
		res := e.compact()
		took := time.Since(start)
		b.StopTimer()
		if after := e.deltaCount(); after > before {
			deltas++
			deltaTime += took
		} else {
			folds++
			foldTime += took
		}
		records += res.OpRecordsRead
		bytes += res.BytesWritten
		b.StartTimer()
	}
	report(b, records, bytes)
	b.ReportMetric(float64(full.Nanoseconds()), "full-ns")
	if deltas > 0 {
		d := float64(deltaTime.Nanoseconds()) / float64(deltas)
		b.ReportMetric(d, "delta-ns")
		b.ReportMetric(d/float64(full.Nanoseconds()), "delta/full")
	}
	if folds > 0 {
		f := float64(foldTime.Nanoseconds()) / float64(folds)
		b.ReportMetric(f, "fold-ns")
		b.ReportMetric(f/float64(full.Nanoseconds()), "fold/full")
	}
	b.ReportMetric(float64(bytes)/float64(b.N), "bytes-written/op")
}

// spreadUpdates returns inc UPDATEs of ids of benchOps(…, n, …, 10, 0)
// spread evenly over them (one every n/inc), shifted by round: a new
// embedding and one metadata key changed.
func spreadUpdates(r *rand.Rand, n, inc, dim, round int) []materialize.OperationRecord {
	ops := make([]materialize.OperationRecord, inc)
	stride := n / inc
	for i := range ops {
		e := make([]float32, dim)
		for j := range e {
			e[j] = r.Float32()*2 - 1
		}
		ops[i] = materialize.OperationRecord{
			Op: materialize.OpUpdate, ID: fmt.Sprintf("id-%09d", (i*stride+round%stride)*10), Embedding: e,
			Metadata: materialize.Metadata{"round": float64(round)},
		}
	}
	return ops
}

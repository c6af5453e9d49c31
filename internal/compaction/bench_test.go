package compaction

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/compactorhq/compactor/internal/materialize"
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
func BenchmarkCompactFull(b *testing.B) {
	const n, dim = 100_000, 128
	ops := benchOps(rand.New(rand.NewPCG(1, 2)), n, dim, 10, 0)
	var records, bytes int64
	for b.Loop() {
		b.StopTimer()
		e := newEnv(b, envConfig{maxRecords: n, batchRecords: 5000, maxBlock: 4096, minBlock: 1024})
		pushAll(b, e, ops)
		b.StartTimer()
		res := e.compact()
		records += res.RecordsRead
		bytes += res.BytesWritten
	}
	report(b, records, bytes)
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
		records += res.RecordsRead
		bytes += res.BytesWritten
		blocks += res.BlocksWritten
	}
	report(b, records, bytes)
	b.ReportMetric(float64(blocks)/float64(b.N), "blocks-written/op")
}

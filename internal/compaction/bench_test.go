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

// BenchmarkCompactIncremental: one compaction of 1,000 new records into a
// collection of 100,000 (128-dim): copy-on-write rewrites only the blocks
// whose id ranges receive them.
func BenchmarkCompactIncremental(b *testing.B) {
	const n, inc, dim = 100_000, 1_000, 128
	r := rand.New(rand.NewPCG(3, 4))
	baseOps := benchOps(r, n, dim, 10, 0)
	e := newEnv(b, envConfig{maxRecords: n, batchRecords: 5000, maxBlock: 4096, minBlock: 1024})
	pushAll(b, e, baseOps)
	e.compact()
	var records, bytes int64
	round := 0
	for b.Loop() {
		b.StopTimer()
		// New ids interleaved with the existing ones, spread over the range.
		round++
		fresh := benchOps(r, inc, dim, n*10/inc, 1+round%9)
		for i := range fresh {
			fresh[i].ID = fmt.Sprintf("%s-%d", fresh[i].ID, round)
		}
		pushAll(b, e, fresh)
		b.StartTimer()
		res := e.compact()
		records += res.RecordsRead
		bytes += res.BytesWritten
	}
	report(b, records, bytes)
}

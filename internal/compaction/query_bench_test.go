package compaction

import (
	"testing"
)

// BenchmarkQueryExact: one exact QueryRecords (k 10, no filter and a
// where filter) over a 63,436-record collection made from the Debian
// sample (64-dim cosine), all in the uncompacted log tail ("tail") and all
// compacted ("segment"). Setup is not timed. Compare runs on one machine
// only.
func BenchmarkQueryExact(b *testing.B) {
	ops := debianOps(b, debianRecords)
	e := newEnv(b, envConfig{maxRecords: debianRecords, batchRecords: 5000, maxBlock: 4096, minBlock: 1024})
	pushAll(b, e, ops)
	q := ops[123].Embedding
	filters := []struct {
		name  string
		where string
	}{{"all", ``}, {"games", `{"section": "games"}`}}
	run := func(b *testing.B) {
		for _, f := range filters {
			b.Run(f.name, func(b *testing.B) {
				w := mustWhere(b, f.where)
				for b.Loop() {
					res, err := e.comp.QueryRecords(e.ctx, e.id, Query{Embeddings: [][]float32{q}, K: 10, Where: w, Exact: true})
					if err != nil {
						b.Fatal(err)
					}
					if len(res.Hits[0]) != 10 {
						b.Fatalf("%d hits", len(res.Hits[0]))
					}
				}
				b.ReportMetric(float64(debianRecords), "records/op")
			})
		}
	}
	b.Run("tail", run)
	e.compactAll()
	b.Run("segment", run)
}

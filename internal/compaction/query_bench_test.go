package compaction

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/segment"
	"github.com/compactorhq/compactor/internal/vindex"
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

// BenchmarkQueryFilteredScan: a QueryRecords with k 10 and a where filter
// that the index prices as a scan, over 100,000 compacted records of 128
// dimensions (l2; a bucket 0..99 in each record's metadata, so bucket < p
// matches p %), with an empty log tail and the server's row cache: "memory" is the plan that answers
// it from the index's vectors and metadata, "blocks" the same query with
// Exact (a scan of every block, the plan before it), "walk" a 50 % filter
// searched in the graph, for scale; "filter" is the in-memory pass alone
// (ScanWhere: the query's filter on every indexed record). Setup (the
// log, the compaction and its index, the first filtered query that reads
// the metadata) is not timed. Compare runs on one machine only.
func BenchmarkQueryFilteredScan(b *testing.B) {
	const n, dim = 100_000, 128
	r := rand.New(rand.NewPCG(3, 4))
	ops := benchOps(r, n, dim, 1, 0)
	for i := range ops {
		ops[i].Metadata["bucket"] = float64(r.IntN(100))
	}
	// The server's row cache: an index plan reads its hits' rows through it.
	e := newEnv(b, envConfig{maxRecords: n, batchRecords: 5000, maxBlock: 4096, minBlock: 1024,
		seg: segment.Config{RowCacheBytes: segment.DefaultRowCacheBytes}})
	// A cheap graph to build: the scans do not walk it.
	c, err := e.cat.CreateCollectionSpec(e.ctx, catalog.CollectionSpec{Name: "scan", Index: catalog.IndexSettings{Distance: vindex.DistanceL2, M: 8, EfConstruction: 32}})
	if err != nil {
		b.Fatal(err)
	}
	e.id = c.ID
	pushAll(b, e, ops)
	e.compactAll()
	qs := [][]float32{benchOps(r, 1, dim, 1, 0)[0].Embedding}
	query := func(b *testing.B, where string, exact bool) QueryResult {
		res, err := e.comp.QueryRecords(e.ctx, e.id, Query{Embeddings: qs, K: 10, Where: mustWhere(b, where), Exact: exact, NoEmbeddings: true})
		if err != nil {
			b.Fatal(err)
		}
		if len(res.Hits[0]) != 10 {
			b.Fatalf("%d hits", len(res.Hits[0]))
		}
		return res
	}
	query(b, `{"bucket": {"$lt": 1}}`, false) // reads the metadata
	for _, pct := range []int{1, 10} {
		where := fmt.Sprintf(`{"bucket": {"$lt": %d}}`, pct)
		b.Run(fmt.Sprintf("%d%%/memory", pct), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if !query(b, where, false).Exact {
					b.Fatal("the index was searched")
				}
			}
		})
		b.Run(fmt.Sprintf("%d%%/blocks", pct), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				query(b, where, true)
			}
		})
		b.Run(fmt.Sprintf("%d%%/filter", pct), func(b *testing.B) {
			idx, err := storedIndexes{e.comp}.Index(e.ctx, e.coll(), e.currentManifest())
			if err != nil {
				b.Fatal(err)
			}
			v := idx.(*versionIndex)
			if err := v.loadMetadata(e.ctx); err != nil {
				b.Fatal(err)
			}
			f := mustWhere(b, where)
			b.ReportAllocs()
			for b.Loop() {
				hits, err := v.ScanWhere(qs, 10, f, map[string]bool{})
				if err != nil || len(hits[0]) != 10 {
					b.Fatal(len(hits), err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/id")
		})
	}
	b.Run("50%/walk", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if query(b, `{"bucket": {"$lt": 50}}`, false).Exact {
				b.Fatal("the index was not searched")
			}
		}
	})
}

// BenchmarkQueryGraph: one unfiltered QueryRecords (k 10, the collection's
// ef_search, no embeddings returned) answered by a graph search, over
// 20,000 compacted records of 128 dimensions (cosine, default index
// parameters) with an empty log tail: the whole cost of a query of a
// compacted collection in process (tail read, manifest, pin, walk, hit
// rows), without the RPC. Setup is not timed. Compare runs on one machine
// only.
func BenchmarkQueryGraph(b *testing.B) {
	const n, dim = 20_000, 128
	r := rand.New(rand.NewPCG(5, 6))
	ops := benchOps(r, n, dim, 1, 0)
	e := newEnv(b, envConfig{maxRecords: n, batchRecords: 5000, maxBlock: 4096, minBlock: 1024,
		seg: segment.Config{RowCacheBytes: segment.DefaultRowCacheBytes}})
	pushAll(b, e, ops)
	e.compactAll()
	qs := make([][]float32, 64)
	for i := range qs {
		qs[i] = benchOps(r, 1, dim, 1, 0)[0].Embedding
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		res, err := e.comp.QueryRecords(e.ctx, e.id, Query{Embeddings: qs[i%len(qs) : i%len(qs)+1], K: 10, NoEmbeddings: true})
		if err != nil {
			b.Fatal(err)
		}
		if res.Exact || len(res.Hits[0]) != 10 {
			b.Fatalf("exact %v, %d hits", res.Exact, len(res.Hits[0]))
		}
		i++
	}
}

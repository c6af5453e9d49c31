package segment

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/compactorhq/compactor/internal/materialize"
	"github.com/compactorhq/compactor/internal/sampletest"
)

// The data sets of the block benchmarks (and of the format tests):
//   - debian64: the bundled real sample, 5,000 records with 64-dim
//     embeddings (sparse, few distinct values per record);
//   - anchor128: 128-dim embeddings with 256 distinct values (8-bit
//     quantised), documents and metadata as BenchmarkCompactFull's: like
//     the op records of the DuckDB comparison;
//   - random128: 128-dim embeddings of uniform random float32s (nothing
//     repeats: the worst case for compression, like dense model output).
var benchSets = []string{"debian64", "anchor128", "random128"}

// benchRecords returns the records of a data set, sorted by id, in blocks
// of at most 4096 records as a Writer would cut them (near-equal parts).
func benchRecords(tb testing.TB, set string) []materialize.Record {
	tb.Helper()
	switch set {
	case "debian64":
		return debianRecords(tb)
	case "anchor128":
		return syntheticRecords(4096, 128, true)
	case "random128":
		return syntheticRecords(4096, 128, false)
	}
	tb.Fatalf("unknown data set %q", set)
	return nil
}

// debianRecords returns the 5,000 records of the Debian sample (every op
// is an ADD of a distinct id), sorted by id.
func debianRecords(tb testing.TB) []materialize.Record {
	tb.Helper()
	ops := sampletest.Base(tb)
	recs := make([]materialize.Record, len(ops))
	for i, op := range ops {
		recs[i] = materialize.Record{ID: op.ID, Embedding: op.Embedding, Document: op.Document, Metadata: op.Metadata}
	}
	slices.SortFunc(recs, func(a, b materialize.Record) int { return strings.Compare(a.ID, b.ID) })
	return recs
}

// syntheticRecords returns n records with dim-dimensional embeddings,
// quantised to 256 values in [-1, 1) or uniform float32s in [-1, 1), a
// short document and three metadata keys (fixed seed).
func syntheticRecords(n, dim int, quantised bool) []materialize.Record {
	r := rand.New(rand.NewPCG(1, 2))
	recs := make([]materialize.Record, n)
	for i := range recs {
		e := make([]float32, dim)
		for j := range e {
			if quantised {
				e[j] = float32(r.IntN(256))/128 - 1
			} else {
				e[j] = r.Float32()*2 - 1
			}
		}
		d := fmt.Sprintf("record number %d of the benchmark", i)
		recs[i] = materialize.Record{ID: fmt.Sprintf("id-%09d", i), Embedding: e, Document: &d,
			Metadata: materialize.Metadata{"section": "bench", "n": float64(i), "even": i%2 == 0}}
	}
	return recs
}

// benchBlocks cuts recs into near-equal blocks of at most 4096 records.
func benchBlocks(recs []materialize.Record) [][]materialize.Record {
	return splitEven(recs, 4096)
}

// BenchmarkEncodeBlock encodes each data set's blocks; reports records/s
// and the block bytes per record.
func BenchmarkEncodeBlock(b *testing.B) {
	for _, set := range benchSets {
		b.Run(set, func(b *testing.B) {
			blocks := benchBlocks(benchRecords(b, set))
			var records, size int
			for b.Loop() {
				size = 0
				for _, blk := range blocks {
					data, err := encodeBlock(blk)
					if err != nil {
						b.Fatal(err)
					}
					records += len(blk)
					size += len(data)
				}
			}
			b.ReportMetric(float64(records)/b.Elapsed().Seconds(), "records/s")
			b.ReportMetric(float64(size)/float64(records/b.N), "bytes/record")
		})
	}
}

// BenchmarkDecodeBlock decodes each data set's blocks, by decodeBlock
// ("direct": from the column pages) and by parquet-go's row
// reconstruction ("rows", decodeBlock's fallback), side by side in one
// run; reports records/s.
func BenchmarkDecodeBlock(b *testing.B) {
	for _, set := range benchSets {
		var encoded [][]byte
		var n int
		for _, blk := range benchBlocks(benchRecords(b, set)) {
			data, err := encodeBlock(blk)
			if err != nil {
				b.Fatal(err)
			}
			encoded = append(encoded, data)
			n += len(blk)
		}
		for _, path := range []struct {
			name   string
			decode func([]byte, int64) ([]materialize.Record, error)
		}{{"direct", decodeBlock}, {"rows", decodeBlockRows}} {
			b.Run(set+"/"+path.name, func(b *testing.B) {
				for b.Loop() {
					for _, data := range encoded {
						if _, err := path.decode(data, -1); err != nil {
							b.Fatal(err)
						}
					}
				}
				b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "records/s")
			})
		}
	}
}

package vindex

import (
	"math/rand/v2"
	"testing"
)

// The benchmarks use a 20,000 × 128 Gaussian mixture (200 centres), M 16,
// ef_construction 200: figures for comparing changes on one machine, not
// verdicts (scripts/bench/vindex.sh measures against hnswlib). Beside the
// wall time each reports cpu-ns/op, the process's CPU time (user + system,
// every goroutine and the GC) per operation: on a loaded machine it moves
// far less than the wall time, so benchstat comparisons use it.
const benchN, benchDim = 20_000, 128

// measureCPU starts the CPU clock of a benchmark; call the function it
// returns after the b.Loop loop to report cpu-ns/op.
func measureCPU(b *testing.B) func() {
	start := processCPU()
	return func() {
		if end := processCPU(); start >= 0 && end >= 0 && b.N > 0 {
			b.ReportMetric(float64(end-start)/float64(b.N), "cpu-ns/op")
		}
	}
}

func benchData() ([]string, [][]float32, [][]float32) {
	rng := rand.New(rand.NewPCG(1, 1))
	vecs := gaussianMixture(rng, benchN+1000, benchDim, 200)
	ids := make([]string, benchN)
	for i := range ids {
		ids[i] = idOf(i)
	}
	return ids, vecs[:benchN], vecs[benchN:]
}

// BenchmarkInsert reports the cost of one insert into a graph of benchN
// vectors (a successor of it, as a compaction does).
func BenchmarkInsert(b *testing.B) {
	ids, vecs, extra := benchData()
	g := build(b, Params{Dim: benchDim, Distance: DistanceL2}, vecs, 2)
	s := g.Successor()
	done := measureCPU(b)
	for i := 0; b.Loop(); i++ {
		if i%len(extra) == 0 && i > 0 {
			s = g.Successor()
		}
		if err := s.Insert(ids[i%len(ids)], extra[i%len(extra)]); err != nil {
			b.Fatal(err)
		}
	}
	done()
}

// BenchmarkBuild reports building a graph of benchN vectors on 1 and 2
// goroutines.
func BenchmarkBuild(b *testing.B) {
	_, vecs, _ := benchData()
	for _, threads := range []int{1, 2} {
		b.Run(map[int]string{1: "threads=1", 2: "threads=2"}[threads], func(b *testing.B) {
			done := measureCPU(b)
			for b.Loop() {
				build(b, Params{Dim: benchDim, Distance: DistanceL2}, vecs[:5000], threads)
			}
			done()
		})
	}
}

// BenchmarkSearch reports one k=10 query at ef 10, 50 and 100 (one
// goroutine), unfiltered and with a 10 % filter.
func BenchmarkSearch(b *testing.B) {
	_, vecs, queries := benchData()
	g := build(b, Params{Dim: benchDim, Distance: DistanceL2}, vecs, 2)
	allow := func(id string) bool { return id[len(id)-1] == '7' }
	for _, c := range []struct {
		name  string
		ef    int
		allow func(string) bool
	}{{"ef=10", 10, nil}, {"ef=50", 50, nil}, {"ef=100", 100, nil}, {"ef=100/filter=10%", 100, allow}} {
		b.Run(c.name, func(b *testing.B) {
			done := measureCPU(b)
			for i := 0; b.Loop(); i++ {
				if _, err := g.Search(queries[i%len(queries)], 10, c.ef, c.allow); err != nil {
					b.Fatal(err)
				}
			}
			done()
		})
	}
}

// BenchmarkDistance reports the kernels on 128 dimensions.
func BenchmarkDistance(b *testing.B) {
	rng := rand.New(rand.NewPCG(2, 2))
	v := uniform(rng, 2, benchDim)
	for _, d := range []Distance{DistanceL2, DistanceIP} {
		k := d.kernel()
		b.Run(d.String(), func(b *testing.B) {
			var s float32
			done := measureCPU(b)
			for b.Loop() {
				s += k(v[0], v[1])
			}
			done()
			_ = s
		})
	}
}

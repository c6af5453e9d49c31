package vindex

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
)

// BenchmarkSearchLarge measures single-goroutine k=10 searches of a graph
// too large for the processor's caches, where a search is bound by memory
// reads rather than by the distance kernels. It runs only when
// VINDEX_BENCH_LARGE names the number of vectors (e.g. 1000000: a
// 128-dim Gaussian mixture of 1,000 centres, l2, M 16, ef_construction
// VINDEX_BENCH_EFC, default 64); the graph is built once and kept encoded
// under VINDEX_BENCH_DIR (default the temporary directory), about 0.6 GB
// at 1,000,000. Each case runs on the graph decoded with its vector
// chunks on huge pages and without, and with the search's prefetches on
// and off, so one run compares them side by side.
func BenchmarkSearchLarge(b *testing.B) {
	n, _ := strconv.Atoi(os.Getenv("VINDEX_BENCH_LARGE"))
	if n <= 0 {
		b.Skip("VINDEX_BENCH_LARGE is not set")
	}
	efc := 64
	if v, err := strconv.Atoi(os.Getenv("VINDEX_BENCH_EFC")); err == nil && v > 0 {
		efc = v
	}
	graphs, queries := largeGraphs(b, n, efc)
	for _, ef := range []int{10, 40, 100} {
		for _, v := range []struct {
			name     string
			huge     bool
			prefetch bool
		}{{"small-pages", false, false}, {"huge-pages", true, false}, {"small-pages+prefetch", false, true}, {"huge-pages+prefetch", true, true}} {
			b.Run(fmt.Sprintf("ef=%d/%s", ef, v.name), func(b *testing.B) {
				g := graphs[v.huge]
				prefetchOn = v.prefetch
				defer func() { prefetchOn = true }()
				done := measureCPU(b)
				for i := 0; b.Loop(); i++ {
					if _, err := g.Search(queries[i%len(queries)], 10, ef, nil); err != nil {
						b.Fatal(err)
					}
				}
				done()
			})
		}
	}
}

var large struct {
	sync.Mutex
	key     string
	graphs  map[bool]*Graph
	queries [][]float32
}

// largeGraphs returns the graph of BenchmarkSearchLarge decoded twice
// (vector chunks on huge pages: true; on small ones: false) and 1,000
// queries from the same mixture.
func largeGraphs(b *testing.B, n, efc int) (map[bool]*Graph, [][]float32) {
	large.Lock()
	defer large.Unlock()
	key := fmt.Sprintf("n%d-efc%d", n, efc)
	if large.key == key {
		return large.graphs, large.queries
	}
	rng := rand.New(rand.NewPCG(1, 1))
	vecs := gaussianMixture(rng, n+1000, benchDim, 1000)
	queries := vecs[n:]
	dir := os.Getenv("VINDEX_BENCH_DIR")
	if dir == "" {
		dir = os.TempDir()
	}
	path := filepath.Join(dir, "vindex-bench-"+key+".bin")
	blob, err := os.ReadFile(path)
	if err != nil {
		b.Logf("building the %d-vector graph (ef_construction %d) into %s", n, efc, path)
		g := build(b, Params{Dim: benchDim, Distance: DistanceL2, EfConstruction: efc, Seed: 1}, vecs[:n], 2)
		var buf bytes.Buffer
		gb, err := g.Encode(func(_ ChunkRef, chunk []byte) error {
			buf.Write(binary.LittleEndian.AppendUint64(nil, uint64(len(chunk))))
			buf.Write(chunk)
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		blob = append(binary.LittleEndian.AppendUint64(nil, uint64(len(gb))), gb...)
		blob = append(blob, buf.Bytes()...)
		if err := os.WriteFile(path, blob, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	gl := binary.LittleEndian.Uint64(blob)
	gb, rest := blob[8:8+gl], blob[8+gl:]
	var chunks [][]byte
	for len(rest) > 0 {
		l := binary.LittleEndian.Uint64(rest)
		chunks, rest = append(chunks, rest[8:8+l]), rest[8+l:]
	}
	graphs := map[bool]*Graph{}
	for _, huge := range []bool{false, true} {
		hugePagesOn = huge
		g, err := Decode(gb, func(i int, _ ChunkRef) ([]byte, error) { return chunks[i], nil })
		hugePagesOn = true
		if err != nil {
			b.Fatal(err)
		}
		graphs[huge] = g
	}
	large.key, large.graphs, large.queries = key, graphs, queries
	return graphs, queries
}

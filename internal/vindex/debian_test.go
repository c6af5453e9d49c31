package vindex

import (
	"compress/gzip"
	"encoding/binary"
	"io"
	"math"
	"os"
	"testing"
)

// readF32Gz reads testdata's gzipped raw little-endian float32 vectors.
// testdata/debian-base.f32.gz holds the embeddings (64-dim) of the first
// 2,500 records of the shared Debian sample's base load, and
// debian-queries.f32.gz those of the first 200 of its updates: real
// embeddings with few distinct values, so many exact ties and duplicates.
func readF32Gz(t *testing.T, path string, dim int) [][]float32 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(z)
	if err != nil {
		t.Fatal(err)
	}
	out := make([][]float32, len(b)/4/dim)
	for i := range out {
		v := make([]float32, dim)
		for j := range v {
			v[j] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*(i*dim+j):]))
		}
		out[i] = v
	}
	return out
}

func TestDebianEmbeddingsReachRecallWithTies(t *testing.T) {
	base := readF32Gz(t, "testdata/debian-base.f32.gz", 64)
	queries := readF32Gz(t, "testdata/debian-queries.f32.gz", 64)
	if len(base) != 2500 || len(queries) != 200 {
		t.Fatalf("testdata holds %d and %d vectors, want 2500 and 200", len(base), len(queries))
	}
	g := build(t, Params{Dim: 64, Distance: DistanceCosine, EfConstruction: 100, Seed: 1}, base, 1)
	if r := recall(t, g, queries, 10, 100, nil); r < 0.99 {
		t.Errorf("recall@10 at ef 100 on the Debian embeddings = %.4f, want ≥ 0.99", r)
	}
}

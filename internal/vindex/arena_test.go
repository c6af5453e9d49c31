package vindex

import (
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"unsafe"
)

func canMap() bool {
	_, release, ok := mapFloats(1)
	if ok {
		release()
	}
	return ok
}

// waitMapped runs collections until MappedBytes is want (cleanups run on
// their own goroutine after a collection), and fails if it never gets
// there.
func waitMapped(t *testing.T, want int64, when string) {
	t.Helper()
	for range 1000 {
		if MappedBytes() == want {
			return
		}
		runtime.GC()
		runtime.Gosched()
	}
	t.Fatalf("%s: %d bytes of vector chunks mapped, want %d", when, MappedBytes(), want)
}

// A successor shares its base's full vector chunks (the same memory and
// the same owner), copies only the partly filled last one, and keeps
// every shared chunk mapped after its base is gone.
func TestSuccessorSharesVectorChunks(t *testing.T) {
	if !canMap() {
		t.Skip("no mapped chunks on this platform")
	}
	const dim = 16 // a chunk of 4096 × 16 floats: 256 KiB, mapped
	if vecChunk*dim*4 < mapMinBytes {
		t.Fatalf("a chunk of %d bytes would not be mapped (min %d)", vecChunk*dim*4, mapMinBytes)
	}
	waitMapped(t, 0, "before")
	rng := rand.New(rand.NewPCG(41, 42))
	n := 2*vecChunk + 37
	vecs := gaussianMixture(rng, n, dim, 20)
	g := build(t, Params{Dim: dim, Distance: DistanceL2, M: 4, EfConstruction: 8}, vecs, 2)
	chunk := int64(vecChunk * dim * 4)
	if got := MappedBytes(); got != 3*chunk {
		t.Fatalf("a graph of %d vectors maps %d bytes, want 3 chunks of %d", n, got, chunk)
	}
	s := g.Successor()
	if got := MappedBytes(); got != 4*chunk {
		t.Fatalf("with its successor: %d bytes mapped, want 4 chunks (the last one copied)", got)
	}
	for i := range 2 {
		if unsafe.SliceData(s.vecs[i]) != unsafe.SliceData(g.vecs[i]) || s.owner[i] != g.owner[i] || s.owner[i] == nil {
			t.Fatalf("full chunk %d is not shared with the base", i)
		}
	}
	if unsafe.SliceData(s.vecs[2]) == unsafe.SliceData(g.vecs[2]) || s.owner[2] == g.owner[2] {
		t.Fatal("the partly filled last chunk is shared with the base")
	}
	q := gaussianMixture(rng, 5, dim, 20)
	want := make([][]Hit, len(q))
	for i, v := range q {
		var err error
		if want[i], err = s.Search(v, 10, 50, nil); err != nil {
			t.Fatal(err)
		}
	}
	g = nil
	waitMapped(t, 3*chunk, "base dropped") // only the base's copy of the last chunk goes
	if err := s.InsertBatch([]string{"extra"}, [][]float32{q[0]}, 1); err != nil {
		t.Fatal(err)
	}
	for i, v := range q {
		got, err := s.Search(v, 10, 50, func(id string) bool { return id != "extra" })
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want[i]) {
			t.Fatalf("query %d after the base was dropped: %v, want %v", i, got, want[i])
		}
	}
	for _, i := range []int{0, vecChunk + 1, n - 1} {
		if got := s.Vector(idOf(i)); !slices.Equal(got, vecs[i]) {
			t.Fatalf("vector %d after the base was dropped: %v, want %v", i, got, vecs[i])
		}
	}
	s = nil
	waitMapped(t, 0, "successor dropped")
}

// A decoded graph's short last chunk grows into a full one on the next
// insert, and the chunks of every graph are unmapped once it is gone.
func TestDecodedGraphChunks(t *testing.T) {
	if !canMap() {
		t.Skip("no mapped chunks on this platform")
	}
	const dim = 64
	waitMapped(t, 0, "before")
	rng := rand.New(rand.NewPCG(43, 44))
	const n = 1500 // a short chunk of 1500 × 64 floats: 375 KiB, mapped
	vecs := gaussianMixture(rng, n, dim, 5)
	g := build(t, Params{Dim: dim, Distance: DistanceL2, M: 4, EfConstruction: 8}, vecs, 1)
	blob, chunks := g.encodeAll()
	d, err := Decode(blob, func(i int, _ ChunkRef) ([]byte, error) { return chunks[i], nil })
	if err != nil {
		t.Fatal(err)
	}
	full := int64(vecChunk * dim * 4)
	if got, want := MappedBytes(), full+n*dim*4; got != want {
		t.Fatalf("built and decoded: %d bytes mapped, want %d (a full chunk and a short one)", got, want)
	}
	extra := gaussianMixture(rng, 2, dim, 5)
	if err := d.InsertBatch([]string{"x", "y"}, extra, 1); err != nil {
		t.Fatal(err)
	}
	waitMapped(t, 2*full, "decoded graph grown") // the short chunk is unmapped
	runtime.KeepAlive(g)                         // g's full chunk counts until here
	for i, v := range append(vecs[:3:3], extra...) {
		id := idOf(i)
		if i >= 3 {
			id = []string{"x", "y"}[i-3]
		}
		if got := d.Vector(id); !slices.Equal(got, v) {
			t.Fatalf("vector %s after the decoded graph grew: %v, want %v", id, got, v)
		}
	}
	g, d = nil, nil
	waitMapped(t, 0, "graphs dropped")
}

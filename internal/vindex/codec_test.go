package vindex

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"slices"
	"testing"
)

// chunksOf serves blobs to Decode.
func chunksOf(blobs [][]byte) func(int, ChunkRef) ([]byte, error) {
	return func(i int, _ ChunkRef) ([]byte, error) {
		if i >= len(blobs) {
			return nil, fmt.Errorf("no chunk %d", i)
		}
		return blobs[i], nil
	}
}

// twoVersions returns a graph with tombstones and dropped slots encoded
// in two versions: the first version's chunks, then the second's graph
// blob and its full chunk list.
func twoVersions(t testing.TB) (*Graph, []byte, [][]byte) {
	t.Helper()
	rng := rand.New(rand.NewPCG(11, 11))
	vecs := uniform(rng, 300, 6)
	g := build(t, Params{Dim: 6, Distance: DistanceCosine, M: 4, EfConstruction: 20, Seed: 2}, vecs, 1)
	_, chunks := g.encodeAll()
	s := g.Successor()
	for i := range 40 {
		s.Delete(idOf(i))
	}
	s.Repair(1)
	for i := 40; i < 50; i++ {
		s.Delete(idOf(i))
	}
	if err := s.InsertBatch([]string{idOf(60), "new"}, [][]float32{vecs[1], vecs[2]}, 1); err != nil {
		t.Fatal(err)
	}
	blob, more := s.encodeAll()
	if len(more) != 1 {
		t.Fatalf("the successor wrote %d chunks, want 1 (its 2 new vectors)", len(more))
	}
	return s, blob, append(chunks, more...)
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	g, blob, chunks := twoVersions(t)
	if refs := g.Chunks(); len(refs) != 2 || refs[0].First != 0 || refs[0].Count != 300 || refs[1].First != 300 || refs[1].Count != 2 {
		t.Fatalf("Chunks = %+v, want the first version's 300 slots then 2", refs)
	}
	d, err := Decode(blob, chunksOf(chunks))
	if err != nil {
		t.Fatal(err)
	}
	if d.Params() != g.Params() {
		t.Errorf("Params = %+v, want %+v", d.Params(), g.Params())
	}
	want, got := g.Stats(), d.Stats()
	want.Inserted, want.Deleted, want.Repaired = 0, 0, 0
	if got != want {
		t.Errorf("Stats = %+v, want %+v", got, want)
	}
	rng := rand.New(rand.NewPCG(12, 12))
	for _, q := range uniform(rng, 20, 6) {
		a, _ := g.Search(q, 5, 50, nil)
		b, _ := d.Search(q, 5, 50, nil)
		if !slices.Equal(a, b) {
			t.Fatalf("decoded Search = %v, want %v", b, a)
		}
	}
	again, more := d.encodeAll()
	if !bytes.Equal(again, blob) || len(more) != 0 {
		t.Errorf("re-encoding the decoded graph differs (%d new chunks)", len(more))
	}
	// A successor of the decoded graph reuses its chunks.
	s := d.Successor()
	if err := s.Insert("later", q0()); err != nil {
		t.Fatal(err)
	}
	if _, more := s.encodeAll(); len(more) != 1 || len(s.Chunks()) != 3 {
		t.Errorf("successor of a decoded graph: %d new chunks, %d in all; want 1, 3", len(more), len(s.Chunks()))
	}
}

func q0() []float32 { return []float32{1, 0, 0, 0, 0, 0} }

func TestEncodeSplitsLargeBuildsIntoChunks(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 13))
	g := build(t, Params{Dim: 8, Distance: DistanceL2, M: 4, EfConstruction: 8}, uniform(rng, 1500, 8), 1)
	g.chunkBytes = 1024 * 8 * 4 // 1024 vectors a chunk
	blob, chunks := g.encodeAll()
	if refs := g.Chunks(); len(chunks) != 2 || refs[0].Count != 1024 || refs[1].Count != 476 {
		t.Errorf("%d chunks %+v, want 1024 + 476 slots", len(chunks), refs)
	}
	if _, err := Decode(blob, chunksOf(chunks)); err != nil {
		t.Error(err)
	}
}

func TestDecodeRefusesCorruptBytes(t *testing.T) {
	_, blob, chunks := twoVersions(t)
	check := func(name string, b []byte, cs [][]byte) {
		t.Helper()
		if _, err := Decode(b, chunksOf(cs)); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: Decode = %v, want ErrCorrupt", name, err)
		}
	}
	for n := 0; n < len(blob); n += 1 + n/16 {
		check(fmt.Sprintf("graph cut at %d", n), blob[:n], chunks)
	}
	for _, at := range []int{0, 5, 30, 60, 100, len(blob) / 2, len(blob) - 1} {
		b := slices.Clone(blob)
		b[at] ^= 0x10
		check(fmt.Sprintf("graph byte %d flipped", at), b, chunks)
	}
	for _, at := range []int{0, 10, 30, len(chunks[1]) - 1} {
		cs := [][]byte{chunks[0], slices.Clone(chunks[1])}
		cs[1][at] ^= 1
		check(fmt.Sprintf("chunk byte %d flipped", at), blob, cs)
	}
	check("chunks swapped", blob, [][]byte{chunks[1], chunks[0]})
	check("chunk cut", blob, [][]byte{chunks[0], chunks[1][:len(chunks[1])-5]})
	// A header that claims 2^32-1 slots with a valid checksum is refused
	// before anything is allocated for them.
	b := slices.Clone(blob)
	binary.LittleEndian.PutUint32(b[32:], 0xffffffff)
	binary.LittleEndian.PutUint32(b[52:], crc32.Checksum(b[:52], castagnoli()))
	check("huge slot count", b, chunks)
	// So is an unknown version.
	b = slices.Clone(blob)
	binary.LittleEndian.PutUint16(b[4:], 2)
	binary.LittleEndian.PutUint32(b[52:], crc32.Checksum(b[:52], castagnoli()))
	check("version 2", b, chunks)
	// A chunk reader's own error is returned as it is.
	boom := errors.New("blob gone")
	if _, err := Decode(blob, func(int, ChunkRef) ([]byte, error) { return nil, boom }); !errors.Is(err, boom) {
		t.Errorf("Decode with a failing chunk reader = %v, want it wrapped", err)
	}
}

// FuzzDecode feeds Decode a graph blob and chunk bytes, cut into chunks of
// the sizes the graph's references ask for. Decode must return a graph or
// an error wrapping ErrCorrupt, never panic; a graph it returns must
// search and encode.
func FuzzDecode(f *testing.F) {
	_, blob, chunks := twoVersions(f)
	f.Add(blob, bytes.Join(chunks, nil))
	empty, _ := New(Params{Dim: 3})
	eb, _ := empty.encodeAll()
	f.Add(eb, []byte{})
	small := build(f, Params{Dim: 2, Distance: DistanceL2, M: 2, EfConstruction: 4}, [][]float32{{0, 0}, {1, 0}, {0, 1}, {1, 1}}, 1)
	small.Delete(idOf(2))
	sb, sc := small.encodeAll()
	f.Add(sb, bytes.Join(sc, nil))
	f.Fuzz(func(t *testing.T, graph, chunkBytes []byte) {
		g, err := Decode(graph, func(i int, ref ChunkRef) ([]byte, error) {
			size := chunkHeaderSize + 4 + ref.Count*4*int(binary.LittleEndian.Uint32(graph[8:]))
			size = min(size, len(chunkBytes))
			b := chunkBytes[:size]
			chunkBytes = chunkBytes[size:]
			return b, nil
		})
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Decode error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		q := make([]float32, g.Params().Dim)
		if _, err := g.Search(q, 3, 10, nil); err != nil {
			t.Fatal(err)
		}
		g.encodeAll()
	})
}

func TestEncodeForgetsTheChunksOfAFailedCall(t *testing.T) {
	g := build(t, Params{Dim: 4, Distance: DistanceL2}, [][]float32{{1, 2, 3, 4}, {4, 3, 2, 1}}, 1)
	boom := errors.New("store down")
	if _, err := g.Encode(func(ChunkRef, []byte) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("Encode with a failing put = %v, want it wrapped", err)
	}
	if n := len(g.Chunks()); n != 0 {
		t.Fatalf("%d chunks recorded after a failed Encode", n)
	}
	blob, chunks := g.encodeAll()
	if len(chunks) != 1 {
		t.Fatalf("the retry wrote %d chunks, want 1", len(chunks))
	}
	if _, err := Decode(blob, chunksOf(chunks)); err != nil {
		t.Fatal(err)
	}
}

func TestEncodeSizesTheGraphBlobExactly(t *testing.T) {
	g, blob, _ := twoVersions(t)
	if again := g.encodeGraph(); cap(again) != len(again) || !bytes.Equal(again, blob) {
		t.Errorf("graph blob of %d bytes in a buffer of %d", len(again), cap(again))
	}
}

// testdata/format-v1 holds twoVersions as the encoder of the first
// release wrote it (graph blob and its two vector chunks). It must keep
// decoding to the same graph: the same counts, every live id found at
// distance 0 by its own vector, and a re-encode to the same bytes.
func TestDecodeReadsFormatVersion1(t *testing.T) {
	blob, err := os.ReadFile("testdata/format-v1/graph.bin")
	if err != nil {
		t.Fatal(err)
	}
	var chunks [][]byte
	for i := range 2 {
		c, err := os.ReadFile(fmt.Sprintf("testdata/format-v1/chunk-%d.bin", i))
		if err != nil {
			t.Fatal(err)
		}
		chunks = append(chunks, c)
	}
	d, err := Decode(blob, chunksOf(chunks))
	if err != nil {
		t.Fatal(err)
	}
	want, _, _ := twoVersions(t)
	if got, w := d.Stats(), want.Stats(); got.Vectors != w.Vectors || got.Tombstones != w.Tombstones || got.Dropped != w.Dropped || got.Slots != w.Slots {
		t.Errorf("decoded Stats %+v, want %+v", got, w)
	}
	for n, st := range d.state {
		if st != stateLive {
			continue
		}
		id := d.ids[n]
		hits, err := d.Search(d.Vector(id), 1, 50, func(h string) bool { return h == id })
		if err != nil {
			t.Fatal(err)
		}
		if len(hits) != 1 || hits[0].ID != id || hits[0].Distance > 1e-6 {
			t.Errorf("a search for %s by its own vector found %+v", id, hits)
		}
	}
	again, more := d.encodeAll()
	if len(more) != 0 || !bytes.Equal(again, blob) {
		t.Errorf("re-encoding the decoded graph wrote %d new chunks and a graph blob equal to the stored one: %v", len(more), bytes.Equal(again, blob))
	}
}

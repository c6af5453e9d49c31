package vindex

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The interop tests separate graph quality from search when the graph is
// compared with hnswlib (scripts/bench/vindex.sh): they read a vector set
// of scripts/bench/vecgen and the ground truth hnswlib_bench.py wrote
// (VINDEX_INTEROP_DIR, kind mixture unless VINDEX_INTEROP_KIND), and
//
//   - TestInteropSearchHnswlibGraph loads an index hnswlib saved
//     (hnswlib_bench.py --save FILE; VINDEX_INTEROP_HNSWLIB=FILE) into a
//     Graph and searches it with this package's search;
//   - TestInteropExportGraph builds this package's graph (seed
//     VINDEX_INTEROP_SEED, one goroutine unless VINDEX_INTEROP_THREADS)
//     and saves it in hnswlib's format (VINDEX_INTEROP_EXPORT=FILE), for
//     hnswlib's load_index and search.
//
// Both print recall@10 per ef of VINDEX_INTEROP_EFS (default 10,20,40,100)
// and the graph's structure: levels, layer-0 degree distribution.

type interopSet struct {
	dim   int
	dist  Distance
	base  [][]float32
	query [][]float32
	gtD   [][]float32 // per query, the exact distances of its 10 nearest
}

func readInteropSet(t *testing.T) (*interopSet, []int) {
	dir := os.Getenv("VINDEX_INTEROP_DIR")
	if dir == "" {
		t.Skip("VINDEX_INTEROP_DIR is not set")
	}
	kind := os.Getenv("VINDEX_INTEROP_KIND")
	if kind == "" {
		kind = "mixture"
	}
	var meta struct {
		Dim      int    `json:"dim"`
		Distance string `json:"distance"`
	}
	b, err := os.ReadFile(filepath.Join(dir, kind+".json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &meta); err != nil {
		t.Fatal(err)
	}
	d, err := ParseDistance(meta.Distance)
	if err != nil {
		t.Fatal(err)
	}
	set := &interopSet{dim: meta.Dim, dist: d}
	set.base = readF32(t, filepath.Join(dir, kind+".base.f32"), meta.Dim)
	set.query = readF32(t, filepath.Join(dir, kind+".query.f32"), meta.Dim)
	set.gtD = readF32(t, filepath.Join(dir, kind+".gt.f32"), 10)
	efs := []int{10, 20, 40, 100}
	if v := os.Getenv("VINDEX_INTEROP_EFS"); v != "" {
		efs = nil
		for _, s := range strings.Split(v, ",") {
			ef, err := strconv.Atoi(s)
			if err != nil {
				t.Fatal(err)
			}
			efs = append(efs, ef)
		}
	}
	return set, efs
}

func readF32(t *testing.T, path string, dim int) [][]float32 {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := len(b) / 4 / dim
	out := make([][]float32, n)
	for i := range out {
		out[i] = make([]float32, dim)
		for j := range dim {
			out[i][j] = math.Float32frombits(binary.LittleEndian.Uint32(b[(i*dim+j)*4:]))
		}
	}
	return out
}

// recallAt is the bench's recall@10: a hit counts when its exact distance
// (float64) is at most the 10th exact distance plus 1e-6 relative.
func (set *interopSet) recallAt(t *testing.T, g *Graph, ef int) float64 {
	r, _ := set.recallHist(t, g, ef)
	return r
}

// recallHist is recallAt and the number of queries by their own number of
// right hits (0..10).
func (set *interopSet) recallHist(t *testing.T, g *Graph, ef int) (float64, [11]int) {
	right := 0
	var hist [11]int
	for i, q := range set.query {
		before := right
		hits, err := g.Search(q, 10, ef, nil)
		if err != nil {
			t.Fatal(err)
		}
		bound := float64(set.gtD[i][9])
		for _, h := range hits {
			x, _ := strconv.Atoi(h.ID)
			var s float64
			for j := range q {
				d := float64(q[j]) - float64(set.base[x][j])
				s += d * d
			}
			if s <= bound+1e-6*math.Max(1, math.Abs(bound)) {
				right++
			}
		}
		hist[right-before]++
	}
	return float64(right) / float64(10*len(set.query)), hist
}

// graphShape describes a graph: its levels and layer-0 degrees.
func graphShape(g *Graph) string {
	n := len(g.ids)
	perLevel := make([]int, g.maxLevel+1)
	hist := make([]int, g.m0+1)
	indeg := make([]int, n)
	sum := 0
	for x := range int32(n) {
		perLevel[g.level[x]]++
		ls := g.links(x, 0)
		hist[ls[0]]++
		sum += int(ls[0])
		for _, m := range ls[1 : 1+ls[0]] {
			indeg[m]++
		}
	}
	noIn := 0
	for _, d := range indeg {
		if d == 0 {
			noIn++
		}
	}
	var upSum, upNodes int
	for x := range int32(n) {
		if g.level[x] >= 1 {
			ls := g.links(x, 1)
			upSum += int(ls[0])
			upNodes++
		}
	}
	return fmt.Sprintf("maxLevel %d, nodes per level %v, entry %d (level %d); layer 0: mean degree %.3f, full (%d) %.4f, ≤M %.4f, ≤2 %d, no in-link %d; layer 1 mean degree %.3f",
		g.maxLevel, perLevel, g.entry, g.level[g.entry], float64(sum)/float64(n), g.m0, float64(hist[g.m0])/float64(n),
		float64(cumulative(hist, g.p.M))/float64(n), cumulative(hist, 2), noIn, float64(upSum)/float64(max(upNodes, 1)))
}

func cumulative(hist []int, upto int) int {
	s := 0
	for i := 0; i <= upto && i < len(hist); i++ {
		s += hist[i]
	}
	return s
}

func TestInteropSearchHnswlibGraph(t *testing.T) {
	path := os.Getenv("VINDEX_INTEROP_HNSWLIB")
	if path == "" {
		t.Skip("VINDEX_INTEROP_HNSWLIB is not set")
	}
	set, efs := readInteropSet(t)
	g := loadHnswlib(t, path, set)
	t.Logf("hnswlib graph: %s", graphShape(g))
	for _, ef := range efs {
		r, h := set.recallHist(t, g, ef)
		t.Logf("hnswlib graph, this search: ef %d recall %.4f, queries by right hits 0..10 %v", ef, r, h)
	}
}

func TestInteropExportGraph(t *testing.T) {
	path := os.Getenv("VINDEX_INTEROP_EXPORT")
	if path == "" {
		t.Skip("VINDEX_INTEROP_EXPORT is not set")
	}
	set, efs := readInteropSet(t)
	seed, _ := strconv.ParseUint(os.Getenv("VINDEX_INTEROP_SEED"), 10, 64)
	threads, _ := strconv.Atoi(os.Getenv("VINDEX_INTEROP_THREADS"))
	g, err := New(Params{Dim: set.dim, Distance: set.dist, M: 16, EfConstruction: 200, Seed: seed})
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, len(set.base))
	for i := range ids {
		ids[i] = strconv.Itoa(i)
	}
	if err := g.InsertBatch(ids, set.base, max(threads, 1)); err != nil {
		t.Fatal(err)
	}
	t.Logf("this graph (seed %d): %s", seed, graphShape(g))
	for _, ef := range efs {
		r, h := set.recallHist(t, g, ef)
		t.Logf("this graph, this search: ef %d recall %.4f, queries by right hits 0..10 %v", ef, r, h)
	}
	saveHnswlib(t, g, path)
}

// hnswlib's saveIndex (hnswalg.h): a header of size_t fields (offsetLevel0,
// maxElements, curElementCount, sizeDataPerElement, labelOffset,
// offsetData), int maxlevel, uint32 entry, size_t maxM, maxM0, M, double
// mult, size_t efConstruction; then per element its layer-0 block (uint32
// count, maxM0 uint32 links, the vector, a size_t label); then per element
// a uint32 byte size of its upper lists and the lists (uint32 count, maxM
// links, per level).
func loadHnswlib(t *testing.T, path string, set *interopSet) *Graph {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<20)
	u64 := func() uint64 {
		var v uint64
		if err := binary.Read(r, binary.LittleEndian, &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	u32 := func() uint32 {
		var v uint32
		if err := binary.Read(r, binary.LittleEndian, &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	offL0, _, count, sizePer, labelOff, offData := u64(), u64(), u64(), u64(), u64(), u64()
	maxLevel := int32(u32())
	entry := u32()
	maxM, maxM0, m := u64(), u64(), u64()
	_ = u64() // mult
	efc := u64()
	if offL0 != 0 || offData != 4+4*maxM0 {
		t.Fatalf("unexpected layout: offsetLevel0 %d offsetData %d maxM0 %d", offL0, offData, maxM0)
	}
	g, err := New(Params{Dim: set.dim, Distance: set.dist, M: int(m), EfConstruction: int(efc)})
	if err != nil {
		t.Fatal(err)
	}
	if maxM != m || maxM0 != uint64(g.m0) {
		t.Fatalf("maxM %d maxM0 %d for M %d", maxM, maxM0, m)
	}
	n := int(count)
	block := make([]byte, sizePer)
	labels := make([]uint64, n)
	l0 := make([][]uint32, n)
	vecs := make([][]float32, n)
	for i := range n {
		if _, err := io.ReadFull(r, block); err != nil {
			t.Fatal(err)
		}
		cnt := binary.LittleEndian.Uint32(block) & 0xffff
		ls := make([]uint32, cnt)
		for j := range ls {
			ls[j] = binary.LittleEndian.Uint32(block[4+4*j:])
		}
		l0[i] = ls
		v := make([]float32, set.dim)
		for j := range v {
			v[j] = math.Float32frombits(binary.LittleEndian.Uint32(block[int(offData)+4*j:]))
		}
		vecs[i] = v
		labels[i] = binary.LittleEndian.Uint64(block[labelOff:])
	}
	// Internal id i becomes slot i, its id the label.
	for i := range n {
		g.appendNode(strconv.FormatUint(labels[i], 10), vecs[i])
	}
	for i := range n {
		ls := g.linksW(int32(i), 0)
		ls[0] = int32(len(l0[i]))
		for j, x := range l0[i] {
			ls[1+j] = int32(x)
		}
	}
	per := 4 * (int(maxM) + 1)
	for i := range n {
		size := int(u32())
		lvl := size / per
		g.level[i] = uint8(lvl)
		g.upper[i] = nil
		if lvl == 0 {
			continue
		}
		buf := make([]byte, size)
		if _, err := io.ReadFull(r, buf); err != nil {
			t.Fatal(err)
		}
		up := make([]int32, lvl*(int(m)+1))
		for j := range up {
			up[j] = int32(binary.LittleEndian.Uint32(buf[4*j:]))
		}
		for l := range lvl {
			up[l*(int(m)+1)] &= 0xffff
		}
		g.upper[i] = up
	}
	g.entry, g.maxLevel = int32(entry), int(maxLevel)
	// hnswlib's labels are the record indexes: check the vectors agree.
	for i := range n {
		x, _ := strconv.Atoi(g.ids[i])
		for j := range set.dim {
			if vecs[i][j] != set.base[x][j] {
				t.Fatalf("slot %d (label %d) holds another vector", i, x)
			}
		}
	}
	return g
}

func saveHnswlib(t *testing.T, g *Graph, path string) {
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	le := binary.LittleEndian
	n := len(g.ids)
	m, m0, dim := g.p.M, g.m0, g.p.Dim
	offData := 4 + 4*m0
	labelOff := offData + 4*dim
	sizePer := labelOff + 8
	put := func(v any) {
		if err := binary.Write(w, le, v); err != nil {
			t.Fatal(err)
		}
	}
	put(uint64(0))
	put(uint64(n))
	put(uint64(n))
	put(uint64(sizePer))
	put(uint64(labelOff))
	put(uint64(offData))
	put(int32(g.maxLevel))
	put(uint32(g.entry))
	put(uint64(m))
	put(uint64(m0))
	put(uint64(m))
	put(g.ml)
	put(uint64(g.p.EfConstruction))
	block := make([]byte, sizePer)
	for i := range int32(n) {
		clear(block)
		ls := g.links(i, 0)
		le.PutUint32(block, uint32(ls[0]))
		for j, x := range ls[1 : 1+ls[0]] {
			le.PutUint32(block[4+4*j:], uint32(x))
		}
		for j, x := range g.vec(i) {
			le.PutUint32(block[offData+4*j:], math.Float32bits(x))
		}
		label, _ := strconv.ParseUint(g.ids[i], 10, 64)
		le.PutUint64(block[labelOff:], label)
		if _, err := w.Write(block); err != nil {
			t.Fatal(err)
		}
	}
	for i := range int32(n) {
		lvl := int(g.level[i])
		put(uint32(lvl * 4 * (m + 1)))
		for l := 1; l <= lvl; l++ {
			for _, x := range g.links(i, l) {
				put(uint32(x))
			}
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

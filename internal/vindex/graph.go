package vindex

import (
	"cmp"
	"errors"
	"fmt"
	"iter"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// The defaults of Params. M and EfConstruction are hnswlib's own defaults
// (M 16, ef_construction 200): the anchor the index is measured against,
// and on 128-dim data they reach recall@10 ≥ 0.95 at ef ≤ 100. Chroma uses
// ef_construction 100, which builds about twice as fast for a few points of
// recall; 200 is chosen because a build at compaction is paid once per
// vector while queries pay recall forever. EfSearch is 100 (Chroma's
// search_ef; hnswlib's 10 is too low for k = 10 to reach 0.95 on hard data).
const (
	DefaultM              = 16
	DefaultEfConstruction = 200
	DefaultEfSearch       = 100
)

// Bounds of Params.
const (
	MaxDim = 65536
	MaxM   = 127 // layer 0 holds 2M ≤ 254 neighbours, so a count fits a byte
	MaxEf  = 1 << 16
)

// The maintenance thresholds. A graph repairs its tombstones (re-links
// their neighbours around them, then drops them from the graph) when they
// are more than RepairFraction of the nodes in the graph: below it, a
// tombstone costs a search only a visit, above it searches walk through
// many dead nodes and the links they hold are wasted degree. Dropped nodes
// still hold their vector's slot in the (shared, append-only) vector
// chunks; when tombstones and dropped slots together pass RebuildFraction
// of all slots, NeedsRebuild says a full rebuild pays for itself (it
// reclaims the space and gives a graph as good as a fresh one).
const (
	RepairFraction  = 0.10
	RebuildFraction = 0.30
)

// Errors of the package. Each is wrapped with a message naming the field
// or the place.
var (
	// ErrInvalidParams: a Params field is out of range.
	ErrInvalidParams = errors.New("invalid index parameters")
	// ErrDimension: a vector or query has the wrong number of dimensions.
	ErrDimension = errors.New("wrong vector dimension")
	// ErrInvalidVector: a vector holds NaN or an infinity.
	ErrInvalidVector = errors.New("invalid vector")
)

// Params are a graph's parameters, fixed for its life: a change of any of
// them needs a rebuild (see Compatible).
type Params struct {
	Dim            int      // vector dimensions, 1..MaxDim
	Distance       Distance // DistanceUnspecified means DefaultDistance
	M              int      // neighbours per node on layers above 0 (2M on layer 0); 0 means DefaultM; 2..MaxM
	EfConstruction int      // candidate list size when inserting; 0 means DefaultEfConstruction; ≥ M
	EfSearch       int      // candidate list size of a Search called with ef ≤ 0; 0 means DefaultEfSearch
	Seed           uint64   // seed of the level generator: same seed, same inserts, same levels
}

// withDefaults returns p with its zero fields set to the defaults, or an
// error wrapping ErrInvalidParams naming the field out of range.
func (p Params) withDefaults() (Params, error) {
	if p.Distance == DistanceUnspecified {
		p.Distance = DefaultDistance
	}
	if p.M == 0 {
		p.M = DefaultM
	}
	if p.EfConstruction == 0 {
		p.EfConstruction = DefaultEfConstruction
	}
	if p.EfSearch == 0 {
		p.EfSearch = DefaultEfSearch
	}
	switch {
	case p.Dim < 1 || p.Dim > MaxDim:
		return p, fmt.Errorf("%w: dim %d (want 1..%d)", ErrInvalidParams, p.Dim, MaxDim)
	case p.Distance > DistanceIP:
		return p, fmt.Errorf("%w: distance %d", ErrInvalidParams, p.Distance)
	case p.M < 2 || p.M > MaxM:
		return p, fmt.Errorf("%w: m %d (want 2..%d)", ErrInvalidParams, p.M, MaxM)
	case p.EfConstruction < p.M || p.EfConstruction > MaxEf:
		return p, fmt.Errorf("%w: ef_construction %d (want m=%d..%d)", ErrInvalidParams, p.EfConstruction, p.M, MaxEf)
	case p.EfSearch < 1 || p.EfSearch > MaxEf:
		return p, fmt.Errorf("%w: ef_search %d (want 1..%d)", ErrInvalidParams, p.EfSearch, MaxEf)
	}
	return p, nil
}

// Hit is one search result: a record id and its distance to the query.
type Hit struct {
	ID       string
	Distance float32
}

// Stats are a graph's counters.
type Stats struct {
	Vectors    int // live vectors (searchable ids)
	Tombstones int // deleted or replaced nodes still linked in the graph (navigation only)
	Dropped    int // nodes repaired out of the graph whose vector slots are not reclaimed yet
	Slots      int // all node slots: Vectors + Tombstones + Dropped
	Inserted   int // vectors inserted into this graph since New, Decode or Successor
	Deleted    int // ids deleted or replaced since New, Decode or Successor
	Repaired   int // tombstones repaired out of this graph since New, Decode or Successor
}

// Node states.
const (
	stateLive    uint8 = 0
	stateDeleted uint8 = 1 // tombstone: linked, navigates, never a result
	stateDropped uint8 = 2 // repaired out: no node links to it
)

// Storage geometry: vectors in chunks of vecChunk nodes, layer-0 links in
// pages of pageNodes nodes. A successor shares the full chunks and every
// page it does not write with its parent, and copies a page on its first
// write to it. A page of 128 nodes at M 16 is 16,896 bytes, which the
// allocator gives 18,432 (8 % over); 256 nodes were 33,792 bytes, a large
// object rounded up to 40,960 (21 % over), and a coarser unit of copying.
const (
	vecChunkShift = 12
	vecChunk      = 1 << vecChunkShift
	pageShift     = 7
	pageNodes     = 1 << pageShift
	maxLevel      = 31
)

type page struct {
	owner *int    // the token of the graph that may write it
	links []int32 // pageNodes × (m0+1): a count, then the neighbours
}

// Graph is an HNSW graph (Malkov & Yashunin) over record ids and their
// vectors. Search, Scan, Len, Stats and Encode may run concurrently with
// each other; Insert, InsertBatch, Delete and Repair need the graph to
// themselves (they parallelise inside). A graph that has a successor must
// not be changed any more (its successor shares its storage); searching it
// stays safe.
type Graph struct {
	p    Params
	m0   int
	ml   float64
	dist func(a, b []float32) float32
	// within, when not nil, is dist stopping early above a bound (l2).
	within func(a, b []float32, bound float32) float32
	token  *int // owner of the pages this graph may write

	ids   []string
	state []uint8
	level []uint8
	byID  idMap // live slot of each live id

	vecs  [][]float32            // vecChunk × Dim floats each
	owner []*mapping             // per chunk: what keeps vecs[i] mapped (nil: a heap chunk); see arena.go
	pages []atomic.Pointer[page] // layer 0
	upper [][]int32              // per node: level × (M+1) for layers 1..level (nil at level 0)

	entry    int32 // -1 when the graph holds no node
	maxLevel int

	tombstones, dropped         int
	inserted, deleted, repaired int

	// normBy is the kernel (kernelID) that normalised every stored vector
	// of a cosine graph, kernelUnknown when they came from a graph blob
	// that does not say or from a mix of kernels (see BetweenDistances).
	normBy uint8
	// prenormal, during Rebuild's InsertBatch only: the vectors inserted
	// are stored ones, normalised already, and are stored as they are.
	prenormal bool

	chunks     []ChunkRef // vector chunks already encoded (see Encode)
	chunkBytes int        // a chunk's payload cap; 0: chunkMaxBytes (tests set less)

	// Only during an insert batch: the global lock (entry point and top
	// level) and per-node and per-page locks.
	building bool
	mu       sync.Mutex
	locks    []sync.Mutex
	pageMu   []sync.Mutex

	pool sync.Pool // *searcher
}

// New returns an empty graph with the parameters p (zero fields take the
// defaults), or an error wrapping ErrInvalidParams naming the bad field.
func New(p Params) (*Graph, error) {
	p, err := p.withDefaults()
	if err != nil {
		return nil, err
	}
	return newGraph(p), nil
}

func newGraph(p Params) *Graph {
	var within func(a, b []float32, bound float32) float32
	if p.Distance == DistanceL2 {
		within = l2Within
	}
	return &Graph{
		within: within,
		p:      p,
		m0:     2 * p.M,
		ml:     1 / math.Log(float64(p.M)),
		dist:   p.Distance.kernel(),
		token:  new(int),
		byID:   newIDMap(),
		entry:  -1,
		normBy: kernelID(),
	}
}

// Params returns the graph's parameters with the defaults filled in.
func (g *Graph) Params() Params { return g.p }

// Compatible reports whether a graph with parameters p would be built as
// this one (same dimension, distance, M, ef_construction and seed): when
// it is not, the caller rebuilds instead of taking a Successor.
// EfSearch is a query default and does not count.
func (g *Graph) Compatible(p Params) bool {
	p, err := p.withDefaults()
	if err != nil {
		return false
	}
	q := g.p
	return p.Dim == q.Dim && p.Distance == q.Distance && p.M == q.M && p.EfConstruction == q.EfConstruction && p.Seed == q.Seed
}

// Len returns the number of live vectors (ids a search can return).
func (g *Graph) Len() int { return g.byID.len() }

// Tombstones returns the number of tombstones still linked in the graph.
func (g *Graph) Tombstones() int { return g.tombstones }

// Stats returns the graph's counters.
func (g *Graph) Stats() Stats {
	return Stats{
		Vectors: g.byID.len(), Tombstones: g.tombstones, Dropped: g.dropped, Slots: len(g.ids),
		Inserted: g.inserted, Deleted: g.deleted, Repaired: g.repaired,
	}
}

// NeedsRepair reports whether the tombstones are more than RepairFraction
// of the nodes in the graph.
func (g *Graph) NeedsRepair() bool {
	inGraph := len(g.ids) - g.dropped
	return g.tombstones > 0 && float64(g.tombstones) > RepairFraction*float64(inGraph)
}

// NeedsRebuild reports whether tombstones and dropped slots together are
// more than RebuildFraction of all slots: a full rebuild from the live
// vectors then pays for itself.
func (g *Graph) NeedsRebuild() bool {
	return len(g.ids) > 0 && float64(g.tombstones+g.dropped) > RebuildFraction*float64(len(g.ids))
}

// BetweenDistances reports whether the distances Search, Scan and ScanIDs
// return are, bit for bit, Params.Distance.Between(q, v) of the query q
// and the vector v inserted for the hit, so that a caller can rank them
// with distances it computes itself without reading v again. For l2 and
// ip it always holds: the graph stores v as inserted and computes the
// distance with the kernel Between uses, in the same order (the
// early-stopping l2 kernel agrees to the bit whenever it runs to the end,
// and a distance it cut short is never a result). For cosine the graph
// stores v normalised, as Between normalises it; the norm is a sum the
// kernel rounds its own way, so it holds when this process's kernel
// normalised every stored vector: a graph built or rebuilt here, or
// decoded from a blob that the same kernel wrote (the graph header keeps
// the kernel's code), and their successors in this process. A graph
// blob written before the header kept it, or by the other kernel, does
// not qualify until its next full build.
func (g *Graph) BetweenDistances() bool {
	return g.p.Distance != DistanceCosine || (g.normBy != kernelUnknown && g.normBy == kernelID())
}

// Contains reports whether id is live in the graph.
func (g *Graph) Contains(id string) bool { _, ok := g.byID.get(id, g.ids); return ok }

// Vector returns a copy of id's vector as stored (normalised to unit
// length for cosine), or nil when id is not live.
func (g *Graph) Vector(id string) []float32 {
	n, ok := g.byID.get(id, g.ids)
	if !ok {
		return nil
	}
	v := slices.Clone(g.vec(n))
	runtime.KeepAlive(g) // the copy read g's chunk
	return v
}

// Successor returns a copy-on-write successor of g: a graph with the same
// contents that shares g's vector chunks and layer-0 pages, copying a page
// only when it first writes to it, so that changing k vectors costs work in
// proportion to k (plus a copy of the per-node metadata: ids, states,
// levels and the upper layers, about 1/M of the links; the id map is
// shared, the successor keeping its changes beside it). g
// stays searchable by its readers and must not be changed any more. The
// successor's counters Inserted, Deleted and Repaired start at zero.
func (g *Graph) Successor() *Graph {
	s := newGraph(g.p)
	s.ids = slices.Clone(g.ids)
	s.state = slices.Clone(g.state)
	s.level = slices.Clone(g.level)
	s.byID = g.byID.successor(s.ids)
	s.vecs = slices.Clone(g.vecs)
	s.owner = slices.Clone(g.owner)
	if n := len(g.ids); n%vecChunk != 0 {
		// The last chunk is partly filled: the successor appends into a
		// copy of it, so that two successors of g never share a write.
		last := len(s.vecs) - 1
		s.vecs[last], s.owner[last] = newChunk(vecChunk * g.p.Dim)
		s.vecs[last] = append(s.vecs[last], g.vecs[last]...)
	}
	s.pages = make([]atomic.Pointer[page], len(g.pages))
	for i := range g.pages {
		s.pages[i].Store(g.pages[i].Load())
	}
	var total int
	for _, u := range g.upper {
		total += len(u)
	}
	arena := make([]int32, 0, total)
	s.upper = make([][]int32, len(g.upper))
	for i, u := range g.upper {
		if u != nil {
			arena = append(arena, u...)
			s.upper[i] = arena[len(arena)-len(u) : len(arena) : len(arena)]
		}
	}
	s.entry, s.maxLevel = g.entry, g.maxLevel
	s.tombstones, s.dropped = g.tombstones, g.dropped
	s.chunks = slices.Clone(g.chunks)
	if g.normBy != s.normBy {
		s.normBy = kernelUnknown // the parent's vectors were normalised elsewhere
	}
	runtime.KeepAlive(g)
	return s
}

// vec returns node n's stored vector.
func (g *Graph) vec(n int32) []float32 {
	off := int(n&(vecChunk-1)) * g.p.Dim
	return g.vecs[n>>vecChunkShift][off : off+g.p.Dim : off+g.p.Dim]
}

// links returns node n's list on level l: a count, then the neighbours
// (room for m0 on layer 0, M above). Read only.
func (g *Graph) links(n int32, l int) []int32 {
	if l == 0 {
		pg := g.pages[n>>pageShift].Load()
		off := int(n&(pageNodes-1)) * (g.m0 + 1)
		return pg.links[off : off+g.m0+1 : off+g.m0+1]
	}
	off := (l - 1) * (g.p.M + 1)
	return g.upper[n][off : off+g.p.M+1 : off+g.p.M+1]
}

// linksW is links for writing: it copies node n's layer-0 page first when
// the page is shared with a parent. The caller holds n's lock while
// building.
func (g *Graph) linksW(n int32, l int) []int32 {
	if l == 0 {
		pi := n >> pageShift
		if pg := g.pages[pi].Load(); pg.owner != g.token {
			if g.building {
				g.pageMu[pi].Lock()
			}
			if pg = g.pages[pi].Load(); pg.owner != g.token {
				g.pages[pi].Store(&page{owner: g.token, links: slices.Clone(pg.links)})
			}
			if g.building {
				g.pageMu[pi].Unlock()
			}
		}
	}
	return g.links(n, l)
}

// neighbours returns node n's neighbours on level l: while building, a
// copy in s.nbuf taken under n's lock; otherwise the graph's own list, read
// only, which must never become s.nbuf (the next build would copy lists
// into it, overwriting a node's list without that node's lock).
func (g *Graph) neighbours(n int32, l int, s *searcher) []int32 {
	if g.building {
		g.locks[n].Lock()
		ls := g.links(n, l)
		s.nbuf = append(s.nbuf[:0], ls[1:1+ls[0]]...)
		g.locks[n].Unlock()
		return s.nbuf
	}
	ls := g.links(n, l)
	return ls[1 : 1+ls[0] : 1+ls[0]]
}

// levelFor draws node slot's level from the seed: floor(-ln(u) · mL) with
// u uniform in (0, 1] from a SplitMix64 of the seed and the slot, so the
// levels do not depend on the order concurrent inserts run in.
func (g *Graph) levelFor(slot int) int {
	z := g.p.Seed + uint64(slot+1)*0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	z ^= z >> 31
	u := (float64(z>>11) + 1) / (1 << 53)
	l := int(-math.Log(u) * g.ml)
	return min(l, maxLevel)
}

// check validates a vector's dimension and values; what names it in the
// error (called only for an error).
func (g *Graph) check(vec []float32, what func() string) error {
	if len(vec) != g.p.Dim {
		return fmt.Errorf("%w: %s has %d dimensions, the index %d", ErrDimension, what(), len(vec), g.p.Dim)
	}
	for i, x := range vec {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return fmt.Errorf("%w: %s[%d] is %v", ErrInvalidVector, what(), i, x)
		}
	}
	return nil
}

// internIDs returns ids as substrings of one new string holding them back
// to back: the graph keeps its ids for its life, and one allocation per
// batch instead of one per id (a million at 1,000,000 vectors, often
// substrings of the larger records they were read with) is what the
// garbage collector then marks on every cycle.
func internIDs(ids []string) []string {
	size := 0
	for _, id := range ids {
		size += len(id)
	}
	var b strings.Builder
	b.Grow(size)
	for _, id := range ids {
		b.WriteString(id)
	}
	all := b.String()
	out := make([]string, len(ids))
	at := 0
	for i, id := range ids {
		out[i] = all[at : at+len(id)]
		at += len(id)
	}
	return out
}

// Insert inserts id with vector vec (Dim floats; copied), replacing id's
// previous vector if it has one (the old node becomes a tombstone). Errors:
// ErrDimension, ErrInvalidVector.
func (g *Graph) Insert(id string, vec []float32) error {
	return g.InsertBatch([]string{id}, [][]float32{vec}, 1)
}

// InsertBatch inserts ids[i] with vecs[i] for every i as Insert does, on
// threads goroutines (at least 1) with per-node locks, as hnswlib's
// addPoint. An id given twice keeps its last vector. Nothing is inserted
// when a vector is invalid (the error names its index).
func (g *Graph) InsertBatch(ids []string, vecs [][]float32, threads int) error {
	defer runtime.KeepAlive(g) // the links read g's chunks (see arena.go)
	if len(ids) != len(vecs) {
		return fmt.Errorf("%w: %d ids and %d vectors", ErrInvalidParams, len(ids), len(vecs))
	}
	for i, v := range vecs {
		if err := g.check(v, func() string { return fmt.Sprintf("vector %d (id %q)", i, ids[i]) }); err != nil {
			return err
		}
	}
	ids = internIDs(ids)
	last := make(map[string]int, len(ids))
	for i, id := range ids {
		last[id] = i
	}
	first := int32(len(g.ids))
	for i, id := range ids {
		if last[id] != i {
			continue
		}
		if old, ok := g.byID.get(id, g.ids); ok {
			g.state[old] = stateDeleted
			g.tombstones++
			g.deleted++
		}
		g.appendNode(id, vecs[i])
	}
	end := int32(len(g.ids))
	g.inserted += int(end - first)
	if end == first {
		return nil
	}
	g.locks = make([]sync.Mutex, end)
	g.pageMu = make([]sync.Mutex, len(g.pages))
	g.building = true
	threads = max(1, min(threads, int(end-first)))
	if threads == 1 {
		s := g.searcher()
		for n := first; n < end; n++ {
			g.link(n, s)
		}
		g.pool.Put(s)
		g.building, g.locks, g.pageMu = false, nil, nil
		g.linkOrphans()
		g.linkUnreachable()
		return nil
	}
	var next atomic.Int32
	next.Store(first)
	var wg sync.WaitGroup
	for range threads {
		wg.Go(func() {
			s := g.searcher()
			defer g.pool.Put(s)
			for {
				n := next.Add(1) - 1
				if n >= end {
					return
				}
				g.link(n, s)
			}
		})
	}
	wg.Wait()
	g.building, g.locks, g.pageMu = false, nil, nil
	g.linkOrphans()
	g.linkUnreachable()
	return nil
}

// linkOrphans gives every live node that no node links to on layer 0 an
// in-link, and returns how many it linked. Such orphans are unreachable:
// two near-duplicate vectors inserted at the same time by two goroutines
// do not see each other, and later the heuristic keeps only one of them in
// any list (the other is nearer to it than to the list's owner). Each
// orphan is added to the list of its nearest out-neighbour that can take
// it: one with room, or else in place of that list's farthest entry that
// other nodes also link to. The cost is one pass over the layer-0 lists (reads only; it
// writes, and so copies, only the pages of the lists it changes).
func (g *Graph) linkOrphans() int {
	n := len(g.ids)
	indeg := make([]int32, n)
	for x := range n {
		if g.state[x] == stateDropped {
			continue
		}
		ls := g.links(int32(x), 0)
		for _, m := range ls[1 : 1+ls[0]] {
			indeg[m]++
		}
	}
	fixed := 0
	for x := range int32(n) {
		if indeg[x] > 0 || g.state[x] != stateLive || x == g.entry {
			continue
		}
		ls := g.links(x, 0)
		own := ls[1 : 1+ls[0]]
		if len(own) == 0 {
			continue
		}
		// Try its out-neighbours nearest first: the first with room, or
		// with an entry that other nodes also link to, takes it.
		vx := g.vec(x)
		cands := make([]cand, len(own))
		for i, m := range own {
			cands[i] = cand{d: g.dist(vx, g.vec(m)), n: m}
		}
		sortCands(cands)
		linked := false
		for _, c := range cands {
			if linked = g.linkInto(c.n, x, indeg); linked {
				break
			}
		}
		if !linked {
			continue
		}
		indeg[x]++
		fixed++
	}
	return fixed
}

// linkUnreachable makes every live node reachable on layer 0 from the
// entry point, and returns how many it linked. linkOrphans gives each node
// an in-link, but a group of nodes can still link only one another (two
// near-duplicates inserted at once by two goroutines, each the other's
// only in-link): a query never reaches them, whatever its ef. It walks
// layer 0 from the entry point (a breadth-first pass over the lists, tombstones
// included, as searches traverse them), then links each live node the walk
// did not reach into the list of its nearest reachable live node that can
// take it (linkInto, counting in-links from reachable nodes only), found by
// a search of layer 0 from the entry point; every node reachable from the
// linked one becomes reachable with it. A replaced entry may have been the
// only way to some nodes, so the pass repeats, at most four times. Cost:
// O(nodes × m0) per pass, plus a search per unreachable group.
func (g *Graph) linkUnreachable() int {
	if g.entry < 0 {
		return 0
	}
	fixed := 0
	for range 4 {
		reach := g.reachable()
		var lost []int32
		for x := range int32(len(g.ids)) {
			if g.state[x] == stateLive && !reach[x] {
				lost = append(lost, x)
			}
		}
		if len(lost) == 0 {
			return fixed
		}
		indeg := make([]int32, len(g.ids))
		for x := range int32(len(g.ids)) {
			if reach[x] {
				ls := g.links(x, 0)
				for _, m := range ls[1 : 1+ls[0]] {
					indeg[m]++
				}
			}
		}
		s := g.searcher()
		for _, x := range lost {
			if reach[x] {
				continue // reached through a node linked before it
			}
			vx := g.vec(x)
			s.search(g, vx, g.entry, g.dist(vx, g.vec(g.entry)), 0, max(g.p.EfConstruction, g.m0), nil, false)
			s.cands = s.top.sorted(s.cands[:0])
			for _, c := range s.cands {
				if g.state[c.n] != stateLive || !reach[c.n] || !g.linkInto(c.n, x, indeg) {
					continue
				}
				fixed++
				indeg[x]++
				g.markReachable(x, reach)
				break
			}
		}
		g.pool.Put(s)
	}
	return fixed
}

// reachable returns which nodes a walk of layer 0 from the entry point
// reaches.
func (g *Graph) reachable() []bool {
	reach := make([]bool, len(g.ids))
	g.markReachable(g.entry, reach)
	return reach
}

// markReachable marks in reach every node a walk of layer 0 from n reaches
// that is not marked yet, n included.
func (g *Graph) markReachable(n int32, reach []bool) {
	if reach[n] {
		return
	}
	reach[n] = true
	queue := []int32{n}
	for len(queue) > 0 {
		x := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		ls := g.links(x, 0)
		for _, m := range ls[1 : 1+ls[0]] {
			if !reach[m] && g.state[m] != stateDropped {
				reach[m] = true
				queue = append(queue, m)
			}
		}
	}
}

// linkInto adds x to m's layer-0 list: appended when there is room, else
// in place of the entry farthest from m that other nodes also link to.
// It reports false when every entry is some node's only in-link.
func (g *Graph) linkInto(m, x int32, indeg []int32) bool {
	ms := g.links(m, 0)
	cnt := int(ms[0])
	if cnt < g.m0 {
		ms = g.linksW(m, 0)
		ms[1+cnt] = x
		ms[0]++
		return true
	}
	vm := g.vec(m)
	worst, wd := -1, float32(-1)
	for i, o := range ms[1 : 1+cnt] {
		if indeg[o] > 1 {
			if d := g.dist(vm, g.vec(o)); d > wd {
				worst, wd = i, d
			}
		}
	}
	if worst < 0 {
		return false
	}
	ms = g.linksW(m, 0)
	indeg[ms[1+worst]]--
	ms[1+worst] = x
	return true
}

// appendNode adds a live node slot for id with a copy of vec (normalised
// for cosine) and empty lists; it links nothing.
func (g *Graph) appendNode(id string, vec []float32) {
	n := len(g.ids)
	lvl := g.levelFor(n)
	g.ids = append(g.ids, id)
	g.state = append(g.state, stateLive)
	g.level = append(g.level, uint8(lvl))
	g.byID.set(id, int32(n), g.ids)
	if n>>vecChunkShift >= len(g.vecs) {
		f, m := newChunk(vecChunk * g.p.Dim)
		g.vecs, g.owner = append(g.vecs, f), append(g.owner, m)
	}
	c := len(g.vecs) - 1
	if len(g.vecs[c])+g.p.Dim > cap(g.vecs[c]) {
		// A decoded graph's last chunk holds only its vectors: move them
		// to a chunk with room for vecChunk (no successor shares it: a
		// graph with a successor is not changed any more).
		f, m := newChunk(vecChunk * g.p.Dim)
		g.vecs[c], g.owner[c] = append(f, g.vecs[c]...), m
	}
	g.vecs[c] = append(g.vecs[c], vec...)
	if g.p.Distance == DistanceCosine && !g.prenormal {
		normalize(g.vecs[c][len(g.vecs[c])-g.p.Dim:])
	}
	if n>>pageShift >= len(g.pages) {
		g.growPages(n>>pageShift + 1)
	}
	if lvl > 0 {
		g.upper = append(g.upper, make([]int32, lvl*(g.p.M+1)))
	} else {
		g.upper = append(g.upper, nil)
	}
}

func (g *Graph) growPages(n int) {
	pages := make([]atomic.Pointer[page], n, max(n, 2*len(g.pages)))
	for i := range g.pages {
		pages[i].Store(g.pages[i].Load())
	}
	for i := len(g.pages); i < n; i++ {
		pages[i].Store(&page{owner: g.token, links: make([]int32, pageNodes*(g.m0+1))})
	}
	g.pages = pages
}

// link links node n (appended, not yet linked) into the graph: hnswlib's
// addPoint.
func (g *Graph) link(n int32, s *searcher) {
	lvl := int(g.level[n])
	q := g.vec(n)
	g.mu.Lock()
	ep, top := g.entry, g.maxLevel
	if ep < 0 {
		g.entry, g.maxLevel = n, lvl
		g.mu.Unlock()
		return
	}
	if lvl <= top {
		g.mu.Unlock()
	}
	cur, curD := ep, g.dist(q, g.vec(ep))
	for l := top; l > lvl; l-- {
		cur, curD = g.greedy(q, cur, curD, l, s)
	}
	for l := min(lvl, top); l >= 0; l-- {
		s.search(g, q, cur, curD, l, g.p.EfConstruction, nil, false)
		cur, curD = g.connect(n, l, s)
	}
	if lvl > top {
		g.entry, g.maxLevel = n, lvl
		g.mu.Unlock()
	}
}

// greedy walks level l from cur to the nearest node to q it can reach.
func (g *Graph) greedy(q []float32, cur int32, curD float32, l int, s *searcher) (int32, float32) {
	for changed := true; changed; {
		changed = false
		for _, m := range g.neighbours(cur, l, s) {
			if d := g.dist(q, g.vec(m)); d < curD {
				cur, curD, changed = m, d, true
			}
		}
	}
	return cur, curD
}

// connect links new node n on level l to the heuristic's choice of the
// candidates s.search left in s.top, and each of them back to n (shrinking
// their lists with the heuristic when full). It returns the nearest
// candidate, the entry of the next level down.
func (g *Graph) connect(n int32, l int, s *searcher) (int32, float32) {
	s.cands = s.top.sorted(s.cands[:0])
	nearest := s.cands[0]
	s.sel = g.heuristic(s.cands, g.p.M, s.sel[:0])
	maxM := g.p.M
	if l == 0 {
		maxM = g.m0
	}
	if g.building {
		g.locks[n].Lock()
	}
	ls := g.linksW(n, l)
	ls[0] = int32(len(s.sel))
	for i, c := range s.sel {
		ls[1+i] = c.n
	}
	if g.building {
		g.locks[n].Unlock()
	}
	for _, c := range s.sel {
		m := c.n
		if g.building {
			g.locks[m].Lock()
		}
		ls := g.linksW(m, l)
		if cnt := int(ls[0]); cnt < maxM {
			ls[1+cnt] = n
			ls[0]++
		} else {
			// Full: keep the heuristic's choice of its neighbours and n.
			vm := g.vec(m)
			s.shrink = append(s.shrink[:0], cand{d: c.d, n: n})
			for _, o := range ls[1 : 1+cnt] {
				s.shrink = append(s.shrink, cand{d: g.dist(vm, g.vec(o)), n: o})
			}
			sortCands(s.shrink)
			s.sel2 = g.heuristic(s.shrink, maxM, s.sel2[:0])
			ls[0] = int32(len(s.sel2))
			for i, o := range s.sel2 {
				ls[1+i] = o.n
			}
		}
		if g.building {
			g.locks[m].Unlock()
		}
	}
	return nearest.n, nearest.d
}

// heuristic is hnswlib's getNeighborsByHeuristic2: from cands sorted by
// distance, keep a candidate when it is nearer to the base than to every
// candidate kept before it, up to m.
func (g *Graph) heuristic(cands []cand, m int, out []cand) []cand {
	if len(cands) <= m {
		return append(out, cands...)
	}
	for _, c := range cands {
		if len(out) >= m {
			break
		}
		vc := g.vec(c.n)
		good := true
		for _, r := range out {
			if g.dist(vc, g.vec(r.n)) < c.d {
				good = false
				break
			}
		}
		if good {
			out = append(out, c)
		}
	}
	return out
}

// Delete removes id from the results: its node becomes a tombstone that
// still guides searches until Repair drops it. It reports whether id was
// live.
func (g *Graph) Delete(id string) bool {
	n, ok := g.byID.get(id, g.ids)
	if !ok {
		return false
	}
	g.byID.del(id, g.ids)
	g.state[n] = stateDeleted
	g.tombstones++
	g.deleted++
	return true
}

// Search returns the k live vectors nearest to q (Dim floats) found with a
// candidate list of ef (ef ≤ 0: Params.EfSearch; raised to k), sorted by
// distance, ties by id. allow, when not nil, is the filter: it is applied
// during the traversal, as hnswlib's filter is: nodes it refuses still
// guide the search but are never results (so a selective filter widens the
// walk; see ScanCheaper for when a Scan is the better plan). allow is
// called at most once per node visited and must be safe to call from the
// searching goroutine. Errors: ErrDimension, ErrInvalidVector.
func (g *Graph) Search(q []float32, k, ef int, allow func(id string) bool) ([]Hit, error) {
	if err := g.check(q, func() string { return "query" }); err != nil {
		return nil, err
	}
	defer runtime.KeepAlive(g) // the walk reads g's chunks (see arena.go)
	if k <= 0 || g.entry < 0 || g.byID.len() == 0 {
		return nil, nil
	}
	if ef <= 0 {
		ef = g.p.EfSearch
	}
	ef = max(ef, k)
	if g.p.Distance == DistanceCosine {
		q = slices.Clone(q)
		normalize(q)
	}
	s := g.searcher()
	defer g.pool.Put(s)
	cur := g.entry
	curD := g.dist(q, g.vec(cur))
	for l := g.maxLevel; l > 0; l-- {
		cur, curD = g.greedy(q, cur, curD, l, s)
	}
	s.search(g, q, cur, curD, 0, ef, allow, true)
	s.cands = s.top.sorted(s.cands[:0])
	// The k nearest, and those tied with the k-th (ties go by id): not the
	// ef found.
	n := len(s.cands)
	if n > k {
		n = k
		for n < len(s.cands) && s.cands[n].d == s.cands[k-1].d {
			n++
		}
	}
	hits := make([]Hit, n)
	for i, c := range s.cands[:n] {
		hits[i] = Hit{ID: g.ids[c.n], Distance: c.d}
	}
	sortHits(hits)
	if len(hits) > k {
		hits = hits[:k]
	}
	return hits, nil
}

// sortHits sorts by distance, ties by id.
func sortHits(hits []Hit) {
	slices.SortFunc(hits, func(a, b Hit) int {
		if c := cmp.Compare(a.Distance, b.Distance); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
}

// Scan returns the exact k nearest live vectors to q that allow accepts
// (all when allow is nil), sorted by distance, ties by id: a brute-force
// scan, the ground truth of Search and the plan for a selective filter
// (allow is called once per live vector, before its distance). Errors:
// ErrDimension, ErrInvalidVector.
func (g *Graph) Scan(q []float32, k int, allow func(id string) bool) ([]Hit, error) {
	var byID func(int, string) bool
	if allow != nil {
		byID = func(_ int, id string) bool { return allow(id) }
	}
	hits, err := g.ScanBatch([][]float32{q}, k, byID)
	if err != nil {
		return nil, err
	}
	return hits[0], nil
}

// ScanBatch is Scan for several queries in one pass over the vectors: for
// each of qs (Dim floats each) the exact k nearest live vectors that allow
// accepts (all when allow is nil), sorted by distance, ties by id, each
// list as Scan returns it for that query. allow is called once per live
// vector whatever the number of queries, before its distances, from the
// calling goroutine, with the vector's slot (see SlotOf) and id, so that
// a caller can keep what its filter reads in a slice by slot instead of a
// map by id: the exact plan of a filtered query, whose filter costs more
// than a distance. Errors: ErrDimension, ErrInvalidVector naming the query
// (qs[i]).
func (g *Graph) ScanBatch(qs [][]float32, k int, allow func(slot int, id string) bool) ([][]Hit, error) {
	return g.scan(qs, k, func(yield func(int32) bool) {
		for n, st := range g.state {
			if st == stateLive && (allow == nil || allow(n, g.ids[n])) && !yield(int32(n)) {
				return
			}
		}
	})
}

// SlotOf returns the slot of live id: its node's number, 0 ≤ slot <
// Stats().Slots. A node keeps its slot for the graph's life (Insert of an
// id already live gives it a new node, and slot); a graph that is not
// changed keeps every slot. ok false when id is not live.
func (g *Graph) SlotOf(id string) (slot int, ok bool) {
	n, ok := g.byID.get(id, g.ids)
	return int(n), ok
}

// ScanIDs is Scan over the given ids only (ids not live are skipped; an
// id given twice counts once): the exact plan when the caller already
// holds the ids its filter accepts, costing one distance per id.
func (g *Graph) ScanIDs(q []float32, k int, ids []string) ([]Hit, error) {
	hits, err := g.scan([][]float32{q}, k, func(yield func(int32) bool) {
		seen := make(map[int32]struct{}, len(ids))
		for _, id := range ids {
			if n, ok := g.byID.get(id, g.ids); ok {
				if _, dup := seen[n]; !dup {
					seen[n] = struct{}{}
					if !yield(n) {
						return
					}
				}
			}
		}
	})
	if err != nil {
		return nil, err
	}
	return hits[0], nil
}

// scan keeps, per query of qs, the k nearest of nodes by (distance, id).
func (g *Graph) scan(qs [][]float32, k int, nodes iter.Seq[int32]) ([][]Hit, error) {
	for i, q := range qs {
		what := func() string {
			if len(qs) > 1 {
				return fmt.Sprintf("query %d", i)
			}
			return "query"
		}
		if err := g.check(q, what); err != nil {
			return nil, err
		}
	}
	out := make([][]Hit, len(qs))
	defer runtime.KeepAlive(g) // the scan reads g's chunks (see arena.go)
	if k <= 0 {
		return out, nil
	}
	if g.p.Distance == DistanceCosine {
		norm := make([][]float32, len(qs))
		for i, q := range qs {
			norm[i] = slices.Clone(q)
			normalize(norm[i])
		}
		qs = norm
	}
	// Max-heaps of the best k by (distance, id): each root is its worst.
	worse := func(a, b cand) bool {
		return a.d > b.d || (a.d == b.d && g.ids[a.n] > g.ids[b.n])
	}
	heaps := make([][]cand, len(qs))
	for i := range heaps {
		heaps[i] = make([]cand, 0, k+1)
	}
	for n := range nodes {
		v := g.vec(n)
		for i, q := range qs {
			c := cand{d: g.dist(q, v), n: n}
			h := heaps[i]
			if len(h) == k {
				if worse(h[0], c) {
					h[0] = c
					siftDown(h, 0, worse)
				}
				continue
			}
			h = append(h, c)
			for j := len(h) - 1; j > 0; {
				p := (j - 1) / 2
				if !worse(h[j], h[p]) {
					break
				}
				h[j], h[p] = h[p], h[j]
				j = p
			}
			heaps[i] = h
		}
	}
	for i, h := range heaps {
		hits := make([]Hit, len(h))
		for j, c := range h {
			hits[j] = Hit{ID: g.ids[c.n], Distance: c.d}
		}
		sortHits(hits)
		out[i] = hits
	}
	return out, nil
}

func siftDown(h []cand, i int, worse func(a, b cand) bool) {
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		if r := l + 1; r < len(h) && worse(h[r], h[l]) {
			l = r
		}
		if !worse(h[l], h[i]) {
			return
		}
		h[i], h[l] = h[l], h[i]
		i = l
	}
}

// ScanCheaper reports whether a filtered query for k results whose filter
// accepts allowed of the live vectors is cheaper as a ScanIDs over those
// ids than as a Search with candidate list ef (ef ≤ 0: Params.EfSearch).
// A filtered walk of selectivity s = allowed / Len visits about ef / s
// nodes before it holds ef results, computing up to 2M distances at each:
// ef · 2M · Len / allowed; the scan computes allowed. The rule is
// therefore allowed² ≤ max(ef, k) · 2M · Len (at 1M vectors, M 16, ef 100:
// a scan below about 5.7 % selectivity). A walk that selective would also
// lose recall, which the scan never does.
func (g *Graph) ScanCheaper(allowed, k, ef int) bool {
	if ef <= 0 {
		ef = g.p.EfSearch
	}
	return scanCheaper(allowed, g.byID.len(), max(ef, k), g.m0)
}

func scanCheaper(allowed, live, ef, m0 int) bool {
	a := float64(allowed)
	return a*a <= float64(ef)*float64(m0)*float64(live)
}

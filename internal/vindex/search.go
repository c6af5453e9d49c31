package vindex

import (
	"cmp"
	"slices"
	"unsafe"
)

// prefetchOn says whether the graph walk prefetches the vectors and lists
// it is about to read (prefetch_amd64.go); a variable for the benchmarks
// that compare both (BenchmarkSearchLarge).
var prefetchOn = true

// cand is a node and its distance to the node or query at hand.
type cand struct {
	d float32
	n int32
}

func sortCands(cs []cand) {
	slices.SortFunc(cs, func(a, b cand) int {
		if c := cmp.Compare(a.d, b.d); c != 0 {
			return c
		}
		return cmp.Compare(a.n, b.n)
	})
}

// minHeap is a binary heap of candidates, the nearest on top. Its sift
// code compares distances inline: the search's inner loop pushes and pops
// for every candidate, and a heap taking a less function (container/heap,
// or a generic one with a comparator) costs an indirect call per
// comparison there, which the compiler does not inline.
type minHeap []cand

func (h *minHeap) push(c cand) {
	*h = append(*h, c)
	s := *h
	for i := len(s) - 1; i > 0; {
		p := (i - 1) / 2
		if s[p].d <= s[i].d {
			break
		}
		s[i], s[p] = s[p], s[i]
		i = p
	}
}

func (h *minHeap) pop() cand {
	s := *h
	top := s[0]
	last := len(s) - 1
	s[0] = s[last]
	s = s[:last]
	for i := 0; ; {
		l := 2*i + 1
		if l >= len(s) {
			break
		}
		if r := l + 1; r < len(s) && s[r].d < s[l].d {
			l = r
		}
		if s[i].d <= s[l].d {
			break
		}
		s[i], s[l] = s[l], s[i]
		i = l
	}
	*h = s
	return top
}

// maxHeap is a binary heap of candidates, the farthest on top: a minHeap
// of the candidates with their distances negated (which orders them, ties
// and NaNs included, exactly as a mirrored heap would). Read its elements
// through its methods only.
type maxHeap minHeap

func (h *maxHeap) push(c cand) {
	c.d = -c.d
	(*minHeap)(h).push(c)
}

func (h *maxHeap) pop() cand {
	c := (*minHeap)(h).pop()
	c.d = -c.d
	return c
}

// farthest is the distance of the top candidate; h must not be empty.
func (h maxHeap) farthest() float32 { return -h[0].d }

// sorted appends h's candidates to out sorted by distance (ties by node)
// and leaves h as it was.
func (h maxHeap) sorted(out []cand) []cand {
	for _, c := range h {
		out = append(out, cand{d: -c.d, n: c.n})
	}
	sortCands(out)
	return out
}

// searcher holds one goroutine's scratch space: the visited marks (an
// epoch per node slot, so clearing is a counter increment), the heaps and
// buffers. Pooled per graph.
type searcher struct {
	marks  []uint32
	epoch  uint32
	cand   minHeap
	top    maxHeap
	nbuf   []int32
	todo   []int32 // the unvisited neighbours of the node a walk expands
	cands  []cand
	sel    []cand
	sel2   []cand
	shrink []cand
}

func (g *Graph) searcher() *searcher {
	s, _ := g.pool.Get().(*searcher)
	if s == nil {
		s = &searcher{}
	}
	if len(s.marks) < len(g.ids) {
		s.marks = make([]uint32, len(g.ids)+len(g.ids)/8)
		s.epoch = 0
	}
	return s
}

// visit marks n visited in the current epoch and reports whether it was
// not before.
func (s *searcher) visit(n int32) bool {
	if s.marks[n] == s.epoch {
		return false
	}
	s.marks[n] = s.epoch
	return true
}

// search is hnswlib's searchBaseLayer(ST): a best-first walk of level l
// from ep that leaves in s.top the ef nearest nodes to q it found. With
// results set (a query), tombstones and nodes allow refuses guide the walk
// but do not enter s.top, and the walk goes on until s.top holds ef
// nodes or it runs out of candidates; without (an insert), every node
// reached is a candidate neighbour.
func (s *searcher) search(g *Graph, q []float32, ep int32, epD float32, l, ef int, allow func(string) bool, results bool) {
	s.epoch++
	if s.epoch == 0 {
		clear(s.marks)
		s.epoch = 1
	}
	s.cand, s.top = s.cand[:0], s.top[:0]
	filtered := results && (allow != nil || g.tombstones > 0)
	admit := func(n int32) bool {
		if !results {
			return true
		}
		return g.state[n] == stateLive && (allow == nil || allow(g.ids[n]))
	}
	lower := float32(0)
	if admit(ep) {
		s.top.push(cand{d: epD, n: ep})
		lower = epD
	} else {
		lower = float32(maxFloat)
	}
	s.cand.push(cand{d: epD, n: ep})
	s.visit(ep)
	for len(s.cand) > 0 {
		c := s.cand[0]
		if c.d > lower && (len(s.top) == ef || !filtered) {
			break
		}
		s.cand.pop()
		if prefetchOn && l == 0 && len(s.cand) > 0 {
			// The candidate likely expanded next: its list's read overlaps
			// with this expansion's distances.
			ls := g.links(s.cand[0].n, 0)
			prefetch(unsafe.Pointer(unsafe.SliceData(ls)), 4*len(ls))
		}
		// Mark the unvisited neighbours and prefetch their vectors first,
		// then measure them in the same order: their memory reads overlap.
		todo := s.todo[:0]
		for _, m := range g.neighbours(c.n, l, s) {
			if s.visit(m) {
				todo = append(todo, m)
				if prefetchOn {
					prefetch(unsafe.Pointer(unsafe.SliceData(g.vec(m))), 4*g.p.Dim)
				}
			}
		}
		s.todo = todo
		for _, m := range todo {
			var d float32
			if len(s.top) == ef && g.within != nil {
				d = g.within(q, g.vec(m), lower)
			} else {
				d = g.dist(q, g.vec(m))
			}
			if len(s.top) < ef || d < lower {
				s.cand.push(cand{d: d, n: m})
				if admit(m) {
					s.top.push(cand{d: d, n: m})
					if len(s.top) > ef {
						s.top.pop()
					}
				}
				if len(s.top) > 0 {
					lower = s.top.farthest()
				}
			}
		}
	}
}

const maxFloat = 3.4028234663852886e38

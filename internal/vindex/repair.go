package vindex

import (
	"fmt"
	"runtime"
	"sync"
)

// Repair drops every tombstone from the graph on threads goroutines: each
// node that links to a tombstone on some level gets a new list, the
// heuristic's choice among its other neighbours and the live nodes the
// tombstones led to (through up to two tombstones in a row), as hnswlib's
// updatePoint re-links a changed node; then no node links to a tombstone
// and it becomes a dropped slot. A tombstone that was the entry point
// hands that role to the highest remaining node. It returns how many
// tombstones it dropped.
//
// The new lists are all computed from the graph as it was (in parallel,
// reading only), then written, so the result does not depend on threads.
// The cost is one pass over the links to find the nodes to re-link, then
// for each of them about (2M)² distances; it is meant to run when
// NeedsRepair says so, which keeps it amortised to a few re-links per
// deletion.
func (g *Graph) Repair(threads int) int {
	defer runtime.KeepAlive(g) // the re-links read g's chunks (see arena.go)
	if g.tombstones == 0 {
		return 0
	}
	n := int32(len(g.ids))
	type fix struct {
		n     int32
		l     int
		links []int32
	}
	threads = max(1, threads)
	per := (int(n) + threads - 1) / threads
	results := make([][]fix, threads)
	var wg sync.WaitGroup
	for t := range threads {
		lo, hi := int32(t*per), int32(min(int(n), (t+1)*per))
		wg.Go(func() {
			seen := map[int32]struct{}{}
			var cands, sel []cand
			var out []fix
			for x := lo; x < hi; x++ {
				if g.state[x] != stateLive {
					continue // dropped already, or about to be
				}
				for l := 0; l <= int(g.level[x]); l++ {
					ls := g.links(x, l)
					own := ls[1 : 1+ls[0]]
					touched := false
					for _, m := range own {
						if g.state[m] == stateDeleted {
							touched = true
							break
						}
					}
					if !touched {
						continue
					}
					clear(seen)
					seen[x] = struct{}{}
					cands = cands[:0]
					vx := g.vec(x)
					var add func(m int32, depth int)
					add = func(m int32, depth int) {
						if _, ok := seen[m]; ok {
							return
						}
						seen[m] = struct{}{}
						switch g.state[m] {
						case stateLive:
							cands = append(cands, cand{d: g.dist(vx, g.vec(m)), n: m})
						case stateDeleted:
							if depth < 2 && int(g.level[m]) >= l {
								ms := g.links(m, l)
								for _, o := range ms[1 : 1+ms[0]] {
									add(o, depth+1)
								}
							}
						}
					}
					for _, m := range own {
						add(m, 0)
					}
					sortCands(cands)
					maxM := g.p.M
					if l == 0 {
						maxM = g.m0
					}
					sel = g.heuristic(cands, maxM, sel[:0])
					links := make([]int32, len(sel))
					for i, c := range sel {
						links[i] = c.n
					}
					out = append(out, fix{n: x, l: l, links: links})
				}
			}
			results[t] = out
		})
	}
	wg.Wait()
	for _, out := range results {
		for _, f := range out {
			ls := g.linksW(f.n, f.l)
			ls[0] = int32(len(f.links))
			copy(ls[1:], f.links)
		}
	}
	dropped := 0
	for x := range n {
		if g.state[x] != stateDeleted {
			continue
		}
		g.state[x] = stateDropped
		dropped++
		if g.links(x, 0)[0] != 0 {
			g.linksW(x, 0)[0] = 0
		}
		g.level[x], g.upper[x] = 0, nil
	}
	g.tombstones -= dropped
	g.dropped += dropped
	g.repaired += dropped
	if g.entry >= 0 && g.state[g.entry] == stateDropped {
		g.entry, g.maxLevel = -1, 0
		for x := range n {
			if g.state[x] != stateDropped && (g.entry < 0 || int(g.level[x]) > g.maxLevel) {
				g.entry, g.maxLevel = x, int(g.level[x])
			}
		}
	}
	g.linkOrphans()
	g.linkUnreachable()
	return dropped
}

// Rebuild returns a new graph with parameters p (zero fields take the
// defaults; use g.Params() to keep g's) holding g's live vectors, built on
// threads goroutines: the full rebuild that NeedsRebuild or new
// parameters call for. It reclaims every tombstone and dropped slot; its
// vector chunks are all new. p must keep g's dimension and distance (the
// stored vectors are normalised for cosine): else an error wrapping
// ErrInvalidParams. g is only read.
func (g *Graph) Rebuild(p Params, threads int) (*Graph, error) {
	p, err := p.withDefaults()
	if err != nil {
		return nil, err
	}
	if p.Dim != g.p.Dim || p.Distance != g.p.Distance {
		return nil, fmt.Errorf("%w: a rebuild keeps dim %d and distance %v (got %d, %v)", ErrInvalidParams, g.p.Dim, g.p.Distance, p.Dim, p.Distance)
	}
	defer runtime.KeepAlive(g) // vecs below are slices of g's chunks (see arena.go)
	r := newGraph(p)
	ids := make([]string, 0, g.byID.len())
	vecs := make([][]float32, 0, g.byID.len())
	for n, st := range g.state {
		if st == stateLive {
			ids = append(ids, g.ids[n])
			vecs = append(vecs, g.vec(int32(n)))
		}
	}
	// The stored vectors (normalised for cosine) are stored as they are:
	// normalising them again would round them anew.
	r.prenormal, r.normBy = true, g.normBy
	err = r.InsertBatch(ids, vecs, threads)
	r.prenormal = false
	if err != nil {
		return nil, err
	}
	return r, nil
}

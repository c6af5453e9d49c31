package vindex

import (
	"runtime"
	"sync/atomic"
)

// Vector chunks live outside the Go heap where the platform can map
// anonymous memory (arena_mmap.go): they are the bulk of a graph (Dim × 4
// bytes a node against about 2M × 4 of links) and hold no pointers, and
// on the heap they would count toward the collector's goal, so a process
// building a graph of V bytes of vectors would grow to about twice V
// before each collection. Mapped, they cost their own size in RSS, and a
// chunk no graph references is unmapped by the next collection (the
// runtime runs one at least every two minutes) rather than left for the
// scavenger.
//
// Lifetime: a chunk's memory is owned by a *mapping, which every graph
// that stores the chunk keeps in its owners list beside the vector slice
// (a successor shares both with its base). The mapping is unmapped by a
// cleanup (runtime.AddCleanup) once no graph references it. Vector slices
// never leave the graph's methods (Vector returns a copy, searches return
// ids and distances), and every exported method that reads vectors ends
// with runtime.KeepAlive(g), so the graph, and with it every mapping it
// reads, stays reachable until its last read of the memory.

// mapMinBytes is the smallest chunk mapped outside the heap; smaller ones
// (graphs of few dimensions) are plain heap slices. A variable for tests.
var mapMinBytes = 256 << 10

// mappedBytes counts the bytes of vector chunks mapped and not yet
// unmapped (tests and MappedBytes).
var mappedBytes atomic.Int64

// MappedBytes returns the bytes of vector chunks this process holds
// outside the Go heap (in RSS, not in runtime.MemStats): the vectors of
// every live graph, shared chunks counted once.
func MappedBytes() int64 { return mappedBytes.Load() }

// mapping owns one chunk's mapped memory; the memory is unmapped when the
// mapping becomes unreachable.
type mapping struct {
	_ *byte // a pointer field: never a tiny allocation, so its cleanup runs when it dies
	n int
}

// newChunk returns an empty chunk with room for floats float32s and the
// mapping that owns its memory (nil for a heap chunk).
func newChunk(floats int) ([]float32, *mapping) {
	if floats*4 >= mapMinBytes {
		if f, release, ok := mapFloats(floats); ok {
			m := &mapping{n: floats * 4}
			mappedBytes.Add(int64(m.n))
			runtime.AddCleanup(m, func(n int) {
				release()
				mappedBytes.Add(-int64(n))
			}, m.n)
			return f[:0], m
		}
	}
	return make([]float32, 0, floats), nil
}

//go:build amd64 && !purego

package vindex

import "unsafe"

// prefetch asks the processor to bring the cache lines of the n bytes
// from p (n > 0) into all levels of its caches (PREFETCHT0) and returns
// at once. It is a hint:
// it never faults, whatever p is, and changes no result. The graph walk
// issues it for the vectors it is about to measure, so that their
// memory reads overlap instead of each stalling the walk in turn (at
// 1,000,000 × 128 the vectors are 512 MB and nearly every one is a cache
// miss); hnswlib prefetches the same way.
//
//go:noescape
func prefetch(p unsafe.Pointer, n int)

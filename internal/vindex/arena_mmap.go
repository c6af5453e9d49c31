//go:build linux || darwin || freebsd

package vindex

import (
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// hugePageBytes is the size of a transparent huge page (2 MiB on amd64
// and arm64 Linux): a mapping of at least that size starts on such a
// boundary and asks for huge pages (adviseHuge), so that a walk over a
// graph's vectors, one random read per node it measures, misses the TLB
// once per 2 MiB instead of once per 4 KiB. At 1,000,000 × 128 the vectors
// are 512 MB, 256 huge pages against 131,072 small ones.
const hugePageBytes = 2 << 20

// hugePagesOn says whether chunks of at least hugePageBytes are mapped for
// huge pages (a variable for benchmarks that compare both).
var hugePagesOn = true

// mapFloats maps anonymous memory (zeroed) for n float32s and returns it
// with the function that unmaps it; ok false when the mapping fails (the
// caller falls back to the heap).
func mapFloats(n int) (f []float32, release func(), ok bool) {
	page := uintptr(os.Getpagesize())
	size := (uintptr(n)*4 + page - 1) &^ (page - 1)
	huge := hugePagesOn && size >= hugePageBytes
	length := size
	if huge {
		length += hugePageBytes // room to move the start to a huge-page boundary
	}
	p, err := unix.MmapPtr(-1, 0, nil, length, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return nil, nil, false
	}
	if huge {
		head := (hugePageBytes - uintptr(p)%hugePageBytes) % hugePageBytes
		if head > 0 {
			_ = unix.MunmapPtr(p, head)
		}
		if tail := length - head - size; tail > 0 {
			_ = unix.MunmapPtr(unsafe.Add(p, head+size), tail)
		}
		p = unsafe.Add(p, head)
		adviseHuge(unsafe.Slice((*byte)(p), size))
	}
	f = unsafe.Slice((*float32)(p), n)
	return f, func() { _ = unix.MunmapPtr(p, size) }, true
}

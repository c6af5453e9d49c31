//go:build linux || darwin || freebsd

package vindex

import (
	"syscall"
	"unsafe"
)

// mapFloats maps anonymous memory (zeroed) for n float32s and returns it
// with the function that unmaps it; ok false when the mapping fails (the
// caller falls back to the heap).
func mapFloats(n int) (f []float32, release func(), ok bool) {
	b, err := syscall.Mmap(-1, 0, n*4, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return nil, nil, false
	}
	f = unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(b))), n)
	return f, func() { _ = syscall.Munmap(b) }, true
}

//go:build !amd64 || purego

package vindex

import "unsafe"

// prefetch is a no-op without the assembly kernels (prefetch_amd64.go).
func prefetch(unsafe.Pointer, int) {}

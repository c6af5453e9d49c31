//go:build darwin || freebsd

package vindex

// adviseHuge is a no-op where the kernel has no madvise for huge pages.
func adviseHuge([]byte) {}

//go:build !unix

package vindex

// processCPU cannot be read here: the benchmarks report wall time only.
func processCPU() int64 { return -1 }

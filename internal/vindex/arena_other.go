//go:build !(linux || darwin || freebsd)

package vindex

// mapFloats is unavailable here: vector chunks are heap slices.
func mapFloats(int) ([]float32, func(), bool) { return nil, nil, false }

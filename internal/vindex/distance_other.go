//go:build !amd64 || purego

package vindex

// Without assembly kernels (another architecture, or the purego build
// tag) the distances are the pure-Go kernels of distance.go.

// kernelName names the kernel this process runs.
func kernelName() string { return "purego" }

func dot(a, b []float32) float32                     { return dotGeneric(a, b) }
func l2(a, b []float32) float32                      { return l2Generic(a, b) }
func l2Within(a, b []float32, bound float32) float32 { return l2WithinGeneric(a, b, bound) }

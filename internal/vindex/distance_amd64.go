//go:build amd64 && !purego

package vindex

import "golang.org/x/sys/cpu"

// The distance kernels on amd64: AVX2 + FMA assembly (distance_amd64.s)
// when the processor has both, else the pure-Go kernels of distance.go
// (which the purego build tag selects on every platform). The assembly
// kernels compute 8 lanes a step with fused multiply-adds, so their sums
// round differently from the pure-Go ones: both are deterministic (the
// same inputs give the same bits on every processor that runs the same
// kernel), and they agree within the tolerance that
// TestAssemblyKernelsAgreeWithPureGo states. The Go compiler does not
// vectorize, and the kernel is most of the CPU time of a build or a search
// (docs/performance.md has the measurements behind this choice).

// useAVX2 is fixed at start-up from the processor's features.
var useAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasFMA

//go:noescape
func dotAVX2(a, b []float32) float32

//go:noescape
func l2AVX2(a, b []float32) float32

//go:noescape
func l2WithinAVX2(a, b []float32, bound float32) float32

// kernelName names the kernel this process runs: "avx2+fma" or "purego".
func kernelName() string {
	if useAVX2 {
		return "avx2+fma"
	}
	return "purego"
}

// dot is a·b. a and b must have the same length (it panics otherwise).
func dot(a, b []float32) float32 {
	b = b[:len(a)]
	if useAVX2 {
		return dotAVX2(a, b)
	}
	return dotGeneric(a, b)
}

// l2 is the squared Euclidean distance; l2Within agrees with it to the bit
// whenever it runs to the end.
func l2(a, b []float32) float32 {
	b = b[:len(a)]
	if useAVX2 {
		return l2AVX2(a, b)
	}
	return l2Generic(a, b)
}

// l2Within is l2 that may stop early, returning a partial sum above bound,
// once the partial sum (which only grows) exceeds bound: every 64
// dimensions with the assembly kernel, every 32 with the pure-Go one.
func l2Within(a, b []float32, bound float32) float32 {
	b = b[:len(a)]
	if useAVX2 {
		return l2WithinAVX2(a, b, bound)
	}
	return l2WithinGeneric(a, b, bound)
}

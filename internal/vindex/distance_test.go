package vindex

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestParseDistanceNamesEveryDistanceAndRefusesOthers(t *testing.T) {
	for _, d := range []Distance{DistanceL2, DistanceCosine, DistanceIP} {
		got, err := ParseDistance(d.String())
		if err != nil || got != d {
			t.Errorf("ParseDistance(%q) = %v, %v; want %v", d.String(), got, err, d)
		}
	}
	if got, err := ParseDistance(""); err != nil || got != DefaultDistance {
		t.Errorf(`ParseDistance("") = %v, %v; want the default %v`, got, err, DefaultDistance)
	}
	if _, err := ParseDistance("manhattan"); !errors.Is(err, ErrUnknownDistance) {
		t.Errorf(`ParseDistance("manhattan") = %v; want ErrUnknownDistance`, err)
	}
}

func TestBetweenMatchesHnswlibSpaces(t *testing.T) {
	a, b := []float32{1, 2, 2}, []float32{2, 0, 1}
	for _, c := range []struct {
		d    Distance
		want float32
	}{
		{DistanceL2, 1 + 4 + 1},
		{DistanceIP, 1 - 4},
		{DistanceCosine, 1 - 4.0/(3*2.2360680)},
	} {
		if got := c.d.Between(a, b); got-c.want > 1e-5 || c.want-got > 1e-5 {
			t.Errorf("%v.Between = %v, want %v", c.d, got, c.want)
		}
	}
	if got := DistanceCosine.Between(a, []float32{0, 0, 0}); got != 1 {
		t.Errorf("cosine against a zero vector = %v, want 1", got)
	}
}

func TestKernelsAgreeWithBetweenAndStopOnlyAboveTheBound(t *testing.T) {
	for _, dim := range []int{1, 7, 8, 31, 32, 33, 100, 128} {
		a, b := make([]float32, dim), make([]float32, dim)
		for i := range dim {
			a[i], b[i] = float32(i%5)-2, float32(i%3)*0.5
		}
		var want float64
		for i := range dim {
			want += float64(a[i]-b[i]) * float64(a[i]-b[i])
		}
		full := l2(a, b)
		if d := float64(full) - want; d > 1e-3 || d < -1e-3 {
			t.Errorf("dim %d: l2 = %v, want %v", dim, full, want)
		}
		if got := DistanceL2.Between(a, b); got != full {
			t.Errorf("dim %d: Between = %v, l2 = %v", dim, got, full)
		}
		if got := l2Within(a, b, full); got != full {
			t.Errorf("dim %d: l2Within at its own distance = %v, want %v", dim, got, full)
		}
		if full > 0 {
			if got := l2Within(a, b, full/4); got <= full/4 {
				t.Errorf("dim %d: l2Within below the distance = %v, want above %v", dim, got, full/4)
			}
		}
		var ip float64
		for i := range dim {
			ip += float64(a[i]) * float64(b[i])
		}
		if d := float64(dot(a, b)) - ip; d > 1e-3 || d < -1e-3 {
			t.Errorf("dim %d: dot = %v, want %v", dim, dot(a, b), ip)
		}
	}
}

// The assembly kernels (distance_amd64.s) add in another order than the
// pure-Go ones and fuse multiply-adds, so the two agree within a relative
// tolerance, not to the bit: |asm − purego| ≤ 1e-5 · Σ|terms| (the sum of
// the absolute values of the products or squares, which bounds the
// rounding error of either order; float32's epsilon is 1.2e-7, and a
// sum of n terms in a tree of 4-16 partial sums errs by at most about
// log2(n)+n/16 epsilons of Σ|terms|). Each kernel is also deterministic:
// the same call twice gives the same bits, and l2Within run to its end is
// l2 to the bit.
func TestAssemblyKernelsAgreeWithPureGo(t *testing.T) {
	if kernelName() == "purego" {
		t.Skip("this build runs the pure-Go kernels only (purego tag, or no AVX2 + FMA)")
	}
	rng := rand.New(rand.NewPCG(3, 3))
	const tol = 1e-5
	for _, dim := range []int{1, 3, 7, 8, 9, 16, 31, 32, 33, 63, 64, 65, 96, 100, 127, 128, 129, 256, 384, 768, 1536} {
		for trial := range 50 {
			a, b := make([]float32, dim), make([]float32, dim)
			scale := float32(1)
			if trial%5 == 4 {
				scale = 1e3
			}
			for i := range dim {
				a[i], b[i] = float32(rng.NormFloat64())*scale, float32(rng.NormFloat64())
			}
			var absDot, absL2 float64
			for i := range dim {
				absDot += math.Abs(float64(a[i]) * float64(b[i]))
				d := float64(a[i]) - float64(b[i])
				absL2 += d * d
			}
			if got, want := dot(a, b), dotGeneric(a, b); math.Abs(float64(got-want)) > tol*absDot {
				t.Errorf("dim %d: dot = %v, pure Go %v (Σ|a·b| %v)", dim, got, want, absDot)
			}
			if got, want := l2(a, b), l2Generic(a, b); math.Abs(float64(got-want)) > tol*absL2 {
				t.Errorf("dim %d: l2 = %v, pure Go %v", dim, got, want)
			}
			full := l2(a, b)
			if again := l2(a, b); math.Float32bits(again) != math.Float32bits(full) {
				t.Errorf("dim %d: l2 twice = %v, %v", dim, full, again)
			}
			if got := l2Within(a, b, full); math.Float32bits(got) != math.Float32bits(full) {
				t.Errorf("dim %d: l2Within at its own distance = %v, l2 %v", dim, got, full)
			}
			if got := l2Within(a, b, maxFloat); math.Float32bits(got) != math.Float32bits(full) {
				t.Errorf("dim %d: l2Within without a bound = %v, l2 %v", dim, got, full)
			}
			if full > 0 {
				if got := l2Within(a, b, full/4); got <= full/4 {
					t.Errorf("dim %d: l2Within below the distance = %v, want above %v", dim, got, full/4)
				}
			}
		}
	}
}

// A kernel must not read past the slices it is given: vectors that end at
// the end of their backing array, at every length up to 70.
func TestKernelsReadOnlyTheirSlices(t *testing.T) {
	back := make([]float32, 70)
	for i := range back {
		back[i] = float32(i%7) - 3
	}
	for n := 0; n <= 70; n++ {
		a := back[70-n:]
		b := slices.Clone(a)
		for i := range b {
			b[i] += 0.5
		}
		var want float64
		for i := range a {
			want += float64(a[i]) * float64(b[i])
		}
		if got := dot(a, b); math.Abs(float64(got)-want) > 1e-3 {
			t.Errorf("n %d: dot = %v, want %v", n, got, want)
		}
		if got, want := l2(a, b), float32(n)*0.25; got != want {
			t.Errorf("n %d: l2 = %v, want %v", n, got, want)
		}
	}
}

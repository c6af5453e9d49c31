package vindex

import (
	"errors"
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

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

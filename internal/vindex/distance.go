// Package vindex is the vector index of a segment version: a
// nearest-neighbour graph over the live records' embeddings, built at
// compaction, and the distance functions that the index and the exact
// search share.
package vindex

import (
	"errors"
	"fmt"
	"math"
	"strings"
)

// Distance is a collection's distance function, fixed at creation.
type Distance uint8

// The distances. DistanceCosine is the default (Chroma's default is l2;
// the embeddings this store holds are mostly normalised text embeddings,
// for which cosine is what users mean).
const (
	DistanceUnspecified Distance = iota
	DistanceL2                   // squared Euclidean distance: sum((a-b)^2)
	DistanceCosine               // 1 - a·b / (|a| |b|); 1 when either is zero
	DistanceIP                   // inner product as a distance: 1 - a·b (hnswlib's "ip")
)

// DefaultDistance is the distance of a collection created without one.
const DefaultDistance = DistanceCosine

// ErrUnknownDistance is returned by ParseDistance for a name it does not know.
var ErrUnknownDistance = errors.New("unknown distance")

// ParseDistance returns the Distance named s ("l2", "cosine" or "ip",
// case-insensitive; "" is DefaultDistance). Any other name returns an
// error wrapping ErrUnknownDistance that names it.
func ParseDistance(s string) (Distance, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "":
		return DefaultDistance, nil
	case "l2":
		return DistanceL2, nil
	case "cosine":
		return DistanceCosine, nil
	case "ip":
		return DistanceIP, nil
	}
	return DistanceUnspecified, fmt.Errorf("%w %q (want l2, cosine or ip)", ErrUnknownDistance, s)
}

// String returns the distance's name as ParseDistance takes it.
func (d Distance) String() string {
	switch d {
	case DistanceL2:
		return "l2"
	case DistanceCosine:
		return "cosine"
	case DistanceIP:
		return "ip"
	}
	return "unspecified"
}

// Between returns the distance between a and b, which must have the same
// length (it panics otherwise). Smaller is nearer for every distance. The
// values match hnswlib's spaces: l2 is the squared Euclidean distance, ip
// is 1 - a·b, cosine is 1 - a·b/(|a||b|).
func (d Distance) Between(a, b []float32) float32 {
	if len(a) != len(b) {
		panic(fmt.Sprintf("vindex: distance between vectors of %d and %d dimensions", len(a), len(b)))
	}
	switch d {
	case DistanceL2:
		var s float32
		for i := range a {
			x := a[i] - b[i]
			s += x * x
		}
		return s
	case DistanceIP:
		return 1 - dot(a, b)
	default:
		na, nb := dot(a, a), dot(b, b)
		if na == 0 || nb == 0 {
			return 1
		}
		return 1 - dot(a, b)/float32(math.Sqrt(float64(na)*float64(nb)))
	}
}

func dot(a, b []float32) float32 {
	var s float32
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

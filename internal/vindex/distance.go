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
// is 1 - a·b, cosine is 1 - a·b/(|a||b|), computed as hnswlib computes
// it: 1 - â·b̂ of a and b first normalised to unit length (a zero vector
// stays zero: distance 1). Each is computed exactly as a graph computes it
// from its stored vectors (see Graph.BetweenDistances), so that a record
// ranks the same whether a scan or a search found it.
func (d Distance) Between(a, b []float32) float32 {
	if len(a) != len(b) {
		panic(fmt.Sprintf("vindex: distance between vectors of %d and %d dimensions", len(a), len(b)))
	}
	switch d {
	case DistanceL2:
		return l2(a, b)
	case DistanceIP:
		return 1 - dot(a, b)
	default:
		return cosineBetween(a, b)
	}
}

// cosineBetween is 1 - â·b̂ with â and b̂ normalised copies of a and b
// (normalize, as the graph stores and queries them): on the stack up to
// 256 dimensions.
func cosineBetween(a, b []float32) float32 {
	var abuf, bbuf [256]float32
	var an, bn []float32
	if len(a) <= len(abuf) {
		an, bn = abuf[:len(a)], bbuf[:len(b)]
	} else {
		an, bn = make([]float32, len(a)), make([]float32, len(b))
	}
	copy(an, a)
	copy(bn, b)
	normalize(an)
	normalize(bn)
	return ipDistance(an, bn)
}

// Codes of the kernel that normalised a graph's cosine vectors, as the
// graph blob's header keeps them (byte 7): kernelUnknown for a graph
// written before the header said.
const (
	kernelUnknown uint8 = 0
	kernelPureGo  uint8 = 1
	kernelAVX2    uint8 = 2
)

// kernelID is the code of the kernel this process runs.
func kernelID() uint8 {
	if kernelName() == "avx2+fma" {
		return kernelAVX2
	}
	return kernelPureGo
}

// dotGeneric is a·b in pure Go with four accumulators, unrolled by eight:
// the kernel where no assembly one runs (see distance_amd64.go). The
// partial sums are added in a fixed order, so a result depends only on the
// inputs. a and b must have the same length.
func dotGeneric(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+8 <= len(a); i += 8 {
		x, y := a[i:i+8:i+8], b[i:i+8:i+8]
		s0 += x[0]*y[0] + x[4]*y[4]
		s1 += x[1]*y[1] + x[5]*y[5]
		s2 += x[2]*y[2] + x[6]*y[6]
		s3 += x[3]*y[3] + x[7]*y[7]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// l2Generic is the squared Euclidean distance in pure Go:
// l2WithinGeneric without a bound, so the two add in the same order and
// agree to the bit.
func l2Generic(a, b []float32) float32 { return l2WithinGeneric(a, b, maxFloat) }

// l2WithinGeneric is the squared Euclidean distance in pure Go with four
// accumulators, unrolled by eight, that stops early once the partial sum
// (which only grows) exceeds bound, checked every 32 dimensions: it then
// returns the partial sum, a value above bound. The search uses it (as
// l2Within) when only a distance below its current bound matters.
func l2WithinGeneric(a, b []float32, bound float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+8 <= len(a); i += 8 {
		x, y := a[i:i+8:i+8], b[i:i+8:i+8]
		d0, d1, d2, d3 := x[0]-y[0], x[1]-y[1], x[2]-y[2], x[3]-y[3]
		d4, d5, d6, d7 := x[4]-y[4], x[5]-y[5], x[6]-y[6], x[7]-y[7]
		s0 += d0*d0 + d4*d4
		s1 += d1*d1 + d5*d5
		s2 += d2*d2 + d6*d6
		s3 += d3*d3 + d7*d7
		if i&31 == 24 {
			if p := (s0 + s1) + (s2 + s3); p > bound {
				return p
			}
		}
	}
	for ; i < len(a); i++ {
		d := a[i] - b[i]
		s0 += d * d
	}
	return (s0 + s1) + (s2 + s3)
}

// ipDistance is 1 - a·b: the ip distance, and the cosine distance of
// vectors already normalised to unit length (the graph stores cosine
// vectors normalised, as hnswlib does).
func ipDistance(a, b []float32) float32 { return 1 - dot(a, b) }

// kernel returns the distance the graph computes between stored vectors:
// l2 as is, ip and cosine as 1 - a·b (cosine on normalised vectors).
func (d Distance) kernel() func(a, b []float32) float32 {
	if d == DistanceL2 {
		return l2
	}
	return ipDistance
}

// normalize scales v to unit length in place (a zero vector stays zero,
// whose cosine distance to anything is then 1, as Between says).
func normalize(v []float32) {
	n := dot(v, v)
	if n == 0 {
		return
	}
	inv := float32(1 / math.Sqrt(float64(n)))
	for i := range v {
		v[i] *= inv
	}
}

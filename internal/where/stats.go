package where

import (
	"math"
	"sort"
)

// Stats are metadata statistics of a set of records (a block, a version),
// from which Filter.Selectivity estimates the fraction a filter matches,
// so that a query planner can choose between a filtered index search and
// an exact scan of the matching records.
//
// Every figure is a count, so statistics add up (Merge) and subtract
// (Remove): a copy-on-write writer can keep a version's statistics as the
// sum of its blocks', or update them with the records a compaction changes,
// without reading the rest. Per key they hold: the records that have it;
// boolean values exactly; string values exactly up to MaxTrackedStrings
// distinct values per key, the rest as one count; numbers in logarithmic
// buckets (4 per power of two, both signs, and zero), whose boundaries do
// not depend on the data, so that the histograms of two blocks add up.
//
// The zero value is empty and ready to use. Not safe for concurrent use.
type Stats struct {
	// Records is the number of records added (with or without metadata).
	Records int64
	// Keys holds the statistics of each metadata key seen.
	Keys map[string]*KeyStats
}

// MaxTrackedStrings is the most distinct string values counted exactly per
// key; further values are counted together in KeyStats.OtherStrings.
const MaxTrackedStrings = 256

// bucketsPerOctave is the resolution of the number histograms.
const bucketsPerOctave = 4

// KeyStats are the statistics of one metadata key.
type KeyStats struct {
	Present      int64            // records with the key
	True, False  int64            // boolean values
	Strings      map[string]int64 // string values counted exactly
	OtherStrings int64            // string values beyond MaxTrackedStrings distinct ones
	Numbers      int64            // number values
	Buckets      map[int32]int64  // number values by bucket (see bucket)
}

// Add counts a record with metadata md (nil: none).
func (s *Stats) Add(md map[string]any) { s.add(md, 1) }

// Remove uncounts a record added before with the same metadata (a record a
// compaction deletes or replaces).
func (s *Stats) Remove(md map[string]any) { s.add(md, -1) }

func (s *Stats) add(md map[string]any, n int64) {
	s.Records += n
	for k, v := range md {
		ks := s.key(k)
		switch x := v.(type) {
		case bool:
			ks.Present += n
			if x {
				ks.True += n
			} else {
				ks.False += n
			}
		case string:
			ks.Present += n
			if _, tracked := ks.Strings[x]; tracked || len(ks.Strings) < MaxTrackedStrings {
				if ks.Strings == nil {
					ks.Strings = make(map[string]int64)
				}
				ks.Strings[x] += n
				if ks.Strings[x] <= 0 {
					delete(ks.Strings, x)
				}
			} else {
				ks.OtherStrings += n
			}
		case float64:
			ks.Present += n
			ks.Numbers += n
			if ks.Buckets == nil {
				ks.Buckets = make(map[int32]int64)
			}
			b := bucket(x)
			ks.Buckets[b] += n
			if ks.Buckets[b] <= 0 {
				delete(ks.Buckets, b)
			}
		}
	}
}

func (s *Stats) key(k string) *KeyStats {
	if s.Keys == nil {
		s.Keys = make(map[string]*KeyStats)
	}
	ks := s.Keys[k]
	if ks == nil {
		ks = &KeyStats{}
		s.Keys[k] = ks
	}
	return ks
}

// Merge adds the counts of o to s.
func (s *Stats) Merge(o *Stats) {
	if o == nil {
		return
	}
	s.Records += o.Records
	for k, oks := range o.Keys {
		ks := s.key(k)
		ks.Present += oks.Present
		ks.True += oks.True
		ks.False += oks.False
		ks.Numbers += oks.Numbers
		ks.OtherStrings += oks.OtherStrings
		for v, n := range oks.Strings {
			if _, tracked := ks.Strings[v]; tracked || len(ks.Strings) < MaxTrackedStrings {
				if ks.Strings == nil {
					ks.Strings = make(map[string]int64)
				}
				ks.Strings[v] += n
			} else {
				ks.OtherStrings += n
			}
		}
		for b, n := range oks.Buckets {
			if ks.Buckets == nil {
				ks.Buckets = make(map[int32]int64)
			}
			ks.Buckets[b] += n
		}
	}
}

// bucket returns the histogram bucket of x: 0 for zero, and for x ≠ 0 an
// ordinal whose order is the numbers' order (negative numbers have
// negative buckets), bucketsPerOctave per power of two.
func bucket(x float64) int32 {
	if x == 0 || math.IsNaN(x) {
		return 0
	}
	frac, exp := math.Frexp(math.Abs(x)) // frac in [0.5, 1)
	sub := int32((frac - 0.5) * 2 * bucketsPerOctave)
	ord := 1 + (int32(exp)+1100)*bucketsPerOctave + sub
	if x < 0 {
		return -ord
	}
	return ord
}

// Selectivity estimates the fraction (0..1) of the records s describes that
// f matches, treating the conditions of an $and as independent. A filter
// that matches everything is 1; empty statistics give 1 (nothing is
// known, so nothing argues for a scan).
func (f *Filter) Selectivity(s *Stats) float64 {
	if f.MatchAll() || s == nil || s.Records <= 0 {
		return 1
	}
	return clamp(f.root.selectivity(s))
}

func clamp(x float64) float64 { return math.Max(0, math.Min(1, x)) }

func (n *node) selectivity(s *Stats) float64 {
	switch n.kind {
	case kindAnd:
		p := 1.0
		for _, k := range n.kids {
			p *= k.selectivity(s)
		}
		return p
	case kindOr:
		q := 1.0
		for _, k := range n.kids {
			q *= 1 - k.selectivity(s)
		}
		return 1 - q
	}
	ks := s.Keys[n.key]
	total := float64(s.Records)
	switch n.op {
	case Eq:
		return eqCount(ks, n.value) / total
	case Ne:
		return 1 - eqCount(ks, n.value)/total
	case In, Nin:
		c := 0.0
		for _, v := range n.values {
			c += eqCount(ks, v)
		}
		if n.op == In {
			return clamp(c / total)
		}
		return 1 - clamp(c/total)
	}
	if ks == nil || ks.Numbers == 0 {
		return 0
	}
	return rangeCount(ks, n.op, n.value.(float64)) / total
}

// eqCount estimates the records whose value equals v.
func eqCount(ks *KeyStats, v any) float64 {
	if ks == nil {
		return 0
	}
	switch x := v.(type) {
	case bool:
		if x {
			return float64(ks.True)
		}
		return float64(ks.False)
	case string:
		if c, ok := ks.Strings[x]; ok {
			return float64(c)
		}
		if ks.OtherStrings == 0 {
			return 0
		}
		// An untracked value: as frequent as the rarest tracked one at
		// most, and no more than the untracked values altogether.
		least := int64(math.MaxInt64)
		for _, c := range ks.Strings {
			least = min(least, c)
		}
		return float64(min(least, ks.OtherStrings))
	case float64:
		// The bucket's count: an upper bound, as equal numbers share it.
		return float64(ks.Buckets[bucket(x)])
	}
	return 0
}

// rangeCount estimates the records whose number compares with v by op:
// the buckets wholly on the side, and half of v's own bucket.
func rangeCount(ks *KeyStats, op Op, v float64) float64 {
	b := bucket(v)
	keys := make([]int32, 0, len(ks.Buckets))
	for k := range ks.Buckets {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	var c float64
	for _, k := range keys {
		n := float64(ks.Buckets[k])
		switch {
		case k == b:
			if b == 0 { // zero has a bucket of its own: exact
				if op == Gte || op == Lte {
					c += n
				}
				continue
			}
			c += n / 2
		case (op == Gt || op == Gte) && k > b, (op == Lt || op == Lte) && k < b:
			c += n
		}
	}
	return c
}

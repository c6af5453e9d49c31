package where

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
)

func sampleRecords(n int) []map[string]any {
	r := rand.New(rand.NewPCG(3, 4))
	out := make([]map[string]any, n)
	for i := range out {
		md := map[string]any{"size": float64(r.IntN(1000)), "odd": i%2 == 1}
		if i%4 != 0 {
			md["section"] = []string{"games", "net", "doc"}[i%3]
		}
		if i%10 == 0 {
			md["size"] = -float64(r.IntN(50))
		}
		out[i] = md
	}
	return out
}

func TestSelectivityEstimates(t *testing.T) {
	recs := sampleRecords(4000)
	var s Stats
	for _, md := range recs {
		s.Add(md)
	}
	tests := []struct {
		where string
		tol   float64 // absolute error allowed; 0: exact
	}{
		{`{}`, 0},
		{`{"odd": true}`, 0},
		{`{"section": "games"}`, 0},
		{`{"section": {"$ne": "games"}}`, 0},
		{`{"section": {"$in": ["games", "net"]}}`, 0},
		{`{"section": {"$nin": ["games"]}}`, 0},
		{`{"missing": 1}`, 0},
		{`{"missing": {"$ne": 1}}`, 0},
		{`{"size": {"$gt": 500}}`, 0.08},
		{`{"size": {"$lte": 100}}`, 0.08},
		{`{"size": {"$gte": 0}}`, 0.08},
		{`{"size": {"$lt": 0}}`, 0.08},
		{`{"$and": [{"odd": true}, {"section": "net"}]}`, 0.05},
		{`{"$or": [{"odd": true}, {"section": "doc"}]}`, 0.05},
	}
	for _, tt := range tests {
		t.Run(tt.where, func(t *testing.T) {
			f, err := Parse([]byte(tt.where))
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, md := range recs {
				if f.Match(md) {
					n++
				}
			}
			truth := float64(n) / float64(len(recs))
			got := f.Selectivity(&s)
			if math.Abs(got-truth) > tt.tol+1e-12 {
				t.Errorf("Selectivity(%s) = %.4f, true fraction %.4f (tolerance %.2f)", tt.where, got, truth, tt.tol)
			}
		})
	}
}

// Statistics add up and subtract: the sum of two halves is the whole, and
// removing records gives the statistics of the rest.
func TestStatsMergeAndRemove(t *testing.T) {
	recs := sampleRecords(1000)
	var whole, a, b Stats
	for i, md := range recs {
		whole.Add(md)
		if i < 600 {
			a.Add(md)
		} else {
			b.Add(md)
		}
	}
	var sum Stats
	sum.Merge(&a)
	sum.Merge(&b)
	if !reflect.DeepEqual(sum, whole) {
		t.Errorf("merged halves differ from the whole")
	}
	for _, md := range recs[600:] {
		whole.Remove(md)
	}
	// Removing leaves empty maps where the whole had keys of b only: compare
	// by selectivity, which is what the statistics are for.
	for _, w := range []string{`{"odd": false}`, `{"section": "doc"}`, `{"size": {"$gt": 300}}`} {
		f, _ := Parse([]byte(w))
		if got, want := f.Selectivity(&whole), f.Selectivity(&a); got != want {
			t.Errorf("%s: after removal %v, want %v", w, got, want)
		}
	}
	if whole.Records != a.Records {
		t.Errorf("records %d, want %d", whole.Records, a.Records)
	}
}

func TestStringsBeyondTheTrackedOnes(t *testing.T) {
	var s Stats
	for i := range MaxTrackedStrings + 100 {
		s.Add(map[string]any{"k": fmt.Sprint("v", i)})
	}
	ks := s.Keys["k"]
	if len(ks.Strings) != MaxTrackedStrings || ks.OtherStrings != 100 {
		t.Fatalf("tracked %d, other %d", len(ks.Strings), ks.OtherStrings)
	}
	f, _ := Parse([]byte(fmt.Sprintf(`{"k": "v%d"}`, MaxTrackedStrings+50)))
	if got, want := f.Selectivity(&s), 1/float64(s.Records); got != want {
		t.Errorf("an untracked value: %v, want %v (as rare as the rarest tracked)", got, want)
	}
}

func TestBucketOrder(t *testing.T) {
	xs := []float64{-1e300, -1000, -1.5, -1, -0.001, 0, 1e-300, 0.001, 1, 1.1, 1.5, 2, 1000, 1e300}
	for i := 1; i < len(xs); i++ {
		if bucket(xs[i-1]) > bucket(xs[i]) {
			t.Errorf("bucket(%g) = %d > bucket(%g) = %d", xs[i-1], bucket(xs[i-1]), xs[i], bucket(xs[i]))
		}
	}
}

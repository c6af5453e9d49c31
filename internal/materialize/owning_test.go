package materialize

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
)

// ApplyOwning folds like Apply, and never touches base.
func TestApplyOwningMatchesApply(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	randOp := func() OperationRecord {
		o := OperationRecord{Op: Op(1 + r.IntN(4)), ID: "x"}
		if o.Op != OpDelete && (o.Op != OpUpdate || r.IntN(2) == 0) {
			o.Embedding = []float32{r.Float32(), r.Float32()}
		}
		if r.IntN(2) == 0 {
			d := fmt.Sprint(r.IntN(9))
			o.Document = &d
		}
		if r.IntN(2) == 0 {
			o.Metadata = Metadata{}
			for _, k := range []string{"a", "b"} {
				switch r.IntN(3) {
				case 0:
					o.Metadata[k] = nil
				case 1:
					o.Metadata[k] = float64(r.IntN(5))
				}
			}
		}
		return o
	}
	for i := range 2000 {
		var base *Record
		if r.IntN(2) == 0 {
			base = rec("x", 1, "base", Metadata{"a": "s", "c": true})
		}
		ops := make([]OperationRecord, 1+r.IntN(5))
		for j := range ops {
			ops[j] = randOp()
		}
		var before *Record
		if base != nil {
			c := base.Clone()
			before = &c
		}
		want := Apply(base, ops)
		got := ApplyOwning(base, ops)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("case %d: ApplyOwning %s, Apply %s", i, show(got), show(want))
		}
		if !reflect.DeepEqual(base, before) {
			t.Fatalf("case %d: base modified: %s, was %s", i, show(base), show(before))
		}
	}
}

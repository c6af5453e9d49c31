package segment

import (
	"math/rand/v2"
	"reflect"
	"testing"
)

// TestBlockRowsReadTheWantedRowsAsAWholeDecodeDoes: the rows of a sparse
// read (the id column, then only the wanted rows of the others) are those
// of a whole decode, for id sets at the ends, at random and dense, over
// blocks whose embedding column spans one page (debian64) or several
// (random128, 4 pages), of plain floats or of indexes into a dictionary
// (anchor128: quantised floats).
func TestBlockRowsReadTheWantedRowsAsAWholeDecodeDoes(t *testing.T) {
	for _, set := range []string{"debian64", "random128", "anchor128"} {
		t.Run(set, func(t *testing.T) {
			recs := benchRecords(t, set)
			recs = recs[:min(len(recs), 4096)]
			data, err := encodeBlock(recs)
			if err != nil {
				t.Fatal(err)
			}
			ref := BlockRef{Key: "k", MinID: recs[0].ID, MaxID: recs[len(recs)-1].ID, Records: int64(len(recs)), Bytes: int64(len(data))}
			whole, err := decodeBlockOf(ref, data)
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(20, 24))
			picks := [][]int{{0}, {len(recs) - 1}, {0, 1, len(recs) - 2, len(recs) - 1}}
			for _, n := range []int{3, 60, 500} {
				p := rng.Perm(len(recs))[:n]
				picks = append(picks, p)
			}
			for _, p := range picks {
				ids := make([]string, 0, len(p)+1)
				for _, i := range p {
					ids = append(ids, recs[i].ID)
				}
				ids = append(ids, recs[0].ID+"~absent")
				got, err := blockRows(ref, data, ids)
				if err != nil {
					t.Fatalf("%d ids: %v", len(ids), err)
				}
				if len(got) != len(p) {
					t.Fatalf("%d ids: %d records, want %d", len(ids), len(got), len(p))
				}
				for _, i := range p {
					if r := got[recs[i].ID]; !reflect.DeepEqual(r, whole[i]) {
						t.Fatalf("%d ids: row %d (%s) = %+v, want %+v", len(ids), i, recs[i].ID, r, whole[i])
					}
				}
			}
		})
	}
}

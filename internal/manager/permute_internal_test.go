package manager

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"github.com/compactorhq/compactor/internal/catalog"
)

// TestPermutePlacesEachEntryByOrder: after permute, position k holds the
// entry that was at order[k], for permutations with fixed points, one
// long cycle and random ones.
func TestPermutePlacesEachEntryByOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	orders := [][]int{{}, {0}, {0, 1, 2}, {2, 0, 1}, {1, 0, 3, 2}}
	for _, n := range []int{7, 100, 1000} {
		orders = append(orders, rng.Perm(n))
	}
	for _, order := range orders {
		entries := make([]PlanEntry, len(order))
		for i := range entries {
			entries[i].Collection = catalog.Collection{ID: strconv.Itoa(i)}
		}
		want := make([]string, len(order))
		for k, i := range order {
			want[k] = strconv.Itoa(i)
		}
		permute(entries, slices.Clone(order))
		got := make([]string, len(entries))
		for k := range entries {
			got[k] = entries[k].Collection.ID
		}
		if !slices.Equal(got, want) {
			t.Fatalf("permute by %v: %v, want %v", order, got, want)
		}
	}
}

package server

import (
	"context"
	"errors"
	"testing"

	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/segment"
)

type collectionsFunc func(ctx context.Context, id string) (catalog.Collection, error)

func (f collectionsFunc) GetCollection(ctx context.Context, id string) (catalog.Collection, error) {
	return f(ctx, id)
}

func TestAJobWritesUnderItsCollectionsThroughputShare(t *testing.T) {
	shares := map[string]float64{"shared": 0.5, "plain": 0}
	e := executor{throttle: segment.NewThrottle(1 << 20), collections: collectionsFunc(func(_ context.Context, id string) (catalog.Collection, error) {
		sh, ok := shares[id]
		if !ok {
			return catalog.Collection{}, errors.New("unreachable catalog")
		}
		return catalog.Collection{ID: id, Policy: catalog.CollectionPolicy{ThroughputShare: sh}}, nil
	})}
	for id, want := range map[string]float64{"shared": 0.5, "plain": 0, "unreadable": 0} {
		if got := segment.ShareOf(e.shareContext(t.Context(), catalog.Job{CollectionID: id})); got != want {
			t.Errorf("collection %s: the job writes under a share of %v; want %v", id, got, want)
		}
	}
}

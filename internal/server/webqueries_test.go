package server

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/catalog/catalogtest"
	"github.com/compactorhq/compactor/internal/manager"
	"github.com/compactorhq/compactor/web"
)

// countingStore counts the catalog reads made through it: each of these
// methods is one SQL query.
type countingStore struct {
	manager.Store
	cat *catalog.Catalog
	n   atomic.Int64
}

func (s *countingStore) StorageFiguresOf(ctx context.Context, ids []string) (map[string]catalog.StorageFigures, error) {
	s.n.Add(1)
	return s.cat.StorageFiguresOf(ctx, ids)
}

func (s *countingStore) ListCollectionsSorted(ctx context.Context, q catalog.CollectionPageQuery) (catalog.CollectionPage, error) {
	s.n.Add(1)
	return s.cat.ListCollectionsSorted(ctx, q)
}

func (s *countingStore) CountCollections(ctx context.Context) (int, error) {
	s.n.Add(1)
	return s.cat.CountCollections(ctx)
}

// SummarizeCollections is two queries: the counts and the notable rows.
func (s *countingStore) SummarizeCollections(ctx context.Context) (catalog.CollectionSummary, error) {
	s.n.Add(2)
	return s.cat.SummarizeCollections(ctx)
}

func (s *countingStore) ListVersions(ctx context.Context, id string) ([]catalog.Version, error) {
	s.n.Add(1)
	return s.cat.ListVersions(ctx, id)
}

func (s *countingStore) GetCollection(ctx context.Context, id string) (catalog.Collection, error) {
	s.n.Add(1)
	return s.Store.GetCollection(ctx, id)
}

func (s *countingStore) ListCollections(ctx context.Context) ([]catalog.Collection, error) {
	s.n.Add(1)
	return s.Store.ListCollections(ctx)
}

func (s *countingStore) GetJob(ctx context.Context, id string) (catalog.Job, error) {
	s.n.Add(1)
	return s.Store.GetJob(ctx, id)
}

func (s *countingStore) ListJobs(ctx context.Context, f catalog.JobFilter) ([]catalog.Job, error) {
	s.n.Add(1)
	return s.Store.ListJobs(ctx, f)
}

func (s *countingStore) ListQueue(ctx context.Context, limit int) ([]catalog.Job, error) {
	s.n.Add(1)
	return s.Store.ListQueue(ctx, limit)
}

func (s *countingStore) ListNodes(ctx context.Context) ([]catalog.Node, error) {
	s.n.Add(1)
	return s.Store.ListNodes(ctx)
}

func (s *countingStore) GetSetting(ctx context.Context, name string) (catalog.Setting, error) {
	s.n.Add(1)
	return s.Store.GetSetting(ctx, name)
}

// maxDashboardQueries bounds the catalog queries of one dashboard render:
// running, queue, nodes, pause, history, failed, the succeeded jobs of the
// throughput chart, and the collections' summary (counts, notable ones,
// largest backlogs, first names).
const maxDashboardQueries = 11

func TestDashboardRendersWithABoundedNumberOfQueries(t *testing.T) {
	ctx := t.Context()
	counts := map[int]int64{}
	for _, n := range []int{3, 120} {
		cat := catalogtest.Open(t)
		store := &countingStore{Store: cat, cat: cat}
		cfg := manager.DefaultConfig()
		cfg.Node = "n1"
		mgr, err := manager.New(store, nil, cfg, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for i := range n {
			c, err := cat.CreateCollection(ctx, fmt.Sprintf("c%03d", i), 2)
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, c.ID)
		}
		if _, err := mgr.Compact(ctx, ids, false, "page"); err != nil {
			t.Fatal(err)
		}
		// Two jobs claimed: the first then failed, the second running.
		for i := range 2 {
			j, err := cat.ClaimJob(ctx, "n1", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if i == 1 {
				continue
			}
			j.State, j.FinishedAt, j.Error = catalog.JobFailed, time.Now(), "boom"
			if err := cat.FinishJob(ctx, "n1", j); err != nil {
				t.Fatal(err)
			}
		}
		h, err := web.NewHandler(&webSource{mgr: mgr, cat: store, backlog: &backlogSampler{cat: cat}}, web.Config{})
		if err != nil {
			t.Fatal(err)
		}
		before := store.n.Load()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
		if rec.Code != http.StatusOK {
			t.Fatalf("dashboard with %d collections: status %d", n, rec.Code)
		}
		counts[n] = store.n.Load() - before
	}
	if counts[3] != counts[120] || counts[120] > maxDashboardQueries {
		t.Fatalf("catalog queries per dashboard render: %d with 3 collections and jobs, %d with 120; want the same, at most %d", counts[3], counts[120], maxDashboardQueries)
	}
}

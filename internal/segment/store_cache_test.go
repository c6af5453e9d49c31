package segment_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/compactorhq/compactor/internal/materialize"
	"github.com/compactorhq/compactor/internal/segment"
	"github.com/compactorhq/compactor/internal/segment/segmenttest"
)

// scanAll returns every record of m (Store.Scan from the start).
func scanAll(t *testing.T, s *segment.Store, m *segment.Manifest) []materialize.Record {
	t.Helper()
	var out []materialize.Record
	if err := s.Scan(context.Background(), m, "", func(r materialize.Record) bool { out = append(out, r); return true }); err != nil {
		t.Fatal(err)
	}
	return out
}

// cacheMetric returns the value of one compactor_block_cache_* series.
func cacheMetric(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			m := mf.GetMetric()[0]
			if c := m.GetCounter(); c != nil {
				return c.GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	t.Fatalf("no series %s", name)
	return 0
}

func TestStoreScanDecodesEachBlockOnceWhileCached(t *testing.T) {
	for _, tc := range []struct {
		name       string
		cacheBytes int64
		rereads    int // blob reads of the second scan
	}{
		{"cached", 1 << 20, 0},
		{"no cache", 0, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(20, 21))
			s, blobs := NewStore(t, segment.Config{MaxBlockRecords: 100, BlockCacheBytes: tc.cacheBytes})
			recs := records(rng, "k%04d", 1000, 4) // 10 blocks
			m, _, _ := commit(t, s, nil, upserts(recs))
			if got := scanAll(t, s, m); !reflect.DeepEqual(got, recs) {
				t.Fatalf("first scan: %d records, want the %d written", len(got), len(recs))
			}
			blobs.Reset()
			if got := scanAll(t, s, m); !reflect.DeepEqual(got, recs) {
				t.Fatalf("second scan: %d records, want the %d written", len(got), len(recs))
			}
			if blobs.Gets() != tc.rereads {
				t.Errorf("second scan read %d blobs, want %d", blobs.Gets(), tc.rereads)
			}
		})
	}
}

func TestStoreGetOfFewIDsDecodesTheirRowsWithoutFillingTheCache(t *testing.T) {
	rng := rand.New(rand.NewPCG(20, 22))
	reg := prometheus.NewPedanticRegistry()
	s := segment.NewStore(segmenttest.NewMem(t), segment.Config{MaxBlockRecords: 100, BlockCacheBytes: 1 << 20}, nil, segment.WithRegisterer(reg))
	recs := records(rng, "k%04d", 100, 4) // one block
	m, _, _ := commit(t, s, nil, upserts(recs))
	ctx := context.Background()
	few := []string{"k0003", "k0042"}
	got, err := s.Get(ctx, m, few)
	if err != nil || len(got) != 2 || !reflect.DeepEqual(got["k0042"], recs[42]) || !reflect.DeepEqual(got["k0003"], recs[3]) {
		t.Fatalf("Get of few ids: %v, %v", got, err)
	}
	if n := cacheMetric(t, reg, "compactor_block_cache_entries"); n != 0 {
		t.Errorf("%v blocks cached after a Get of 2 ids in 100 records, want none", n)
	}
	// A Get of many of a block's ids decodes it whole into the cache; then
	// a Get of few ids is served from it.
	many := make([]string, 0, 50)
	for i := 0; i < 100; i += 2 {
		many = append(many, recs[i].ID)
	}
	if got, err := s.Get(ctx, m, many); err != nil || len(got) != len(many) {
		t.Fatalf("Get of many ids: %d records, %v", len(got), err)
	}
	if n := cacheMetric(t, reg, "compactor_block_cache_entries"); n != 1 {
		t.Errorf("%v blocks cached after a Get of half a block, want 1", n)
	}
	if got, err := s.Get(ctx, m, few); err != nil || !reflect.DeepEqual(got["k0042"], recs[42]) {
		t.Fatalf("Get of few ids, cached: %v, %v", got, err)
	}
	if h, miss := cacheMetric(t, reg, "compactor_block_cache_hits_total"), cacheMetric(t, reg, "compactor_block_cache_misses_total"); h != 1 || miss != 2 {
		t.Errorf("%v hits and %v misses, want 1 and 2", h, miss)
	}
}

func TestStoreCachedReadsFollowEachVersion(t *testing.T) {
	rng := rand.New(rand.NewPCG(20, 23))
	s, _ := NewStore(t, segment.Config{MaxBlockRecords: 100, MinBlockRecords: 25, BlockCacheBytes: 1 << 20, NoDeltas: true})
	recs := records(rng, "k%04d", 1000, 4)
	v1, _, _ := commit(t, s, nil, upserts(recs))
	if got := scanAll(t, s, v1); !reflect.DeepEqual(got, recs) {
		t.Fatal("version 1 scan differs from what was written")
	}
	changed := records(rng, "k%04d", 1000, 4)[300:350]
	v2, _, _ := commit(t, s, v1, upserts(changed))
	want := append(append(append([]materialize.Record{}, recs[:300]...), changed...), recs[350:]...)
	if got := scanAll(t, s, v2); !reflect.DeepEqual(got, want) {
		t.Error("version 2 read from the cache differs from what was written")
	}
	if got := scanAll(t, s, v1); !reflect.DeepEqual(got, recs) {
		t.Error("version 1 changed after version 2 was written")
	}
	got, err := s.Get(context.Background(), v2, []string{"k0310"})
	if err != nil || !reflect.DeepEqual(got["k0310"], changed[10]) {
		t.Errorf("Get of version 2 = %v, %v", got, err)
	}
}

// ScanUncached returns what Scan returns without filling the cache: a
// Scan after it reads every block from the blob store again.
func TestStoreScanUncachedLeavesTheCacheAlone(t *testing.T) {
	rng := rand.New(rand.NewPCG(20, 23))
	s, blobs := NewStore(t, segment.Config{MaxBlockRecords: 100, BlockCacheBytes: 1 << 20})
	recs := records(rng, "k%04d", 1000, 4) // 10 blocks
	m, _, _ := commit(t, s, nil, upserts(recs))
	var got []materialize.Record
	if err := s.ScanUncached(context.Background(), m, func(r materialize.Record) bool { got = append(got, r); return true }); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, recs) {
		t.Fatalf("uncached scan: %d records, want the %d written", len(got), len(recs))
	}
	blobs.Reset()
	scanAll(t, s, m)
	if blobs.Gets() != 10 {
		t.Errorf("a scan after the uncached one read %d blobs, want all 10 blocks", blobs.Gets())
	}
}

func TestReadManifestSharedDecodesOnceAndDoesNotCacheErrors(t *testing.T) {
	rng := rand.New(rand.NewPCG(20, 24))
	s, blobs := NewStore(t, segment.Config{MaxBlockRecords: 100, BlockCacheBytes: 1 << 20})
	m, _, key := commit(t, s, nil, upserts(records(rng, "k%04d", 300, 4)))
	ctx := context.Background()
	if _, err := s.ReadManifestShared(ctx, key+"-missing"); !errors.Is(err, segment.ErrNotExist) {
		t.Fatalf("shared read of a missing manifest: %v, want ErrNotExist", err)
	}
	blobs.Reset()
	first, err := s.ReadManifestShared(ctx, key)
	if err != nil || first.Version != m.Version || len(first.Blocks) != len(m.Blocks) {
		t.Fatalf("shared read: %+v, %v; want version %d with %d blocks", first, err, m.Version, len(m.Blocks))
	}
	again, err := s.ReadManifestShared(ctx, key)
	if err != nil || again != first {
		t.Fatalf("second shared read: %p, %v; want the decoded manifest %p again", again, err, first)
	}
	if blobs.Gets() != 1 {
		t.Errorf("two shared reads fetched %d blobs, want 1", blobs.Gets())
	}
	// Without a cache every read decodes its own copy.
	s2, _ := NewStore(t, segment.Config{MaxBlockRecords: 100})
	m2, _, key2 := commit(t, s2, nil, upserts(records(rng, "k%04d", 10, 4)))
	a, err1 := s2.ReadManifestShared(ctx, key2)
	b, err2 := s2.ReadManifestShared(ctx, key2)
	if err1 != nil || err2 != nil || a == b || a.Version != m2.Version {
		t.Errorf("uncached shared reads: %p, %p (%v, %v); want two copies of version %d", a, b, err1, err2, m2.Version)
	}
}

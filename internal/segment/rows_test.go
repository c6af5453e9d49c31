package segment_test

import (
	"context"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/compactorhq/compactor/internal/materialize"
	"github.com/compactorhq/compactor/internal/segment"
	"github.com/compactorhq/compactor/internal/segment/segmenttest"
)

// withoutEmbeddings returns recs' records of ids with Embedding nil.
func withoutEmbeddings(recs map[string]materialize.Record) map[string]materialize.Record {
	out := make(map[string]materialize.Record, len(recs))
	for id, r := range recs {
		r.Embedding = nil
		out[id] = r
	}
	return out
}

// GetLight returns what Get returns but the embeddings, whatever the
// caches hold: over blocks and a delta, ids missing and present, with no
// cache, with the row cache, and with the blocks in the decoded block
// cache.
func TestStoreGetLightIsGetWithoutEmbeddings(t *testing.T) {
	for _, tc := range []struct {
		name              string
		blockBytes, rowsB int64
		fillBlockCache    bool
	}{
		{"no caches", 0, 0, false},
		{"row cache", 0, 1 << 20, false},
		{"blocks cached", 1 << 20, 1 << 20, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(30, 31))
			s, _ := NewStore(t, segment.Config{MaxBlockRecords: 100, BlockCacheBytes: tc.blockBytes, RowCacheBytes: tc.rowsB})
			recs := records(rng, "k%04d", 1000, 4) // 10 blocks
			v1, _, _ := commit(t, s, nil, upserts(recs))
			// A few changes spread over the blocks: a delta.
			changed := []materialize.Record{newRecord(rng, "k0005", 4), newRecord(rng, "k0505", 4), newRecord(rng, "k0905", 4)}
			changes := upserts(changed)
			changes = append(changes[:1], append(deletes("k0006"), changes[1:]...)...) // sorted by id
			v2, _, _ := writeDelta(t, s, v1, changes)
			if len(v2.Deltas) == 0 {
				t.Fatal("the changes were not written as a delta; the test needs one")
			}
			if tc.fillBlockCache {
				scanAll(t, s, v2)
			}
			ids := []string{"k0001", "k0005", "k0006", "k0099", "k0100", "k0505", "k0777", "k0905", "k0999", "k1000", "zz"}
			ctx := context.Background()
			for _, m := range []*segment.Manifest{v1, v2} {
				full, err := s.Get(ctx, m, ids)
				if err != nil {
					t.Fatal(err)
				}
				for range 2 { // cold, then from whatever the read cached
					light, err := s.GetLight(ctx, m, ids)
					if err != nil {
						t.Fatal(err)
					}
					if want := withoutEmbeddings(full); !reflect.DeepEqual(light, want) {
						t.Fatalf("version %d: GetLight =\n%v\nwant Get without embeddings\n%v", m.Version, light, want)
					}
				}
			}
		})
	}
}

// The row cache holds blocks' light columns within its bound (least
// recently used out), keyed by block blob key: a second read of the same
// blocks reads no blob, a block rewritten under a new key is read anew,
// and the metrics count it.
func TestRowCacheIsBoundedKeyedByBlobKeyAndCounted(t *testing.T) {
	rng := rand.New(rand.NewPCG(30, 32))
	reg := prometheus.NewPedanticRegistry()
	faulty := segmenttest.NewFaulty(segmenttest.NewMem(t))
	// One block's light columns are a few KiB: the bound holds two or three.
	const bound = 12 << 10
	s := segment.NewStore(faulty, segment.Config{MaxBlockRecords: 100, MinBlockRecords: 25, RowCacheBytes: bound, NoDeltas: true}, nil, segment.WithRegisterer(reg))
	recs := records(rng, "k%04d", 1000, 4) // 10 blocks
	v1, _, _ := commit(t, s, nil, upserts(recs))
	ctx := context.Background()
	get := func(m *segment.Manifest, ids ...string) map[string]materialize.Record {
		t.Helper()
		got, err := s.GetLight(ctx, m, ids)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	get(v1, "k0001", "k0101")
	faulty.Reset()
	if got := get(v1, "k0002", "k0102"); !reflect.DeepEqual(got["k0102"].Document, recs[102].Document) {
		t.Fatalf("k0102 = %+v, want %+v", got["k0102"], recs[102])
	}
	if faulty.Gets() != 0 {
		t.Errorf("a second read of two cached blocks read %d blobs, want 0", faulty.Gets())
	}
	// Every block once: the cache evicts to stay within its bound.
	for i := 0; i < 1000; i += 100 {
		get(v1, recs[i].ID)
	}
	if b := cacheMetric(t, reg, "compactor_row_cache_bytes"); b > bound || b == 0 {
		t.Errorf("the row cache holds %v bytes, want some and at most %d", b, bound)
	}
	if ev := cacheMetric(t, reg, "compactor_row_cache_evictions_total"); ev == 0 {
		t.Error("no eviction after reading 10 blocks into a cache of 2 or 3")
	}
	// A changed block has a new key: read anew, with the new content.
	changed := newRecord(rng, "k0950", 4)
	d := "rewritten"
	changed.Document = &d
	v2, _, _ := commit(t, s, v1, upserts([]materialize.Record{changed}))
	get(v1, "k0950") // the old block, most recently used
	faulty.Reset()
	if got := get(v2, "k0950"); got["k0950"].Document == nil || *got["k0950"].Document != d {
		t.Errorf("version 2's k0950 = %+v, want the rewritten document", got["k0950"])
	}
	if faulty.Gets() != 1 {
		t.Errorf("a read of the rewritten block read %d blobs, want 1", faulty.Gets())
	}
	if got := get(v1, "k0950"); !reflect.DeepEqual(got["k0950"].Document, recs[950].Document) {
		t.Errorf("version 1's k0950 changed: %+v", got["k0950"])
	}
	hits, misses := cacheMetric(t, reg, "compactor_row_cache_hits_total"), cacheMetric(t, reg, "compactor_row_cache_misses_total")
	if hits < 3 || misses < 11 {
		t.Errorf("%v hits and %v misses, want at least 3 and 11", hits, misses)
	}
	if n := cacheMetric(t, reg, "compactor_row_cache_max_bytes"); n != bound {
		t.Errorf("compactor_row_cache_max_bytes = %v, want %d", n, bound)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
	mfs, err := reg.Gather()
	if err != nil || len(mfs) != 6 {
		t.Errorf("%d series (%v), want the row cache's 6", len(mfs), err)
	}
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), "compactor_row_cache_") {
			t.Errorf("a store with a row cache alone registered %s", mf.GetName())
		}
	}
}

// A light read decodes no embedding: it reads a block whose embedding
// pages are damaged, which Get refuses as corrupt.
func TestGetLightNeverDecodesTheEmbeddings(t *testing.T) {
	rng := rand.New(rand.NewPCG(30, 33))
	mem := segmenttest.NewMem(t)
	s := segment.NewStore(mem, segment.Config{MaxBlockRecords: 100}, nil)
	recs := records(rng, "k%04d", 50, 64)
	m, _, _ := commit(t, s, nil, upserts(recs))
	ctx := context.Background()
	key := m.Blocks[0].Key
	data, err := mem.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := mem.Put(ctx, key, segment.DamageColumnPages(t, data, "embedding")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, m, []string{"k0007"}); err == nil {
		t.Fatal("Get read a block whose embedding pages are damaged")
	}
	got, err := s.GetLight(ctx, m, []string{"k0007"})
	if err != nil {
		t.Fatal(err)
	}
	want := recs[7]
	want.Embedding = nil
	if !reflect.DeepEqual(got["k0007"], want) {
		t.Errorf("GetLight = %+v, want %+v", got["k0007"], want)
	}
}

package segment

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// fixedSize sizes a cached value as the int it is.
func fixedSize(v any) int64 { return int64(v.(int)) }

func value(n int) func() (any, error) { return func() (any, error) { return n, nil } }

func TestBlockCacheEvictsTheLeastRecentlyUsedToStayWithinItsBound(t *testing.T) {
	ctx := context.Background()
	reg := prometheus.NewPedanticRegistry()
	c := newBlockCache(100, reg)
	loads := 0
	get := func(key string, n int) {
		t.Helper()
		v, err := c.get(ctx, key, func() (any, error) { loads++; return n, nil }, fixedSize)
		if err != nil || v.(int) != n {
			t.Fatalf("get %s = %v, %v; want %d", key, v, err, n)
		}
	}
	get("a", 40)
	get("b", 40)
	get("a", 40) // a is now the most recently used
	get("c", 40) // 120 > 100: b goes
	if loads != 3 {
		t.Fatalf("%d loads, want 3 (a, b, c)", loads)
	}
	get("a", 40)
	get("c", 40)
	if loads != 3 {
		t.Fatalf("a or c was evicted: %d loads", loads)
	}
	get("b", 40) // loaded again; evicts a
	if loads != 4 {
		t.Fatalf("%d loads, want b loaded again", loads)
	}
	get("d", 101) // larger than the bound: returned, not cached, evicts nothing
	get("d", 101)
	if loads != 6 {
		t.Fatalf("%d loads, want a value over the bound loaded each time", loads)
	}
	want := `
# HELP compactor_block_cache_bytes Estimated decoded size of the blocks, deltas and manifests the cache holds, in bytes.
# TYPE compactor_block_cache_bytes gauge
compactor_block_cache_bytes 80
# HELP compactor_block_cache_entries Blocks, deltas and manifests the decoded block cache holds.
# TYPE compactor_block_cache_entries gauge
compactor_block_cache_entries 2
# HELP compactor_block_cache_evictions_total Decoded blocks, deltas and manifests dropped from the cache to stay within --block-cache-bytes.
# TYPE compactor_block_cache_evictions_total counter
compactor_block_cache_evictions_total 2
# HELP compactor_block_cache_hits_total Reads of a segment block, delta or manifest served by the decoded block cache (or by a decode of it already in flight).
# TYPE compactor_block_cache_hits_total counter
compactor_block_cache_hits_total 3
# HELP compactor_block_cache_max_bytes The bound of the decoded block cache (--block-cache-bytes), in bytes.
# TYPE compactor_block_cache_max_bytes gauge
compactor_block_cache_max_bytes 100
# HELP compactor_block_cache_misses_total Reads of a segment block, delta or manifest not in the decoded block cache: it was read from the blob store and decoded.
# TYPE compactor_block_cache_misses_total counter
compactor_block_cache_misses_total 6
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}

func TestBlockCacheDecodesConcurrentMissesOfOneKeyOnce(t *testing.T) {
	ctx := context.Background()
	c := newBlockCache(1000, nil)
	waiting := make(chan struct{})
	c.onWait = func() { close(waiting) }
	started, release := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	loads := 0
	load := func() (any, error) {
		mu.Lock()
		loads++
		mu.Unlock()
		close(started)
		<-release
		return 7, nil
	}
	first := make(chan any)
	go func() {
		v, _ := c.get(ctx, "k", load, fixedSize)
		first <- v
	}()
	<-started
	// The second reader finds the decode in flight and waits for it; its
	// own load would close started again and panic.
	second := make(chan any)
	go func() {
		v, _ := c.get(ctx, "k", load, fixedSize)
		second <- v
	}()
	<-waiting
	close(release)
	if a, b := <-first, <-second; a != 7 || b != 7 {
		t.Fatalf("readers got %v and %v, want 7", a, b)
	}
	if loads != 1 {
		t.Fatalf("%d loads, want 1", loads)
	}
}

func TestBlockCacheReloadsWhenTheReaderThatLoadedWasStopped(t *testing.T) {
	c := newBlockCache(1000, nil)
	started, release := make(chan struct{}), make(chan struct{})
	ctx1, cancel := context.WithCancel(context.Background())
	firstErr := make(chan error)
	go func() {
		_, err := c.get(ctx1, "k", func() (any, error) {
			close(started)
			<-release
			return nil, ctx1.Err()
		}, fixedSize)
		firstErr <- err
	}()
	<-started
	cancel()
	close(release)
	if err := <-firstErr; !errors.Is(err, context.Canceled) {
		t.Fatalf("first reader: %v, want context.Canceled", err)
	}
	// The failed load is not cached: the next reader loads it.
	v, err := c.get(context.Background(), "k", value(5), fixedSize)
	if err != nil || v != 5 {
		t.Fatalf("get after a stopped load = %v, %v; want 5", v, err)
	}
}

func TestBlockCacheDoesNotKeepErrors(t *testing.T) {
	ctx := context.Background()
	c := newBlockCache(1000, nil)
	boom := errors.New("boom")
	if _, err := c.get(ctx, "k", func() (any, error) { return nil, boom }, fixedSize); !errors.Is(err, boom) {
		t.Fatalf("get = %v, want boom", err)
	}
	if v, err := c.get(ctx, "k", value(3), fixedSize); err != nil || v != 3 {
		t.Fatalf("get after an error = %v, %v; want 3", v, err)
	}
}

package segment

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/compactorhq/compactor/internal/materialize"
)

// DefaultBlockCacheBytes is the default bound of the decoded block cache
// (Config.BlockCacheBytes): 128 MiB, about 100,000 records of 64
// dimensions with their documents and metadata.
const DefaultBlockCacheBytes = 128 << 20

// blockCache holds decoded blocks and deltas of the read path (Store.Get,
// Store.Scan), least recently used first out, within a bound on their
// estimated decoded size. It is keyed by blob key: a block or delta key
// names a new uuid per file and a file is never rewritten under its key,
// so an entry can never be stale (a version that no longer references a
// key never asks for it). Values are shared by every reader and must not be
// modified. Concurrent misses of one key decode it once: the others wait
// for that decode. Safe for concurrent use.
type blockCache struct {
	max int64 // bytes; > 0

	mu       sync.Mutex // guards the fields below
	used     int64      // estimated bytes of the entries
	lru      list.List  // of *cacheEntry, most recently used first
	entries  map[string]*list.Element
	inflight map[string]*cacheFill

	m cacheMetrics
	// onWait, when set (tests), is called when a reader starts waiting for
	// a decode in flight.
	onWait func()
}

// cacheEntry is one decoded blob.
type cacheEntry struct {
	key   string
	value any // []materialize.Record of a block, []Change of a delta
	bytes int64
}

// cacheFill is a decode in flight; done is closed when value and err are
// set.
type cacheFill struct {
	done  chan struct{}
	value any
	err   error
}

type cacheMetrics struct {
	hits, misses, evictions prometheus.Counter
	bytes, entries          prometheus.Gauge
}

// cacheHelp is the help text of a cache's metrics, whose names are
// compactor_<name>_{hits_total,misses_total,evictions_total,bytes,entries,max_bytes}.
type cacheHelp struct {
	name                                           string
	hits, misses, evictions, bytes, entries, maxed string
}

// blockCacheHelp names the decoded block cache's metrics.
var blockCacheHelp = cacheHelp{
	name:      "block_cache",
	hits:      "Reads of a segment block, delta or manifest served by the decoded block cache (or by a decode of it already in flight).",
	misses:    "Reads of a segment block, delta or manifest not in the decoded block cache: it was read from the blob store and decoded.",
	evictions: "Decoded blocks, deltas and manifests dropped from the cache to stay within --block-cache-bytes.",
	bytes:     "Estimated decoded size of the blocks, deltas and manifests the cache holds, in bytes.",
	entries:   "Blocks, deltas and manifests the decoded block cache holds.",
	maxed:     "The bound of the decoded block cache (--block-cache-bytes), in bytes.",
}

// newBlockCache returns a cache bounded by maxBytes (> 0) whose metrics
// (compactor_block_cache_*) are registered on reg (nil: not registered).
func newBlockCache(maxBytes int64, reg prometheus.Registerer) *blockCache {
	return newCache(maxBytes, reg, blockCacheHelp)
}

// newCache returns a cache bounded by maxBytes (> 0) whose metrics, named
// and described by h, are registered on reg (nil: not registered).
func newCache(maxBytes int64, reg prometheus.Registerer, h cacheHelp) *blockCache {
	f := promauto.With(reg)
	name := func(s string) string { return "compactor_" + h.name + "_" + s }
	c := &blockCache{
		max:      maxBytes,
		entries:  make(map[string]*list.Element),
		inflight: make(map[string]*cacheFill),
		m: cacheMetrics{
			hits:      f.NewCounter(prometheus.CounterOpts{Name: name("hits_total"), Help: h.hits}),
			misses:    f.NewCounter(prometheus.CounterOpts{Name: name("misses_total"), Help: h.misses}),
			evictions: f.NewCounter(prometheus.CounterOpts{Name: name("evictions_total"), Help: h.evictions}),
			bytes:     f.NewGauge(prometheus.GaugeOpts{Name: name("bytes"), Help: h.bytes}),
			entries:   f.NewGauge(prometheus.GaugeOpts{Name: name("entries"), Help: h.entries}),
		},
	}
	f.NewGauge(prometheus.GaugeOpts{Name: name("max_bytes"), Help: h.maxed}).Set(float64(maxBytes))
	return c
}

// noteMiss counts a read that did not use the cache (a partial decode).
// c may be nil.
func (c *blockCache) noteMiss() {
	if c != nil {
		c.m.misses.Inc()
	}
}

// peek returns the cached value of key, counting a hit, without counting
// a miss when absent. c may be nil.
func (c *blockCache) peek(key string) (any, bool) {
	if c == nil {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[key]
	if !ok {
		return nil, false
	}
	c.lru.MoveToFront(el)
	c.m.hits.Inc()
	return el.Value.(*cacheEntry).value, true
}

// get returns the value of key: the cached one, the result of a decode of
// it in flight, or load's, which it then caches (unless the value alone
// is larger than the bound) evicting the least recently used entries to
// make room. size estimates a value's bytes. An error of load is returned
// to every reader waiting for it and not cached. A reader waiting for
// another's decode stops when ctx ends.
func (c *blockCache) get(ctx context.Context, key string, load func() (any, error), size func(any) int64) (any, error) {
	for {
		c.mu.Lock()
		if el, ok := c.entries[key]; ok {
			c.lru.MoveToFront(el)
			c.m.hits.Inc()
			c.mu.Unlock()
			return el.Value.(*cacheEntry).value, nil
		}
		f, ok := c.inflight[key]
		if !ok {
			break // c.mu held
		}
		c.mu.Unlock()
		if c.onWait != nil {
			c.onWait()
		}
		select {
		case <-f.done:
		case <-ctx.Done():
			return nil, fmt.Errorf("read %s: %w", key, ctx.Err())
		}
		// The reader that decoded it was stopped: decode it for this one.
		if f.err != nil && (errors.Is(f.err, context.Canceled) || errors.Is(f.err, context.DeadlineExceeded)) {
			continue
		}
		c.m.hits.Inc()
		return f.value, f.err
	}
	c.m.misses.Inc()
	f := &cacheFill{done: make(chan struct{})}
	c.inflight[key] = f
	c.mu.Unlock()

	f.value, f.err = load()
	n := int64(0)
	if f.err == nil {
		n = size(f.value)
	}
	c.mu.Lock()
	delete(c.inflight, key)
	if f.err == nil && n <= c.max {
		c.entries[key] = c.lru.PushFront(&cacheEntry{key: key, value: f.value, bytes: n})
		c.used += n
		for c.used > c.max {
			c.evict(c.lru.Back())
		}
		c.m.bytes.Set(float64(c.used))
		c.m.entries.Set(float64(len(c.entries)))
	}
	c.mu.Unlock()
	close(f.done)
	return f.value, f.err
}

// evict drops el's entry. c.mu is held.
func (c *blockCache) evict(el *list.Element) {
	e := c.lru.Remove(el).(*cacheEntry)
	delete(c.entries, e.key)
	c.used -= e.bytes
	c.m.evictions.Inc()
}

// Estimated bytes of the fixed parts of decoded values: a Record (id,
// embedding and document headers, metadata map pointer) with its share of
// a slice, a map entry with its interface value and bucket overhead, a
// Change.
const (
	recordOverheadBytes   = 96
	metadataEntryBytes    = 64
	changeOverheadBytes   = 64
	documentOverheadBytes = 16
)

// recordBytes estimates the memory a decoded record holds.
func recordBytes(r *materialize.Record) int64 {
	n := int64(recordOverheadBytes + len(r.ID) + 4*cap(r.Embedding))
	if r.Document != nil {
		n += int64(documentOverheadBytes + len(*r.Document))
	}
	for k, v := range r.Metadata {
		n += int64(metadataEntryBytes + len(k))
		if s, ok := v.(string); ok {
			n += int64(len(s))
		}
	}
	return n
}

// recordsBytes is the size estimate of a decoded block.
func recordsBytes(v any) int64 {
	recs := v.([]materialize.Record)
	var n int64
	for i := range recs {
		n += recordBytes(&recs[i])
	}
	return n
}

// changesBytes is the size estimate of a decoded delta.
func changesBytes(v any) int64 {
	cs := v.([]Change)
	var n int64
	for i := range cs {
		n += int64(changeOverheadBytes + len(cs[i].ID))
		if cs[i].Record != nil {
			n += recordBytes(cs[i].Record)
		}
	}
	return n
}

package rpc

import (
	"context"
	"sync"

	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/segment"
)

// indexCacheSize bounds the index figures kept by manifest key: one entry
// per collection's current version is enough for every GetCollection to
// hit; beyond it the cache starts afresh.
const indexCacheSize = 16_384

// indexCache keeps the vector index figures of committed versions by
// manifest key, so that GetCollection reads a version's manifest once, not
// at every call. It caches nothing read from the catalog: the collection
// row, with its current manifest key, is read at every call (so a replica
// never serves another's stale state); what is cached is a function of the
// key alone. A manifest key names one committed version's manifest,
// written once under a fresh name (a version number and a UUID) before the
// commit that publishes it and never rewritten: a rollback writes a copy
// under a new key, GC only deletes. So the figures of a key never change
// while any catalog row names it, and an entry of a deleted manifest is
// never asked for again. Safe for concurrent use.
type indexCache struct {
	mu sync.Mutex
	m  map[string]*segment.IndexRef // guarded by mu; nil value: the version has no index
}

// currentIndex returns the index of coll's current version through the
// cache, reading it with read (Records.CurrentIndex) on a miss. A version
// without a manifest (version 0, or indexing off) is not cached: read
// answers it without I/O.
func (c *indexCache) currentIndex(ctx context.Context, coll catalog.Collection, read func(context.Context, catalog.Collection) (*segment.IndexRef, error)) (*segment.IndexRef, error) {
	if coll.ManifestKey == "" || coll.SegmentVersion == 0 || coll.Index.Disabled {
		return read(ctx, coll)
	}
	c.mu.Lock()
	ix, ok := c.m[coll.ManifestKey]
	c.mu.Unlock()
	if ok {
		return ix, nil
	}
	ix, err := read(ctx, coll)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.m == nil || len(c.m) >= indexCacheSize {
		c.m = make(map[string]*segment.IndexRef)
	}
	c.m[coll.ManifestKey] = ix
	c.mu.Unlock()
	return ix, nil
}

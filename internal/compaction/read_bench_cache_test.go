package compaction

import (
	"testing"

	"github.com/compactorhq/compactor/internal/segment"
)

// readBenchConfig is the env of the read benchmarks: the Debian collection
// in blocks of 4096 records, and the default decoded block cache.
func readBenchConfig() envConfig {
	return envConfig{maxRecords: debianRecords, batchRecords: 5000, maxBlock: 4096, minBlock: 1024,
		seg: segment.Config{BlockCacheBytes: segment.DefaultBlockCacheBytes}}
}

// cachedReader returns a Compactor over e's catalog and blobs whose
// segment store has a new, empty decoded block cache of the default size.
func cachedReader(tb testing.TB, e *env) *Compactor {
	tb.Helper()
	scfg := segment.Config{MaxBlockRecords: 4096, MinBlockRecords: 1024, BlockCacheBytes: segment.DefaultBlockCacheBytes}
	c, err := New(e.cat, segment.NewStore(e.blobs, scfg, e.clock.Now), e.comp.cfg, nil)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// uncachedReader returns a Compactor over e's catalog and blobs whose
// segment store keeps no decoded block cache.
func uncachedReader(tb testing.TB, e *env) *Compactor {
	tb.Helper()
	scfg := segment.Config{MaxBlockRecords: 4096, MinBlockRecords: 1024}
	c, err := New(e.cat, segment.NewStore(e.blobs, scfg, e.clock.Now), e.comp.cfg, nil)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

package segment

import (
	"github.com/spf13/pflag"

	"github.com/compactorhq/compactor/internal/flagcheck"
)

// Config sizes blocks. DefaultConfig gives the defaults; RegisterFlags and
// Validate are the binary's flags for it.
//
// NewStore cannot return an error, so it clamps instead of rejecting:
// MaxBlockRecords <= 0 takes the default and is at least 2;
// MinBlockRecords <= 0 takes the default, is at least 1 and at most
// MaxBlockRecords/2 (so that 0 < Min < Max, and the near-equal parts of a
// split block are never under the minimum). Validate rejects what NewStore
// would clamp.
type Config struct {
	// MaxBlockRecords: a block with more records is split (default 4096).
	MaxBlockRecords int
	// MinBlockRecords: a rewritten block with fewer records is merged with a
	// neighbour (default MaxBlockRecords/4).
	MinBlockRecords int

	// Deltas (Writer.Write, DESIGN.md §7b). A compaction writes its
	// changes as a delta instead of rewriting blocks when they touch more
	// than DeltaMinBlocks blocks and number less than DeltaMaxFraction of
	// the records of those blocks, or when the base has deltas already; it
	// folds the deltas into the blocks they touch instead when their rows
	// with the changes would pass DeltaFoldRecords or the base lists
	// MaxDeltas deltas.

	// NoDeltas: never write a delta (deltas of a base are still read and
	// folded by the next write).
	NoDeltas bool
	// DeltaMinBlocks: the fewest blocks changes must touch, plus one, to
	// be written as a first delta (default 4).
	DeltaMinBlocks int
	// DeltaMaxFraction: changes at or above this fraction of the records of
	// the blocks they touch rewrite the blocks (default 0.05).
	DeltaMaxFraction float64
	// DeltaFoldRecords: deltas whose rows (records and tombstones, with the
	// changes) would pass this many are folded into blocks (default 0:
	// max(MaxBlockRecords, 10% of the base's records)). Reads hold the
	// deltas of a version in memory, so this bounds their memory too.
	DeltaFoldRecords int
	// MaxDeltas: a base listing this many deltas is folded (default 16).
	MaxDeltas int

	// BlockCacheBytes bounds the decoded blocks and deltas that reads
	// (Store.Get, Store.Scan) keep in memory, in bytes of their estimated
	// decoded size; 0 keeps none. DefaultConfig gives
	// DefaultBlockCacheBytes; zero is not filled in.
	BlockCacheBytes int64

	// RowCacheBytes bounds the blocks' ids, documents and metadata (the
	// columns but the embeddings) that reads of a query's hits
	// (Store.GetLight) keep in memory, in bytes of their estimated size;
	// 0 keeps none. DefaultConfig gives DefaultRowCacheBytes; zero is not
	// filled in.
	RowCacheBytes int64

	// NoReadBack turns off the read-back check of writes: by default each
	// block and delta a Writer puts is read again from the blob store,
	// decoded and digested, and a write whose blobs do not read back to
	// the records meant fails with a *VerificationError (bytes read = bytes
	// written; see docs/semantics.md, "Verified versions").
	NoReadBack bool
}

// DefaultConfig returns the documented defaults (those NewStore fills in
// for zero fields): blocks of 4096 records merged under 1024, deltas for
// changes under 5% of the records of more than 4 blocks, folded past
// max(4096, 10% of the records) rows or 16 deltas, a decoded block cache
// of DefaultBlockCacheBytes and a row cache of DefaultRowCacheBytes.
func DefaultConfig() Config {
	c := Config{}.withDefaults()
	c.BlockCacheBytes = DefaultBlockCacheBytes
	c.RowCacheBytes = DefaultRowCacheBytes
	return c
}

// RegisterFlags registers the flags of c's fields (--max-block-records,
// --min-block-records, the delta flags, --block-cache-bytes,
// --row-cache-bytes) on fs with
// c's values as defaults.
func (c *Config) RegisterFlags(fs *pflag.FlagSet) {
	fs.IntVar(&c.MaxBlockRecords, "max-block-records", c.MaxBlockRecords, "records at which a segment block is split")
	fs.IntVar(&c.MinBlockRecords, "min-block-records", c.MinBlockRecords, "records under which a rewritten block is merged with a neighbour (at most half of --max-block-records)")
	fs.BoolVar(&c.NoDeltas, "no-deltas", c.NoDeltas, "never write merge-on-read deltas: every compaction rewrites the blocks its changes touch")
	fs.Float64Var(&c.DeltaMaxFraction, "delta-max-fraction", c.DeltaMaxFraction, "changes under this fraction of the records of the blocks they touch are written as a delta (0 < f <= 1)")
	fs.IntVar(&c.DeltaFoldRecords, "delta-fold-records", c.DeltaFoldRecords, "delta rows past which deltas are folded into blocks (0: the larger of --max-block-records and 10% of the collection's records)")
	fs.IntVar(&c.MaxDeltas, "max-deltas", c.MaxDeltas, "deltas a segment version may list before they are folded into blocks")
	fs.BoolVar(&c.NoReadBack, "no-read-back", c.NoReadBack, "do not re-read the blocks and deltas a compaction writes before its commit (the read-back check: bytes read = bytes written)")
	fs.Int64Var(&c.BlockCacheBytes, "block-cache-bytes", c.BlockCacheBytes, "bytes of decoded segment blocks that reads keep in memory (estimated decoded size; 0 disables the cache)")
	fs.Int64Var(&c.RowCacheBytes, "row-cache-bytes", c.RowCacheBytes, "bytes of segment blocks' ids, documents and metadata (no embeddings) that reads of query hits keep in memory (estimated size; 0 disables the cache)")
}

// Validate rejects sizes NewStore would clamp: MaxBlockRecords under 2,
// MinBlockRecords under 1 or above MaxBlockRecords/2. Errors name the flag.
func (c Config) Validate() error {
	return flagcheck.First(
		flagcheck.AtLeast("--max-block-records", c.MaxBlockRecords, minMaxBlockRecords),
		flagcheck.That(c.MinBlockRecords >= 1 && c.MinBlockRecords <= c.MaxBlockRecords/2,
			"--min-block-records must be in 1..%d (half of --max-block-records), got %d", c.MaxBlockRecords/2, c.MinBlockRecords),
		flagcheck.That(c.DeltaMaxFraction > 0 && c.DeltaMaxFraction <= 1, "--delta-max-fraction must be in (0, 1], got %g", c.DeltaMaxFraction),
		flagcheck.AtLeast("--delta-fold-records", c.DeltaFoldRecords, 0),
		flagcheck.AtLeast("--max-deltas", c.MaxDeltas, 1),
		flagcheck.That(c.BlockCacheBytes >= 0, "--block-cache-bytes must be at least 0 (0 disables the cache), got %d", c.BlockCacheBytes),
		flagcheck.That(c.RowCacheBytes >= 0, "--row-cache-bytes must be at least 0 (0 disables the cache), got %d", c.RowCacheBytes),
	)
}

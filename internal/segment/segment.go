// Package segment is the segment format of the compactor (DESIGN.md §7, §7b).
//
// A segment version is a manifest (JSON) listing blocks, and deltas that
// override them (see "Deltas" below); a block is a Parquet
// file of records sorted by id, with disjoint, ordered id ranges across the
// blocks of a manifest. Blobs live in a blob store (gocloud.dev/blob: file://
// by default, mem:// in tests, s3:// for shared storage) under:
//
//	collections/<collection id>/blocks/<uuid>.parquet
//	collections/<collection id>/manifests/<version, 20 digits>-<uuid>.json
//
// Writes are copy-on-write: a Writer rewrites only the blocks whose id range a
// change falls into and reuses the rest by reference, splits a block that grows
// past Config.MaxBlockRecords and merges one that shrinks under
// Config.MinBlockRecords with a neighbour. Block i of a manifest owns the ids
// from its MinID up to (excluding) the next block's MinID; the first block also
// owns every id below its MinID, the last every id above its MaxID.
//
// # Block files
//
// A block is one Parquet file (one row group, zstd-compressed columns) with
// this schema, readable as it is by DuckDB, pyarrow, pandas or Spark. Its
// key/value metadata compactor.block_format names the format version: 1
// (embedding floats PLAIN, data pages v2) or 2, written now (embedding
// floats dictionary-encoded when the block has few distinct values,
// BYTE_STREAM_SPLIT otherwise; data pages v1 of 1 MiB; documents and
// metadata PLAIN, min/max statistics for the id column alone, since
// 2026-12: before, the string columns were DELTA_LENGTH_BYTE_ARRAY with
// statistics on every column, which any Parquet reader decodes alike).
// Both hold the same schema and values:
//
//	message blockRow {
//	  required binary id (STRING);             // sorted ascending, unique
//	  optional group embedding (LIST) {        // float32 vector; null: none
//	    repeated group list { required float element; }
//	  }
//	  optional binary document (STRING);       // null: no document
//	  optional binary metadata (STRING);       // a JSON object; null: no metadata
//	}
//
// With DuckDB, every block of a collection (file:// store under data/blobs):
//
//	SELECT id, document, metadata
//	FROM read_parquet('data/blobs/collections/<id>/blocks/*.parquet');
//
// The glob also matches blocks that no committed version references (left by a
// failed or cancelled compaction and not yet collected, or kept for older
// versions), so it can return stale or duplicate ids. To read exactly one
// version, list the block keys of its manifest:
//
//	SELECT b.key FROM (SELECT unnest(blocks) AS b
//	  FROM read_json('data/blobs/collections/<id>/manifests/<manifest>.json'));
//	SELECT * FROM read_parquet(['data/blobs/<key 1>', 'data/blobs/<key 2>', ...]);
//
// and extract metadata fields with json_extract_string(metadata, '$.key').
// With pyarrow (pq.read_table("data/blobs/collections/<id>/blocks/") reads
// every block, with the same caveat), one version:
//
//	import json, pyarrow.parquet as pq
//	m = json.load(open(f"data/blobs/collections/{cid}/manifests/{name}.json"))
//	t = pq.ParquetDataset([f"data/blobs/{b['key']}" for b in m["blocks"]]).read()
//	df = t.to_pandas()  # metadata: json.loads per row
//
// The manifest of the committed version is the one the catalog names for the
// collection; manifests sort by version in key order.
//
// # Deltas
//
// A write whose changes are few but spread over many blocks need not rewrite
// them: Writer.Write decides (its documentation gives the rule, Config its
// settings) and then writes the changes as one delta, a Parquet file under
//
//	collections/<collection id>/deltas/<uuid>.parquet
//
// with the block columns and one more, `required boolean deleted` (true: a
// tombstone, the id is absent; its other columns are null), one row group,
// rows sorted by unique id. The manifest (format version 2) lists the deltas
// beside the blocks, oldest first (Manifest.Deltas); its RecordCount counts
// the records with the deltas applied. Reads (Store.Get, Store.Scan,
// Writer.Get) merge them on read: per id, the newest delta holding it wins
// and a tombstone hides it; else the block owning the id holds it. A block
// rewrite (a Write of kind WroteBlocks) folds every delta of its base into
// the blocks it rewrites (older delta < newer delta < the write's changes),
// so a version written by it lists no deltas and keeps format version 1. GC keeps the
// deltas of kept versions like their blocks. docs/storage.md shows one DuckDB
// query that reads a version with its deltas.
//
// # Digests
//
// Every block and delta entry of a manifest records the Digest of its
// records (an order-independent sum of per-record hashes, digest.go) and
// the SHA-256 of its file; the manifest records the version's Digest. A
// Writer reads back each blob it puts and checks that the blocks it wrote
// hold the base blocks it consumed adjusted by the changes it applied
// (writeCheck); Store.Verify re-reads a whole version. Entries written
// before digests have none and are checked for the rest.
package segment

import (
	"context"
	"errors"
	"time"

	"github.com/compactorhq/compactor/internal/materialize"
)

// ErrNotExist is returned (wrapped) when a blob is missing.
var ErrNotExist = errors.New("blob does not exist")

// BlobInfo describes one stored blob.
type BlobInfo struct {
	Key     string
	Size    int64 // bytes
	ModTime time.Time
}

// Blobs is the blob store the segment package needs. OpenBucket adapts a
// gocloud.dev/blob bucket to it; tests wrap it to inject faults.
type Blobs interface {
	// Put writes the whole blob at key, replacing any blob there. When it
	// returns nil the blob is durable (it survives a crash or power loss
	// of the machine, as far as the store persists anything): a compaction
	// commits a version in the catalog right after putting its blobs.
	Put(ctx context.Context, key string, data []byte) error
	// Get reads the whole blob; an error matching ErrNotExist when missing.
	Get(ctx context.Context, key string) ([]byte, error)
	// Delete removes the blob; deleting a missing blob is not an error.
	Delete(ctx context.Context, key string) error
	// List returns every blob whose key starts with prefix, in key order.
	List(ctx context.Context, prefix string) ([]BlobInfo, error)
}

// BufferGetter is implemented by Blobs that can read a blob into memory
// the caller reuses (the bucket store, and the binary's wrappers of it), so
// that reads of whole blocks do not allocate, and the runtime zero, a
// block-sized buffer each time.
type BufferGetter interface {
	// GetBuffer is Get reading into buf's memory (buf[:0], grown when its
	// capacity is short): the result may share buf's array. Errors as
	// Get's.
	GetBuffer(ctx context.Context, key string, buf []byte) ([]byte, error)
}

// GetBuffer reads the blob at key through b into buf's memory when b is a
// BufferGetter, else with b.Get. Errors as Get's.
func GetBuffer(ctx context.Context, b Blobs, key string, buf []byte) ([]byte, error) {
	if g, ok := b.(BufferGetter); ok {
		return g.GetBuffer(ctx, key, buf)
	}
	return b.Get(ctx, key)
}

// BlockRef is a manifest's entry for one block.
type BlockRef struct {
	Key     string `json:"key"`
	MinID   string `json:"min_id"`
	MaxID   string `json:"max_id"`
	Records int64  `json:"records"`
	Bytes   int64  `json:"bytes"`
	// Digest is the Digest of the block's records (32 hex digits); empty
	// in a manifest written before digests ("no digest recorded").
	Digest string `json:"digest,omitempty"`
	// Checksum is the SHA-256 of the block file (64 hex digits); empty
	// before digests.
	Checksum string `json:"sha256,omitempty"`
}

// DeltaRef is a manifest's entry for one delta: a Parquet file of rows
// sorted by unique id that override the blocks (see the package
// documentation, "Deltas").
type DeltaRef struct {
	Key        string `json:"key"`
	MinID      string `json:"min_id"`
	MaxID      string `json:"max_id"`
	Records    int64  `json:"records"`    // rows that are records (deleted false)
	Tombstones int64  `json:"tombstones"` // rows that delete their id (deleted true)
	Bytes      int64  `json:"bytes"`
	// Digest is the Digest of the delta's records (rows with deleted
	// false), TombstoneDigest that of its tombstones (each hashed as a
	// record with its id and nothing else), Checksum the SHA-256 of the
	// file; empty before digests.
	Digest          string `json:"digest,omitempty"`
	TombstoneDigest string `json:"tombstone_digest,omitempty"`
	Checksum        string `json:"sha256,omitempty"`
}

// Manifest is one segment version: an ordered list of blocks, and the
// deltas that override them.
type Manifest struct {
	FormatVersion    int    `json:"format_version"` // 1, or 2 when it lists deltas
	CollectionID     string `json:"collection_id"`
	Version          int64  `json:"version"`
	CompactionOffset int64  `json:"compaction_offset"` // last log offset materialized into it
	Dimension        int    `json:"dimension"`
	RecordCount      int64  `json:"record_count"` // records of the version, deltas applied
	// Digest is the Digest of the version's records, deltas applied (the
	// sum of its blocks' digests when it lists no deltas); empty when the
	// version or one of the blocks it reuses was written before digests.
	Digest    string     `json:"digest,omitempty"`
	CreatedAt time.Time  `json:"created_at"`
	Blocks    []BlockRef `json:"blocks"` // sorted by MinID, disjoint ranges
	// Deltas override the blocks, oldest first: per id, the newest delta
	// holding it wins, and a tombstone there means the id is absent.
	Deltas []DeltaRef `json:"deltas,omitempty"`
	// Index is the version's vector index (nil: none). A manifest from
	// before indexing has none and reads as it did.
	Index *IndexRef `json:"index,omitempty"`
}

// Change is the materialized outcome for one record id: Record nil means the
// id ends absent (delete it from the segment if present).
//
// Ops, when not nil, are instead the operation records of ID in log offset
// order: the writer folds them onto the base's record of ID
// (materialize.ApplyOwning: the writer takes the operation records over) as
// it merges the change stream with the base blocks, and Record is ignored.
type Change struct {
	ID     string
	Record *materialize.Record
	Ops    []materialize.OperationRecord
	// folded: a delta of the base holds ID, and was is its value there
	// (nil: a tombstone), the base version's record that OnChange compares
	// with when the deltas are folded into blocks (foldDeltaStream).
	folded bool
	was    *materialize.Record
}

// WriteReport is what one Writer.Write did: the kind of write and its figures.
type WriteReport struct {
	Kind           WriteKind // WroteBlocks or WroteDelta
	BlocksWritten  int       // new block files
	BlocksReused   int       // blocks of the base carried over by reference
	BlocksDropped  int       // blocks of the base not in the new version
	RecordsWritten int64     // records in the blocks written, or rows (records and tombstones) of the delta
	BytesWritten   int64     // bytes of the blocks and delta written (manifest excluded)
	DeltasWritten  int       // delta files written (0 or 1, WroteDelta only)
	DeltasFolded   int       // deltas of the base folded into the blocks written
}

// GCPlan says what one GC pass over a collection may delete (Store.GC).
type GCPlan struct {
	// Keep: manifests of the versions that must stay readable (retained
	// versions, and versions a reader or compaction still uses). They and
	// their blocks are never deleted.
	Keep []string
	// Expired: manifests of versions retired for longer than the grace
	// period. They and their blocks that no manifest in Keep references are
	// deleted. A missing expired manifest is skipped.
	Expired []string
	// OrphanGrace: a blob referenced by no manifest in Keep or Expired (left
	// by a failed, cancelled or crashed compaction, or written by one still
	// running) is deleted only when its ModTime is older than now minus
	// OrphanGrace. Must not be negative.
	OrphanGrace time.Duration
	// SpareOrphans: delete no orphan at all (a compaction of the collection
	// is in flight and its blobs are orphans until it commits).
	SpareOrphans bool
}

// GCStats are the figures of one GC pass.
type GCStats struct {
	BlobsDeleted int
	BytesDeleted int64
}

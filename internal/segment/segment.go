// Package segment is the segment format of the compactor (DESIGN.md §7).
//
// A segment version is a manifest (JSON) listing blocks; a block is a Parquet
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
// Config.MinBlockRecords with a neighbour.
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
	// Put writes the whole blob at key, replacing any blob there.
	Put(ctx context.Context, key string, data []byte) error
	// Get reads the whole blob; an error matching ErrNotExist when missing.
	Get(ctx context.Context, key string) ([]byte, error)
	// Delete removes the blob; deleting a missing blob is not an error.
	Delete(ctx context.Context, key string) error
	// List returns every blob whose key starts with prefix, in key order.
	List(ctx context.Context, prefix string) ([]BlobInfo, error)
}

// BlockRef is a manifest's entry for one block.
type BlockRef struct {
	Key     string `json:"key"`
	MinID   string `json:"min_id"`
	MaxID   string `json:"max_id"`
	Records int64  `json:"records"`
	Bytes   int64  `json:"bytes"`
}

// Manifest is one segment version: an ordered list of blocks.
type Manifest struct {
	FormatVersion    int        `json:"format_version"` // 1
	CollectionID     string     `json:"collection_id"`
	Version          int64      `json:"version"`
	CompactionOffset int64      `json:"compaction_offset"` // last log offset materialized into it
	Dimension        int        `json:"dimension"`
	RecordCount      int64      `json:"record_count"`
	CreatedAt        time.Time  `json:"created_at"`
	Blocks           []BlockRef `json:"blocks"` // sorted by MinID, disjoint ranges
}

// Change is the materialized outcome for one record id: Record nil means the
// id ends absent (delete it from the segment if present).
type Change struct {
	ID     string
	Record *materialize.Record
}

// WriteStats are the figures of one Writer.Write.
type WriteStats struct {
	BlocksWritten  int   // new block files
	BlocksReused   int   // blocks of the base carried over by reference
	BlocksDropped  int   // blocks of the base not in the new version
	RecordsWritten int64 // records in the blocks written
	BytesWritten   int64 // bytes of the blocks written (manifest excluded)
}

// GCStats are the figures of one GC pass.
type GCStats struct {
	BlobsDeleted int
	BytesDeleted int64
}

// Config sizes blocks.
type Config struct {
	// MaxBlockRecords: a block with more records is split (default 4096).
	MaxBlockRecords int
	// MinBlockRecords: a rewritten block with fewer records is merged with a
	// neighbour (default MaxBlockRecords/4).
	MinBlockRecords int
}

var _ = context.Background

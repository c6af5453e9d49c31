package segment

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
)

// KindIndex is the CorruptError.Kind of a vector index blob (a graph blob
// or a vector chunk blob).
const KindIndex = "index"

// Suffixes of the index blobs' keys.
const (
	indexGraphSuffix = ".vgraph"
	indexChunkSuffix = ".vchunk"
)

func indexPrefix(collectionID string) string {
	return collectionPrefix(collectionID) + "index/"
}

// IndexBlobKind says which index blob a key is for (Writer.PutIndexBlob).
type IndexBlobKind int

// The index blobs.
const (
	IndexGraph IndexBlobKind = iota // the graph blob, rewritten per version
	IndexChunk                      // a vector chunk blob, shared by later versions
)

// BlobRef is a blob the manifest references by key and size in bytes.
type BlobRef struct {
	Key   string `json:"key"`
	Bytes int64  `json:"bytes"`
	// Checksum is the SHA-256 of the blob (64 hex digits); empty before
	// checksums were recorded.
	Checksum string `json:"sha256,omitempty"`
}

// IndexRef is a version's vector index (package vindex): its graph blob
// and vector chunk blobs, in the order the graph lists them (a version
// built incrementally lists its parent's chunks first, by the same keys),
// the parameters it was built with and its figures when written. A
// manifest without one (nil) has no index: built before indexing, or with
// indexing off.
type IndexRef struct {
	Graph  BlobRef   `json:"graph"`
	Chunks []BlobRef `json:"chunks"`
	// Parameters of the graph.
	Dimension      int    `json:"dimension"`
	Distance       string `json:"distance"`
	M              int    `json:"m"`
	EfConstruction int    `json:"ef_construction"`
	EfSearch       int    `json:"ef_search"`
	// Figures: live vectors, tombstones still linked, slots repaired out
	// of the graph and not reclaimed.
	Vectors    int `json:"vectors"`
	Tombstones int `json:"tombstones"`
	Dropped    int `json:"dropped"`
	// Build says how the job that wrote it got it: "full" (built from
	// every record), "incremental" (a successor of the previous version's),
	// "repaired" (incremental, then tombstones re-linked), or "rebuild" (an
	// index rebuild job: every record, the blocks unchanged).
	Build string `json:"build"`
	// Job is the id of the job that built it ("" when not known: written
	// before this field, or by a compaction run outside the queue).
	Job string `json:"job,omitempty"`
	// BuiltAt is when it was written; BuildSeconds how long the index
	// phase of its compaction took.
	BuiltAt      time.Time `json:"built_at"`
	BuildSeconds float64   `json:"build_seconds"`
}

// Bytes is the size of the index's blobs, graph and chunks, in bytes.
func (r *IndexRef) Bytes() int64 {
	if r == nil {
		return 0
	}
	n := r.Graph.Bytes
	for _, c := range r.Chunks {
		n += c.Bytes
	}
	return n
}

// maxIndexBlobBytes bounds an index blob's size as a manifest may claim it:
// a graph blob of a block-limited collection is far below; a chunk is at
// most 32 MiB (vindex).
const maxIndexBlobBytes = 16 << 30

// checkIndex checks m.Index: keys of the collection's index folder (graph
// and chunks of the right suffix, each once, not a block's or delta's),
// sizes in range, figures not negative.
func checkIndex(m *Manifest) error {
	ix := m.Index
	if ix == nil {
		return nil
	}
	prefix := indexPrefix(m.CollectionID)
	isKey := func(key, suffix string) bool {
		name, ok := strings.CutPrefix(key, prefix)
		return ok && strings.HasSuffix(name, suffix) && len(name) > len(suffix) && !strings.ContainsAny(name, "/\\") && !strings.HasPrefix(name, ".")
	}
	if !isKey(ix.Graph.Key, indexGraphSuffix) {
		return fmt.Errorf("index: graph key %q is not an index graph key under %s", ix.Graph.Key, prefix)
	}
	if ix.Graph.Bytes < 1 || ix.Graph.Bytes > maxIndexBlobBytes {
		return fmt.Errorf("index: graph %s: %d bytes, outside 1..%d", ix.Graph.Key, ix.Graph.Bytes, int64(maxIndexBlobBytes))
	}
	seen := map[string]bool{ix.Graph.Key: true}
	for i, c := range ix.Chunks {
		switch {
		case !isKey(c.Key, indexChunkSuffix):
			return fmt.Errorf("index: chunk %d: key %q is not an index chunk key under %s", i, c.Key, prefix)
		case seen[c.Key]:
			return fmt.Errorf("index: chunk %d: key %s listed twice", i, c.Key)
		case c.Bytes < 1 || c.Bytes > maxIndexBlobBytes:
			return fmt.Errorf("index: chunk %s: %d bytes, outside 1..%d", c.Key, c.Bytes, int64(maxIndexBlobBytes))
		}
		seen[c.Key] = true
	}
	switch {
	case ix.Dimension < 1 || ix.Dimension > maxDimension:
		return fmt.Errorf("index: dimension %d outside 1..%d", ix.Dimension, maxDimension)
	case m.Dimension != 0 && ix.Dimension != m.Dimension:
		return fmt.Errorf("index: dimension %d, the version's is %d", ix.Dimension, m.Dimension)
	case ix.M < 0 || ix.EfConstruction < 0 || ix.EfSearch < 0:
		return fmt.Errorf("index: negative parameter (m %d, ef_construction %d, ef_search %d)", ix.M, ix.EfConstruction, ix.EfSearch)
	case ix.Vectors < 0 || ix.Tombstones < 0 || ix.Dropped < 0:
		return fmt.Errorf("index: negative figure (vectors %d, tombstones %d, dropped %d)", ix.Vectors, ix.Tombstones, ix.Dropped)
	}
	return nil
}

// PutIndexBlob writes one index blob of the version this writer builds,
// under a new key in collections/<id>/index/, and returns its reference.
// The Put is durable when it returns (as a manifest's), so the manifest
// that lists it may be written next; Abort deletes it with the blocks.
func (w *Writer) PutIndexBlob(ctx context.Context, kind IndexBlobKind, data []byte) (BlobRef, error) {
	if err := ctx.Err(); err != nil {
		return BlobRef{}, fmt.Errorf("write index blob: %w", err)
	}
	suffix := indexChunkSuffix
	if kind == IndexGraph {
		suffix = indexGraphSuffix
	}
	key := indexPrefix(w.collectionID) + uuid.NewString() + suffix
	w.mu.Lock()
	w.written = append(w.written, key) // before the Put: a failed Put may still have written
	w.mu.Unlock()
	if err := w.s.blobs.Put(ctx, key, data); err != nil {
		return BlobRef{}, fmt.Errorf("put index blob %s: %w", key, err)
	}
	return BlobRef{Key: key, Bytes: int64(len(data)), Checksum: Checksum(data)}, nil
}

// ReadIndexBlob reads an index blob a manifest lists. A missing blob is a
// *MissingError of KindIndex; one whose size is not ref.Bytes is a
// *CorruptError of KindIndex naming the key.
func (s *Store) ReadIndexBlob(ctx context.Context, ref BlobRef) ([]byte, error) {
	data, err := s.getBlob(ctx, KindIndex, ref.Key)
	if err != nil {
		return nil, fmt.Errorf("read index blob %s: %w", ref.Key, err)
	}
	if int64(len(data)) != ref.Bytes {
		return nil, corrupt(KindIndex, ref.Key, fmt.Errorf("%d bytes, the manifest says %d", len(data), ref.Bytes))
	}
	return data, nil
}

// CorruptIndex returns err (a decoder's error about the index blob at key)
// as a *CorruptError of KindIndex naming the key.
func CorruptIndex(key string, err error) *CorruptError {
	return corrupt(KindIndex, key, err)
}

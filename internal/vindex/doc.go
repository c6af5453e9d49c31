// Package vindex is the vector index of a segment version: an HNSW graph
// (Malkov & Yashunin; the algorithm of hnswlib, which it is measured
// against) over the live records' embeddings, built at compaction, and the
// distance functions that the index and the exact search share.
//
// # Building and searching
//
//	g, err := vindex.New(vindex.Params{Dim: 128, Distance: vindex.DistanceCosine})
//	err = g.InsertBatch(ids, vecs, threads) // or g.Insert(id, vec); an existing id is updated
//	g.Delete(id)                             // a tombstone
//	hits, err := g.Search(q, k, ef, allow)   // []Hit{ID, Distance}, by distance then id
//
// Params are Dim, Distance, M (default 16; 2M neighbours on layer 0),
// EfConstruction (200), EfSearch (100, used when Search gets ef ≤ 0) and
// the Seed of the level generator. Levels are drawn from the seed and the
// node's slot, so a single-thread build is reproducible to the byte.
// InsertBatch links on threads goroutines with per-node locks, as
// hnswlib's addPoint does.
//
// Search applies its filter during the traversal, as hnswlib does: a node
// allow refuses (or a tombstone) still guides the walk but is not a
// result, and the walk goes on until it holds ef results. A selective
// filter makes that walk long and its recall lower; the caller, who knows
// how many records its filter accepts (from its metadata statistics),
// asks ScanCheaper(allowed, k, ef) and then runs ScanIDs (an exact scan of
// the accepted ids) or ScanBatch (an exact scan of every live vector its
// filter accepts, for several queries at once, the filter given each
// vector's slot so that what it reads can be kept by slot: SlotOf)
// instead. Scan is the exact brute-force answer with the same tie rule,
// for ground truth and an exact query mode.
//
// Search, Scan, ScanBatch, ScanIDs, SlotOf, Len, Stats, Vector and Contains
// may run concurrently. InsertBatch, Insert, Delete, Repair and Encode need the
// graph to themselves.
//
// # Versions: copy-on-write successors
//
// A compaction that changes k of N records does not rebuild: it decodes
// (or keeps) the previous version's graph, takes g.Successor(), inserts
// the new and updated vectors, deletes the deleted ids and encodes the
// successor. The successor shares the parent's vector chunks and layer-0
// link pages and copies a page (128 nodes) the first time it writes to it,
// so the distance work is in proportion to k; it copies the per-node
// metadata (ids, states, levels, upper layers: tens of bytes a node, no
// distance computation) and shares the id map, keeping its own changes in
// an overlay that is folded into a new map once it passes a quarter of
// the shared one. The parent stays searchable for the
// readers that pinned its version, and must not be changed any more.
//
// # Memory
//
// The vectors (Dim × 4 bytes a node, the bulk of a graph) are stored in
// chunks of 4,096 nodes that, on Linux, macOS and FreeBSD, are anonymous
// memory mappings outside the Go heap (arena.go): pointer-free, they would
// otherwise count toward the collector's goal and let a process building
// a graph of V bytes of vectors grow to about twice V before each
// collection. A chunk is unmapped at the first collection after no graph
// holds it (a successor holds its parent's); MappedBytes reports what is
// mapped. The rest, on the heap, is about 2M × 4 bytes of layer-0 links,
// the id and the id map's entry per node.
//
// Tombstones are repaired when NeedsRepair says they are more than
// RepairFraction (10 %) of the graph's nodes: Repair re-links every node
// that points at one (the heuristic's choice among its other neighbours
// and the tombstones' neighbours) and drops them. A dropped node keeps its
// vector's slot in the shared chunks; NeedsRebuild says when tombstones
// and dropped slots pass RebuildFraction (30 %) of all slots, and
// Compatible whether new parameters need a rebuild (a change of M,
// ef_construction, distance, dimension or seed). A rebuild is New plus
// InsertBatch of the live vectors: g.Rebuild(params, threads). Stats counts vectors, tombstones,
// dropped slots, and what this graph inserted, deleted and repaired.
//
// # Distance kernels
//
// The distances run on AVX2 + FMA kernels in Go assembly
// (distance_amd64.s) when the processor has both, else on the pure-Go
// kernels of distance.go, which the purego build tag selects everywhere.
// The kernel is most of a build's and a search's CPU time and the Go
// compiler does not vectorize, so the assembly one is about 4× faster
// per distance on 128 dimensions. Each kernel adds in a fixed order, so its
// results are deterministic on every processor that runs it; the two
// kernels round differently and agree within 1e-5 of the sum of the
// terms' magnitudes. A graph built by one kernel searches correctly with
// the other; a single-thread build is reproducible to the byte per kernel.
//
// # Persisted format
//
// Encode(put) hands put, one at a time, the vector chunk blobs of the
// slots not yet in a chunk (append-only, at most 32 MiB each: a successor
// references its parent's chunks and adds one for its new vectors), then
// returns the graph blob (header, ids and states, adjacency, the list of
// chunks; rewritten per version). The writer stores each chunk as a blob
// and keeps their keys in order beside the graph blob's. Decode takes the
// graph blob and a function that returns chunk i. Everything is
// little-endian, versioned and CRC-32C-checked per section; Decode checks
// every count and size against the bytes present before allocating and
// reports bad bytes as an error wrapping ErrCorrupt that names the blob
// and field. The layout is documented at the constants of codec.go.
package vindex

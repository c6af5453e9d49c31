package compaction

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/jobtype"
	"github.com/compactorhq/compactor/internal/materialize"
	"github.com/compactorhq/compactor/internal/segment"
	"github.com/compactorhq/compactor/internal/vindex"
)

// indexChunkBytes is the most bytes of vectors one index chunk blob holds
// (vindex writes append-only chunks of at most 32 MiB).
const indexChunkBytes = 32 << 20

// Estimate prices the next compaction of collectionID without writing
// anything: it scans the ids, ops and sizes of the log slice that
// compaction would read (no record is decoded) and the current manifest,
// and derives the blocks it would rewrite, the bytes and blob calls it
// would read and write, and the index work. Cost: one manifest read and a
// scan of at most MaxRecords log rows. The figures are upper bounds where
// the materialization rules may shrink them (see jobtype.Estimate).
// Errors: the catalog's (ErrNotFound for an unknown collection), and the
// segment store's (a corrupt manifest).
func (c *Compactor) Estimate(ctx context.Context, collectionID string) (jobtype.Estimate, error) {
	coll, err := c.cat.GetCollection(ctx, collectionID)
	if err != nil {
		return jobtype.Estimate{}, fmt.Errorf("estimate %s: %w", collectionID, err)
	}
	end := min(coll.LogPosition, coll.CompactionOffset+int64(c.cfg.MaxRecords))
	est := jobtype.Estimate{OpRecords: max(0, end-coll.CompactionOffset), IndexOff: coll.Index.Disabled}
	if est.OpRecords == 0 {
		return est, nil
	}
	var base *segment.Manifest
	if coll.ManifestKey != "" {
		if base, err = c.seg.ReadManifest(ctx, coll.ManifestKey); err != nil {
			return jobtype.Estimate{}, fmt.Errorf("estimate %s: read manifest: %w", collectionID, err)
		}
	}
	s := newSliceScan(base)
	for after := coll.CompactionOffset; after < end; {
		last := after
		n, err := c.cat.ScanLog(ctx, collectionID, after, end, c.cfg.BatchRecords, func(offset int64, record []byte) error {
			last = offset
			return s.add(offset, record)
		})
		if err != nil {
			return jobtype.Estimate{}, fmt.Errorf("estimate %s: read log after offset %d: %w", collectionID, after, err)
		}
		if n == 0 {
			break // compacted meanwhile
		}
		after = last
	}
	delta := false
	if base != nil && s.opRecords <= c.seg.MaxDeltaChanges(base) {
		// A small change spread over many blocks is written as one delta:
		// the store decides on the distinct ids, as Prepare asks it.
		changes := make([]segment.Change, 0, len(s.changed))
		for id := range s.changed {
			changes = append(changes, segment.Change{ID: id})
		}
		slices.SortFunc(changes, func(a, b segment.Change) int { return strings.Compare(a.ID, b.ID) })
		delta = c.seg.PreferDelta(base, changes)
	}
	s.price(&est, coll, base, c.seg.MaxBlockRecords(), delta)
	return est, nil
}

// sliceScan accumulates what a log slice does to a version's blocks.
type sliceScan struct {
	blocks    []segment.BlockRef
	touched   []bool
	ids       map[string]materialize.Op // the last op per id outside every block
	logBytes  int64
	opRecords int64
	deletes   int64 // DELETE operation records of ids in a block
	changed   map[string]bool
}

func newSliceScan(base *segment.Manifest) *sliceScan {
	s := &sliceScan{ids: map[string]materialize.Op{}, changed: map[string]bool{}}
	if base != nil {
		s.blocks = base.Blocks
	}
	s.touched = make([]bool, len(s.blocks))
	return s
}

// add takes one log row: its op byte and id are read from the encoding in
// place (materialize's binary format: version, op, id).
func (s *sliceScan) add(offset int64, record []byte) error {
	lo, hi, err := materialize.IDSpan(record)
	if err != nil || len(record) < 2 {
		return fmt.Errorf("log record at offset %d: %w (%v)", offset, materialize.ErrCorruptRecord, err)
	}
	op, id := materialize.Op(record[1]), string(record[lo:hi])
	s.logBytes += int64(len(record))
	s.opRecords++
	s.changed[id] = true
	// Blocks are sorted by MinID with disjoint ranges: the one that may
	// hold id is the last whose MinID <= id.
	i := sort.Search(len(s.blocks), func(i int) bool { return s.blocks[i].MinID > id }) - 1
	if i >= 0 && id <= s.blocks[i].MaxID {
		s.touched[i] = true
		if op == materialize.OpDelete {
			s.deletes++
		}
		return nil
	}
	s.ids[id] = op
	return nil
}

// price fills est from the scan.
func (s *sliceScan) price(est *jobtype.Estimate, coll catalog.Collection, base *segment.Manifest, perBlock int, delta bool) {
	est.LogBytes = s.logBytes
	est.BlocksTotal = len(s.blocks)
	var baseBytes, baseRecords, rewrittenRecords int64
	for i, b := range s.blocks {
		baseBytes, baseRecords = baseBytes+b.Bytes, baseRecords+b.Records
		if s.touched[i] {
			est.BlocksToRewrite++
			est.BytesToRewrite += b.Bytes
			rewrittenRecords += b.Records
		}
	}
	// New ids: those outside every block whose last op leaves a record.
	var added int64
	for _, op := range s.ids {
		if op != materialize.OpDelete && op != materialize.OpUpdate {
			added++
		}
	}
	perRecord := float64(s.logBytes) / float64(max(s.opRecords, 1))
	if baseRecords > 0 {
		perRecord = float64(baseBytes) / float64(baseRecords)
	}
	newBytes := int64(float64(added) * perRecord)
	est.BytesToRewrite += newBytes
	est.BytesRead, est.BlobGets = 0, 0
	if base != nil {
		est.BytesRead, est.BlobGets = manifestBytes(base), 1
	}
	changes := int64(len(s.changed))
	if delta {
		est.Delta = true
		est.RecordsToWrite = changes
		est.BlobPuts = 2 // the delta, the manifest
		est.BytesWritten = int64(float64(changes)*perRecord) + manifestBytes(base)
		// The delta reads the current records of the changed ids: the
		// blocks they are in.
		est.BytesRead += est.BytesToRewrite - newBytes
		est.BlobGets += int64(est.BlocksToRewrite)
	} else {
		est.RecordsToWrite = rewrittenRecords + added
		est.BlocksToWrite = int((est.RecordsToWrite + int64(perBlock) - 1) / int64(perBlock))
		est.BlobPuts = int64(est.BlocksToWrite) + 1
		est.BytesRead += est.BytesToRewrite - newBytes
		est.BlobGets += int64(est.BlocksToRewrite)
		// The manifest lists every block: its size grows with their count.
		blocksAfter := len(s.blocks) - est.BlocksToRewrite + est.BlocksToWrite
		est.BytesWritten = est.BytesToRewrite + manifestBytesFor(base, blocksAfter)
	}
	est.WriteAmplification = float64(est.RecordsToWrite) / float64(max(s.opRecords, 1))
	s.priceIndex(est, coll, base, baseRecords, added)
}

// priceIndex fills the index phase: a full build inserts every record of
// the new version; an incremental one the changed records, and tombstones
// the deleted ones.
func (s *sliceScan) priceIndex(est *jobtype.Estimate, coll catalog.Collection, base *segment.Manifest, baseRecords, added int64) {
	if coll.Index.Disabled {
		return
	}
	after := baseRecords + added - s.deletes
	var prev *segment.IndexRef
	if base != nil {
		prev = base.Index
	}
	dim := coll.Dimension
	if prev != nil {
		dim = max(dim, prev.Dimension)
	}
	vecBytes := int64(max(dim, 1)) * 4
	s2 := coll.Index.WithDefaults()
	graphPerVector := float64(2*s2.M*4 + 16) // layer-0 links and node header
	if prev != nil && prev.Vectors > 0 {
		graphPerVector = float64(prev.Graph.Bytes) / float64(prev.Vectors)
	}
	rebuild := prev == nil || prev.Dimension != dim || prev.M != s2.M || prev.EfConstruction != s2.EfConstruction ||
		prev.Distance != s2.Distance.String() ||
		float64(prev.Tombstones+prev.Dropped+int(s.deletes)) > vindex.RebuildFraction*float64(prev.Vectors+prev.Tombstones+prev.Dropped)
	est.IndexRebuild = rebuild
	if rebuild {
		est.VectorsToInsert = max(after, 0)
		est.BlobPuts += (est.VectorsToInsert*vecBytes+indexChunkBytes-1)/indexChunkBytes + 1
		est.BytesWritten += est.VectorsToInsert*vecBytes + int64(graphPerVector*float64(est.VectorsToInsert))
		return
	}
	est.VectorsToInsert = max(int64(len(s.changed))-int64(len(s.ids))+added-s.deletes, 0)
	est.VectorsToDelete = s.deletes
	// The previous graph and chunks are read (unless cached in process).
	est.BytesRead += prev.Bytes()
	est.BlobGets += int64(1 + len(prev.Chunks))
	est.BlobPuts += 1
	if est.VectorsToInsert > 0 {
		est.BlobPuts += (est.VectorsToInsert*vecBytes + indexChunkBytes - 1) / indexChunkBytes
	}
	est.BytesWritten += est.VectorsToInsert*vecBytes + int64(graphPerVector*float64(max(after, 0)))
}

// manifestBytes is the encoded size of m (the size of its blob when it was
// read: its blocks are what make it large).
func manifestBytes(m *segment.Manifest) int64 { return manifestBytesFor(m, len(m.Blocks)) }

// manifestBytesFor estimates the size of a manifest listing blocks blocks:
// about 300 bytes per block reference (key, id range, counts, digest) and
// 1 KiB of header and index reference.
func manifestBytesFor(_ *segment.Manifest, blocks int) int64 { return 1024 + 300*int64(blocks) }

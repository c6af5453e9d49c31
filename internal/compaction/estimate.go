package compaction

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
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
// scan of at most MaxRecords log rows (by logReaders goroutines at once,
// as a compaction reads them). The figures are upper bounds where
// the materialization rules may shrink them (see jobtype.Estimate).
// Errors: the catalog's (ErrNotFound for an unknown collection), and the
// segment store's (a corrupt manifest).
func (c *Compactor) Estimate(ctx context.Context, collectionID string) (jobtype.Estimate, error) {
	coll, err := c.cat.GetCollection(ctx, collectionID)
	if err != nil {
		return jobtype.Estimate{}, fmt.Errorf("estimate %s: %w", collectionID, err)
	}
	end := min(coll.LogPosition, coll.CompactionOffset+int64(c.cfg.MaxRecords))
	if end <= coll.CompactionOffset {
		return jobtype.Estimate{Indexed: !coll.Index.Disabled}, nil
	}
	var base *segment.Manifest
	if coll.ManifestKey != "" {
		if base, err = c.seg.ReadManifest(ctx, coll.ManifestKey); err != nil {
			return jobtype.Estimate{}, fmt.Errorf("estimate %s: read manifest: %w", collectionID, err)
		}
	}
	pr := c.newSlicePricer(coll, base, end)
	for b := range c.logBatches(ctx, c.cat.ScanLog, collectionID, coll.CompactionOffset, end) {
		if errors.Is(b.err, catalog.ErrConflict) {
			break // compacted meanwhile
		}
		if b.err != nil {
			return jobtype.Estimate{}, fmt.Errorf("estimate %s: %w", collectionID, b.err)
		}
		if err := pr.add(b.entries); err != nil {
			return jobtype.Estimate{}, fmt.Errorf("estimate %s: %w", collectionID, err)
		}
	}
	return pr.estimate()
}

// slicePricer prices the compaction of one log slice over a version from
// the slice's rows, given in offset order: Estimate gives it the rows of a
// scan of its own, a compaction (Options.OnEstimate) the rows it reads
// anyway. It also keeps, for a first version, what the slice's first
// operation records would write (a block's worth), to measure the blocks'
// bytes per record.
type slicePricer struct {
	c    *Compactor
	coll catalog.Collection
	base *segment.Manifest
	end  int64 // the slice is (coll.CompactionOffset, end]
	scan *sliceScan
	// sampled counts the operation records taken for the sample, up to
	// sampleMax (0: no sample: the version has blocks); sample holds the
	// records their ADDs and UPSERTs leave, by id.
	sampled, sampleMax int
	sample             map[string]materialize.Record
}

func (c *Compactor) newSlicePricer(coll catalog.Collection, base *segment.Manifest, end int64) *slicePricer {
	p := &slicePricer{c: c, coll: coll, base: base, end: end, scan: newSliceScan(base, c.seg.MaxDeltaChanges(base))}
	if base == nil || len(base.Blocks) == 0 {
		p.sampleMax = min(c.seg.MaxBlockRecords(), maxSampleRecords)
		p.sample = map[string]materialize.Record{}
	}
	return p
}

// add takes the next rows of the slice.
func (p *slicePricer) add(entries []opEntry) error {
	for i := range entries {
		e := &entries[i]
		if err := p.scan.add(e.off, e.rec); err != nil {
			return err
		}
		if p.sampled == p.sampleMax {
			continue
		}
		p.sampled++
		var op materialize.OperationRecord
		if err := op.UnmarshalBinary(e.rec); err != nil {
			return fmt.Errorf("sample the log: decode log record at offset %d: %w", e.off, err)
		}
		if op.Op != materialize.OpAdd && op.Op != materialize.OpUpsert {
			continue
		}
		if r := materialize.Apply(nil, []materialize.OperationRecord{op}); r != nil {
			p.sample[op.ID] = *r
		}
	}
	return nil
}

// estimate prices the rows taken so far.
func (p *slicePricer) estimate() (jobtype.Estimate, error) {
	c, s := p.c, p.scan
	est := jobtype.Estimate{OpRecords: max(0, p.end-p.coll.CompactionOffset), Indexed: !p.coll.Index.Disabled}
	// A small change spread over many blocks is written as one delta: the
	// store decides on the distinct ids, as the writer does (a slice too
	// long for a delta kept none).
	ids := slices.Sorted(slices.Values(s.ids))
	delta := c.seg.WritesDelta(p.base, ids, s.opRecords)
	var sampled float64
	if p.sampleMax > 0 {
		var err error
		if sampled, err = bytesPerRecord(p.sample); err != nil {
			return jobtype.Estimate{}, fmt.Errorf("estimate %s: sample the log: %w", p.coll.ID, err)
		}
	}
	s.price(&est, p.base, c.seg.MaxBlockRecords(), c.seg.MinBlockRecords(), delta, sampled, c.seg.ReadsBack())
	s.priceIndex(&est, p.coll, p.base, c.indexes)
	est.WriteAmplification = float64(est.RecordsToWrite) / float64(max(s.opRecords, 1))
	return est, nil
}

// sliceScan accumulates what a log slice does to a version's blocks: per
// block (the writer rewrites each touched block as a span of its own,
// splitting and merging it), the ids that fall in it, its deletes, and the
// new ids in the gaps of the id ranges (which cannot be present yet).
type sliceScan struct {
	blocks  []segment.BlockRef
	touched []bool
	deletes []int64 // DELETEs of distinct ids inside each block's range
	gapAdds []int64 // new ids outside every range, by the block that takes them
	// changed holds each id the slice changes, by a 64-bit hash of the id
	// (seed: two distinct ids share an entry with odds of about n²/2⁶⁵,
	// which would price one record less): whether it holds a record after
	// the slice, and the block that takes it. One map, read once and
	// written at most once per row: the scan of a large slice is mostly
	// these map operations, and the map is most of its memory (16 bytes a
	// slot).
	changed map[uint64]idFate
	seed    maphash.Seed
	// ids are the distinct ids, in the order first seen, while the slice
	// is short enough to be written as a delta (at most idLimit operation
	// records; the store decides on the ids, see Store.WritesDelta); nil
	// past it.
	ids       []string
	idLimit   int64
	logBytes  int64
	opRecords int64
	dataBytes int64 // bytes of the blocks or delta priced to be written
}

// newSliceScan returns the scan of a slice over base (nil: none); idLimit
// is the most operation records of a slice written as a delta
// (Store.MaxDeltaChanges).
func newSliceScan(base *segment.Manifest, idLimit int64) *sliceScan {
	s := &sliceScan{changed: map[uint64]idFate{}, seed: maphash.MakeSeed(), idLimit: idLimit}
	if base != nil {
		s.blocks = base.Blocks
	}
	s.touched = make([]bool, len(s.blocks))
	s.deletes = make([]int64, len(s.blocks))
	s.gapAdds = make([]int64, max(len(s.blocks), 1))
	return s
}

// idFate is what a log slice leaves of one id (sliceScan.changed).
type idFate struct {
	// block takes the id: the last block whose MinID is at most the id
	// (the first for an id before every range); inRange: the id is
	// inside its range.
	block   int32
	inRange bool
	exists  bool // the id holds a record after the slice
}

// add takes one log row: its op byte and id are read from the encoding in
// place (materialize's binary format: version, op, id).
func (s *sliceScan) add(offset int64, record []byte) error {
	lo, hi, err := materialize.IDSpan(record)
	if err != nil || len(record) < 2 {
		return fmt.Errorf("log record at offset %d: %w (%v)", offset, materialize.ErrCorruptRecord, err)
	}
	op, idb := materialize.Op(record[1]), record[lo:hi]
	s.logBytes += int64(len(record))
	s.opRecords++
	if s.opRecords > s.idLimit {
		s.ids = nil
	}
	key := maphash.Bytes(s.seed, idb)
	f, seen := s.changed[key]
	was := f
	if !seen {
		// Blocks are sorted by MinID with disjoint ranges: the one that
		// may hold id is the last whose MinID <= id; an id in no range
		// goes to that block too, or to the first (segment's owner).
		// (Comparisons with string(idb) allocate nothing: only an id kept
		// for the delta decision is copied.)
		i := sort.Search(len(s.blocks), func(i int) bool { return s.blocks[i].MinID > string(idb) }) - 1
		inRange := i >= 0 && string(idb) <= s.blocks[i].MaxID
		f = idFate{block: int32(max(i, 0)), inRange: inRange, exists: inRange} // an id inside a range is taken to be present
		if len(s.blocks) > 0 {
			s.touched[f.block] = true
		}
		if s.opRecords <= s.idLimit {
			s.ids = append(s.ids, string(idb))
		}
	}
	// The materialization rules, on whether a record exists: ADD and
	// UPSERT leave one, DELETE none, UPDATE changes nothing of that.
	switch op {
	case materialize.OpAdd, materialize.OpUpsert:
		f.exists = true
	case materialize.OpDelete:
		f.exists = false
	}
	if !seen || f != was {
		s.changed[key] = f
	}
	return nil
}

// price fills est's blocks, records, bytes and blob calls of the blocks
// (or the delta) and the manifest.
func (s *sliceScan) price(est *jobtype.Estimate, base *segment.Manifest, maxBlock, minBlock int, delta bool, sampled float64, readBack bool) {
	// The read-back check reads every block and delta written back: a GET
	// and its bytes each.
	defer func() {
		if readBack {
			est.BlobGets += est.BlobPuts - 1 // every blob put but the manifest
			est.BytesRead += s.dataBytes
		}
	}()
	est.LogBytes = s.logBytes
	est.BlocksTotal = len(s.blocks)
	// The fate of each changed id: one inside a range that ends deleted
	// is a record removed; one outside every range that ends present is
	// a record added (to the block that takes it).
	for _, f := range s.changed {
		switch {
		case f.inRange && !f.exists:
			s.deletes[f.block]++
		case !f.inRange && f.exists:
			s.gapAdds[f.block]++
		}
	}
	var baseBytes, baseRecords, added int64
	for i, b := range s.blocks {
		baseBytes, baseRecords = baseBytes+b.Bytes, baseRecords+b.Records
		_ = i
	}
	for _, n := range s.gapAdds {
		added += n
	}
	perRecord := float64(s.logBytes) / float64(max(s.opRecords, 1))
	if baseRecords > 0 {
		perRecord = float64(baseBytes) / float64(baseRecords)
	}
	if base != nil {
		est.BytesRead, est.BlobGets = manifestBytes(base), 1
	}
	if delta {
		// One delta of the changed ids; their current records are read
		// from the blocks that hold them.
		est.Delta = true
		est.RecordsToWrite = int64(len(s.changed))
		for i, t := range s.touched {
			if t {
				est.BlocksToRewrite++
				est.BytesToRewrite += s.blocks[i].Bytes
			}
		}
		est.BytesRead += est.BytesToRewrite
		est.BlobGets += int64(est.BlocksToRewrite)
		est.BlobPuts = 2 // the delta, the manifest
		s.dataBytes = deltaFixedBytes + int64(float64(est.RecordsToWrite)*perRecord)
		est.BytesWritten = s.dataBytes + manifestBytesFor(base, len(s.blocks), len(base.Deltas)+1)
		est.BlocksAfter, est.BytesAfter = len(s.blocks), baseBytes
		return
	}
	if len(s.blocks) == 0 {
		// The first version: one span of every new record.
		est.RecordsToWrite = added
		est.BlocksToWrite = spanBlocks(added, maxBlock)
		est.BytesToRewrite = int64(float64(added) * perRecord)
		if sampled > 0 {
			perRecord = sampled
		}
		s.dataBytes = int64(float64(added) * perRecord)
		est.BytesWritten = s.dataBytes + manifestBytesFor(base, est.BlocksToWrite, 0)
		est.BlobPuts = int64(est.BlocksToWrite) + 1
		est.BlocksAfter, est.BytesAfter = est.BlocksToWrite, est.BytesWritten
		return
	}
	var written int64
	for i, b := range s.blocks {
		if !s.touched[i] {
			continue
		}
		recs := b.Records - s.deletes[i] + s.gapAdds[i]
		rewritten := int64(1)
		bytes := b.Bytes
		if recs > 0 && recs < int64(minBlock) && len(s.blocks) > 1 {
			// Merged with a neighbour, which is rewritten with it.
			n := s.blocks[min(i+1, len(s.blocks)-1)]
			if i == len(s.blocks)-1 {
				n = s.blocks[i-1]
			}
			recs += n.Records
			rewritten++
			bytes += n.Bytes
		}
		est.BlocksToRewrite += int(rewritten)
		est.BytesToRewrite += bytes
		est.BytesRead += bytes
		est.BlobGets += rewritten
		est.RecordsToWrite += max(recs, 0)
		est.BlocksToWrite += spanBlocks(recs, maxBlock)
		written += int64(float64(max(recs, 0)) * perRecord)
	}
	est.BlocksToRewrite = min(est.BlocksToRewrite, len(s.blocks))
	est.BlobGets = min(est.BlobGets, int64(len(s.blocks))+1)
	est.BlocksAfter = len(s.blocks) - est.BlocksToRewrite + est.BlocksToWrite
	est.BytesAfter = baseBytes - est.BytesToRewrite + written
	s.dataBytes = written
	est.BytesWritten = written + manifestBytesFor(base, est.BlocksAfter, 0)
	est.BlobPuts = int64(est.BlocksToWrite) + 1
}

// deltaFixedBytes calibrates a delta's fixed part (its Parquet footer and
// schema, beside its records at the blocks' bytes per record). Measured by
// TestEstimatePredictsTheCompactionItPrices.
const deltaFixedBytes = 1900

// maxSampleRecords bounds the records of a first compaction's log slice
// an estimate encodes as one block (of the writer's block size) to measure
// the bytes per record: the blocks' columnar, compressed encoding depends
// on the data (random embeddings barely compress, repeated documents and
// metadata do) and on the block size.
const maxSampleRecords = 4096

// bytesPerRecord encodes the records of byID (the ADDs and UPSERTs among
// the first operation records of a slice: a block's worth, at most
// maxSampleRecords) as one block, and returns its bytes per record (0 when
// there is none).
func bytesPerRecord(byID map[string]materialize.Record) (float64, error) {
	if len(byID) == 0 {
		return 0, nil
	}
	recs := make([]materialize.Record, 0, len(byID))
	for _, r := range byID {
		recs = append(recs, r)
	}
	slices.SortFunc(recs, func(a, b materialize.Record) int { return strings.Compare(a.ID, b.ID) })
	n, err := segment.EncodedBytes(recs)
	if err != nil {
		return 0, err
	}
	return float64(n) / float64(len(recs)), nil
}

// spanBlocks is the blocks the writer cuts a span of n records into: while
// the span is over its window (8 blocks' worth) it sends blocks of 15/16
// of maxBlock from the front, then cuts the rest into near-equal blocks of
// at most maxBlock (segment's layout).
func spanBlocks(n int64, maxBlock int) int {
	if n <= 0 {
		return 0
	}
	m := int64(maxBlock)
	window, chunk := 8*m, max(m*15/16, 1)
	k := int64(0)
	if n > window {
		k = (n - window + chunk - 1) / chunk
	}
	rest := n - k*chunk
	return int(k + (rest+m-1)/m)
}

// priceIndex fills the index phase (and IndexBytes, its part of
// BytesWritten): a full build inserts every record of
// the new version, reading its blocks back; an incremental one inserts the
// changed records into a successor of the previous graph (read unless
// this process has it cached) and tombstones the deleted ones. Either
// writes a graph blob, and a vector chunk for the vectors it adds.
func (s *sliceScan) priceIndex(est *jobtype.Estimate, coll catalog.Collection, base *segment.Manifest, cache *indexCache) {
	if coll.Index.Disabled {
		return
	}
	before := est.BytesWritten
	defer func() { est.IndexBytes = est.BytesWritten - before }()
	var prev *segment.IndexRef
	var baseRecords int64
	if base != nil {
		prev, baseRecords = base.Index, base.RecordCount
	}
	var deletes, added int64
	for _, n := range s.deletes {
		deletes += n
	}
	for _, n := range s.gapAdds {
		added += n
	}
	after := max(baseRecords+added-deletes, 0)
	if after == 0 && prev == nil {
		return // no vector yet
	}
	set := coll.Index.WithDefaults()
	dim := coll.Dimension
	if prev != nil && dim == 0 {
		dim = prev.Dimension
	}
	vecBytes := int64(max(dim, 1))*4 + chunkBytesPerVector
	graphPerVector := float64(set.M * graphBytesPerM)
	if prev != nil && prev.Vectors+prev.Tombstones > 0 {
		graphPerVector = float64(prev.Graph.Bytes) / float64(prev.Vectors+prev.Tombstones+prev.Dropped)
	}
	switch {
	case prev == nil:
		est.IndexFullBuild, est.IndexFullBuildReason = true, "the current version has no index"
	case prev.Dimension != dim || prev.M != set.M || prev.EfConstruction != set.EfConstruction || prev.Distance != set.Distance.String():
		est.IndexFullBuild, est.IndexFullBuildReason = true, "the collection's index parameters differ from the index's"
	case float64(prev.Tombstones+prev.Dropped+int(deletes)) > vindex.RebuildFraction*float64(prev.Vectors+prev.Tombstones+prev.Dropped):
		est.IndexFullBuild, est.IndexFullBuildReason = true, fmt.Sprintf("tombstones and dropped slots would pass %.0f %% of the graph", vindex.RebuildFraction*100)
	}
	if est.IndexFullBuild {
		est.VectorsToInsert = after
		// The build reads every block of the new version back.
		est.BlobGets += int64(est.BlocksAfter)
		est.BytesRead += est.BytesAfter
		est.BlobPuts += (after*vecBytes+indexChunkBytes-1)/indexChunkBytes + 1
		est.BytesWritten += after*vecBytes + int64(graphPerVector*float64(after))
		return
	}
	est.VectorsToInsert = max(int64(len(s.changed))-deletes, 0)
	est.VectorsToDelete = deletes
	if cache == nil || !cache.has(prev.Graph.Key) {
		est.BytesRead += prev.Bytes()
		est.BlobGets += int64(1 + len(prev.Chunks))
	}
	est.BlobPuts++
	if est.VectorsToInsert > 0 {
		est.BlobPuts += (est.VectorsToInsert*vecBytes + indexChunkBytes - 1) / indexChunkBytes
	}
	slots := int64(prev.Vectors+prev.Tombstones+prev.Dropped) + est.VectorsToInsert
	est.BytesWritten += est.VectorsToInsert*vecBytes + int64(graphPerVector*float64(slots))
}

// Calibration of the index blobs: bytes per vector of a chunk beside its
// values, and per node of the graph beside its layer-0 links (for a first
// build; later ones scale the previous graph). Measured by
// TestEstimatePredictsTheCompactionItPrices.
const (
	chunkBytesPerVector = 0
	graphBytesPerM      = 6
)

// manifestBytes is the encoded size of m.
func manifestBytes(m *segment.Manifest) int64 {
	return manifestBytesFor(m, len(m.Blocks), len(m.Deltas))
}

// manifestBytesFor estimates the size of a manifest listing blocks blocks
// and deltas deltas: from base's encoding scaled by its entries when there
// is a base, else a fixed header and a typical entry.
func manifestBytesFor(base *segment.Manifest, blocks, deltas int) int64 {
	if base != nil {
		if b, err := json.MarshalIndent(base, "", "  "); err == nil {
			n := int64(len(base.Blocks) + len(base.Deltas))
			per := int64(manifestBytesPerEntry)
			if n > 0 {
				per = (int64(len(b)) - manifestHeaderBytes) / n
			}
			return manifestHeaderBytes + per*int64(blocks+deltas)
		}
	}
	return manifestHeaderBytes + manifestBytesPerEntry*int64(blocks+deltas)
}

// A manifest's header (version, offsets, index reference) and one entry
// (key, id range, counts, digest), in bytes, before the first version.
const (
	manifestHeaderBytes   = 1024
	manifestBytesPerEntry = 320
)

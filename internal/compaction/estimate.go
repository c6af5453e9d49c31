package compaction

import (
	"context"
	"fmt"
	"sort"

	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/jobtype"
	"github.com/compactorhq/compactor/internal/materialize"
	"github.com/compactorhq/compactor/internal/segment"
	"github.com/compactorhq/compactor/internal/vindex"
)

// Estimate reads the log slice the next compaction of collectionID would
// read (its ids only matter) and the current manifest, and counts the blocks
// that compaction would rewrite. Cost: one manifest read and a log read of
// at most MaxRecords records. Errors: the catalog's (ErrNotFound for an
// unknown collection) and the segment store's (a corrupt manifest).
func (c *Compactor) Estimate(ctx context.Context, collectionID string) (jobtype.Estimate, error) {
	coll, err := c.cat.GetCollection(ctx, collectionID)
	if err != nil {
		return jobtype.Estimate{}, fmt.Errorf("estimate %s: %w", collectionID, err)
	}
	end := min(coll.LogPosition, coll.CompactionOffset+int64(c.cfg.MaxRecords))
	est := jobtype.Estimate{OpRecords: max(0, end-coll.CompactionOffset)}
	if est.OpRecords == 0 {
		return est, nil
	}
	var blocks []segment.BlockRef
	var meanBytes int64
	var base *segment.Manifest
	if coll.ManifestKey != "" {
		m, err := c.seg.ReadManifest(ctx, coll.ManifestKey)
		if err != nil {
			return jobtype.Estimate{}, fmt.Errorf("estimate %s: read manifest: %w", collectionID, err)
		}
		base = m
		blocks = m.Blocks
		var bytes, records int64
		for _, b := range blocks {
			bytes, records = bytes+b.Bytes, records+b.Records
		}
		if records > 0 {
			meanBytes = bytes / records
		}
	}
	est.BlocksTotal = len(blocks)
	if est.Indexed = !coll.Index.Disabled; est.Indexed {
		est.IndexFullBuild, est.IndexFullBuildReason = fullBuildDue(coll, base)
	}
	touched := make([]bool, len(blocks))
	var outside int64
	for after := coll.CompactionOffset; after < end; {
		ops, err := c.cat.ReadLog(ctx, collectionID, after, end, c.cfg.BatchRecords)
		if err != nil {
			return jobtype.Estimate{}, fmt.Errorf("estimate %s: read log after offset %d: %w", collectionID, after, err)
		}
		if len(ops) == 0 {
			break // compacted meanwhile
		}
		for _, op := range ops {
			switch {
			case !est.Indexed:
			case op.Op == materialize.OpDelete:
				est.VectorsToDelete++
			case len(op.Embedding) > 0:
				est.VectorsToInsert++
			}
			// Blocks are sorted by MinID with disjoint ranges: the one that
			// may hold id is the last whose MinID <= id.
			i := sort.Search(len(blocks), func(i int) bool { return blocks[i].MinID > op.ID }) - 1
			if i >= 0 && op.ID <= blocks[i].MaxID {
				touched[i] = true
			} else {
				outside++
			}
		}
		after = ops[len(ops)-1].Offset
	}
	for i, t := range touched {
		if t {
			est.BlocksToRewrite++
			est.BytesToRewrite += blocks[i].Bytes
		}
	}
	est.BytesToRewrite += outside * meanBytes
	return est, nil
}

// fullBuildDue reports whether the next compaction of coll over base
// builds its vector index from every record, and why, by the rules of
// startIndex read from the manifest alone (a damaged index is found only
// when the job opens it).
func fullBuildDue(coll catalog.Collection, base *segment.Manifest) (bool, string) {
	if base == nil || base.Index == nil {
		return true, "the current version has no index"
	}
	ix, s := base.Index, coll.Index.WithDefaults()
	if ix.M != s.M || ix.EfConstruction != s.EfConstruction || ix.Distance != s.Distance.String() {
		return true, "the collection's index parameters differ from the index's"
	}
	slots := ix.Vectors + ix.Tombstones + ix.Dropped
	if slots > 0 && float64(ix.Tombstones+ix.Dropped) > vindex.RebuildFraction*float64(slots) {
		return true, fmt.Sprintf("tombstones and dropped slots are past %.0f %% of the graph", vindex.RebuildFraction*100)
	}
	return false, ""
}

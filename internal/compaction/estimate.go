package compaction

import (
	"context"
	"fmt"
	"sort"

	"github.com/compactorhq/compactor/internal/jobtype"
	"github.com/compactorhq/compactor/internal/segment"
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
	if coll.ManifestKey != "" {
		m, err := c.seg.ReadManifest(ctx, coll.ManifestKey)
		if err != nil {
			return jobtype.Estimate{}, fmt.Errorf("estimate %s: read manifest: %w", collectionID, err)
		}
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

package compaction

import (
	"context"
	"errors"
	"fmt"

	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/segment"
)

// GCResult holds the figures of one GC pass over a collection.
type GCResult struct {
	VersionsDeleted int
	segment.GCStats
}

// GC removes the segment versions of collectionID beyond the newest
// Config.VersionsToKeep (catalog rows first, so no reader picks them up
// again), then every blob of the collection that no retained version
// references and that is older than Config.GCGrace: superseded manifests and
// blocks, and the blocks of failed, cancelled or crashed compactions.
// Errors: catalog.ErrNotFound, storage errors (nothing is deleted from the
// blob store when a retained manifest cannot be read).
func (c *Compactor) GC(ctx context.Context, collectionID string) (_ GCResult, err error) {
	ctx, span := startSpan(ctx, "gc")
	defer func() { endSpan(span, err) }()
	versions, err := c.cat.ListVersions(ctx, collectionID)
	if err != nil {
		return GCResult{}, fmt.Errorf("gc %s: list versions: %w", collectionID, err)
	}
	coll, err := c.cat.GetCollection(ctx, collectionID)
	if err != nil {
		return GCResult{}, fmt.Errorf("gc %s: %w", collectionID, err)
	}
	var keep []string
	var drop []int64
	for i, v := range versions { // newest first
		if i < c.cfg.VersionsToKeep || v.Version == coll.SegmentVersion {
			keep = append(keep, v.ManifestKey)
		} else {
			drop = append(drop, v.Version)
		}
	}
	var res GCResult
	if len(drop) > 0 {
		if err := c.cat.DeleteVersions(ctx, collectionID, drop); err != nil {
			return res, fmt.Errorf("gc %s: delete %d versions: %w", collectionID, len(drop), err)
		}
		res.VersionsDeleted = len(drop)
	}
	st, err := c.seg.GC(ctx, collectionID, keep, c.cfg.GCGrace)
	res.GCStats = st
	if err != nil {
		return res, fmt.Errorf("gc %s: %w", collectionID, err)
	}
	return res, nil
}

// DeleteCollection deletes a collection from the catalog, then its blobs,
// and returns the row as it was. Errors: catalog.ErrNotFound; a blob store
// error after the catalog row is gone (the blobs are then orphans under a
// prefix no collection owns).
func (c *Compactor) DeleteCollection(ctx context.Context, collectionID string) (catalog.Collection, error) {
	coll, err := c.cat.DeleteCollection(ctx, collectionID)
	if err != nil {
		return coll, fmt.Errorf("delete collection %s: %w", collectionID, err)
	}
	if err := c.seg.DeleteCollection(ctx, collectionID); err != nil && !errors.Is(err, segment.ErrNotExist) {
		return coll, fmt.Errorf("delete blobs of collection %s: %w", collectionID, err)
	}
	return coll, nil
}

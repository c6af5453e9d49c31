package compaction

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/segment"
)

// MinGCGrace is the smallest accepted Config.GCGrace. The grace is the
// time GC waits after a segment version leaves the retained set before it
// deletes the version's blobs, so it is the longest a read may take on a
// replica that cannot see this process's pins (reads pin their version in
// process; replicas sharing the catalog do not see each other's pins). A
// read of MaxReadIDs ids over a slow blob store takes seconds, not minutes.
// It is also how old an orphan blob must be before GC deletes it when no
// compaction of the collection is known to be running.
const MinGCGrace = time.Minute

// GCResult holds the figures of one GC pass over a collection.
type GCResult struct {
	VersionsRetired int // versions that left the retained set in this pass
	VersionsDeleted int // versions retired for longer than the grace, deleted
	segment.GCStats
}

// GC collects the segment versions of collectionID that have left the
// retained set for longer than Config.GCGrace, in catalog time:
//
//  1. In one catalog transaction, every version beyond the newest
//     Config.VersionsToKeep that is not the current one is marked retired
//     (catalog.RetireVersions). A read only ever opens the current version,
//     so a version retired at time R has no new reader after R.
//  2. The manifests and blocks of versions retired at least GCGrace ago are
//     deleted, except blocks that a retained version shares, and except
//     versions a read or compaction of this process is still using (pins),
//     then their catalog rows.
//     When versions were retired, the log rows that only they needed are
//     purged (catalog.PurgeLog keeps the log after the oldest kept
//     version's compaction offset, for rollbacks).
//  3. Orphan blobs (referenced by no version row: left by failed, cancelled
//     or crashed compactions) older than GCGrace are deleted, unless a
//     compaction of the collection is running (in this process, or as a
//     RUNNING job row in the catalog): its blobs are orphans until it
//     commits.
//
// A read that opened version V at time O finishes before V's blobs go as
// long as it takes less than GCGrace, because V was retired after O. Errors:
// catalog.ErrNotFound, storage errors (nothing is deleted from the blob
// store when a retained manifest cannot be read).
func (c *Compactor) GC(ctx context.Context, collectionID string) (_ GCResult, err error) {
	ctx, span := startSpan(ctx, "gc")
	defer func() { endSpan(span, err) }()
	var res GCResult
	ret, err := c.cat.RetireVersions(ctx, collectionID, c.cfg.VersionsToKeep, c.cfg.GCGrace)
	if err != nil {
		return res, fmt.Errorf("gc %s: %w", collectionID, err)
	}
	res.VersionsRetired = ret.Retired
	if ret.Retired > 0 {
		// The oldest kept version moved up: its log rows may go.
		c.purgeLog(ctx, collectionID)
	}
	plan := segment.GCPlan{OrphanGrace: c.cfg.GCGrace}
	for _, v := range ret.Retained {
		plan.Keep = append(plan.Keep, v.ManifestKey)
	}
	pinned, compacting := c.pins.of(collectionID)
	var drop []int64
	for _, v := range ret.Expired {
		if pinned[v.ManifestKey] {
			plan.Keep = append(plan.Keep, v.ManifestKey)
			continue
		}
		plan.Expired = append(plan.Expired, v.ManifestKey)
		drop = append(drop, v.Version)
	}
	plan.SpareOrphans = compacting
	if !plan.SpareOrphans {
		running, err := c.cat.ListJobs(ctx, catalog.JobFilter{CollectionID: collectionID, States: []catalog.JobState{catalog.JobRunning}, Limit: 1})
		if err != nil {
			return res, fmt.Errorf("gc %s: list running jobs: %w", collectionID, err)
		}
		plan.SpareOrphans = len(running) > 0
	}
	st, err := c.seg.GC(ctx, collectionID, plan)
	res.GCStats = st
	if err != nil {
		return res, fmt.Errorf("gc %s: %w", collectionID, err)
	}
	// Rows last: a pass cut short leaves the rows, and the next pass
	// deletes what is left of their blobs.
	if len(drop) > 0 {
		if err := c.cat.DeleteVersions(ctx, collectionID, drop); err != nil {
			return res, fmt.Errorf("gc %s: delete %d expired versions: %w", collectionID, len(drop), err)
		}
		res.VersionsDeleted = len(drop)
	}
	return res, nil
}

// pins tracks what the reads and compactions of this process use, so that
// this process's GC never deletes it whatever the settings: manifest keys
// in use per collection (a read's version, a compaction's base) and the
// number of compactions in flight per collection. Safe for concurrent use.
type pins struct {
	mu         sync.Mutex
	manifests  map[string]map[string]int // collection id → manifest key → users
	compacting map[string]int            // collection id → compactions in flight
}

func newPins() *pins {
	return &pins{manifests: make(map[string]map[string]int), compacting: make(map[string]int)}
}

// pin marks manifestKey of collectionID in use ("" pins nothing) and, when
// compaction is set, a compaction of the collection in flight. The
// returned func releases both; call it once.
func (p *pins) pin(collectionID, manifestKey string, compaction bool) (release func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if manifestKey != "" {
		m := p.manifests[collectionID]
		if m == nil {
			m = make(map[string]int)
			p.manifests[collectionID] = m
		}
		m[manifestKey]++
	}
	if compaction {
		p.compacting[collectionID]++
	}
	return func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if manifestKey != "" {
			m := p.manifests[collectionID]
			if m[manifestKey]--; m[manifestKey] == 0 {
				delete(m, manifestKey)
			}
			if len(m) == 0 {
				delete(p.manifests, collectionID)
			}
		}
		if compaction {
			if p.compacting[collectionID]--; p.compacting[collectionID] == 0 {
				delete(p.compacting, collectionID)
			}
		}
	}
}

// of returns the pinned manifest keys of collectionID and whether a
// compaction of it is in flight.
func (p *pins) of(collectionID string) (map[string]bool, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	keys := make(map[string]bool, len(p.manifests[collectionID]))
	for k := range p.manifests[collectionID] {
		keys[k] = true
	}
	return keys, p.compacting[collectionID] > 0
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

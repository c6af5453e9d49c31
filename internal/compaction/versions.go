package compaction

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/google/uuid"

	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/materialize"
	"github.com/compactorhq/compactor/internal/segment"
)

// VersionInfo is one committed segment version as the version history
// shows it.
type VersionInfo struct {
	catalog.Version
	// Current: the collection's current version.
	Current bool
}

// ListVersions returns the version history of collectionID, newest first:
// every version row the catalog holds (the current one, those retained by
// --versions-to-keep, and retired ones GC has not collected yet, which are
// not Kept). Errors: catalog.ErrNotFound.
//
// The current version is the newest row: every commit, a rollback's too,
// takes the next number, and GC never deletes the current version's row.
func (c *Compactor) ListVersions(ctx context.Context, collectionID string) ([]VersionInfo, error) {
	vs, err := c.cat.ListVersions(ctx, collectionID)
	if err != nil {
		return nil, fmt.Errorf("list versions of %s: %w", collectionID, err)
	}
	out := make([]VersionInfo, len(vs))
	for i, v := range vs {
		out[i] = VersionInfo{Version: v, Current: i == 0}
	}
	return out, nil
}

// openVersion opens kept version of collectionID for a read of that
// version alone: its catalog row (it must be kept, not retired, at this
// moment, so that GC's grace covers the read), a pin that keeps this
// process's GC off it until release, and its manifest. The returned
// collection row describes the version: SegmentVersion, ManifestKey,
// RecordCount are the version's, and CompactionOffset and LogPosition its
// compaction offset (the read reflects the log up to there, no tail).
func (c *Compactor) openVersion(ctx context.Context, collectionID string, version int64) (catalog.Collection, *segment.Manifest, func(), error) {
	coll, err := c.cat.GetCollection(ctx, collectionID)
	if err != nil {
		return catalog.Collection{}, nil, nil, err
	}
	v, err := c.cat.GetVersion(ctx, collectionID, version)
	if err != nil {
		return catalog.Collection{}, nil, nil, err
	}
	release := c.pins.pin(collectionID, v.ManifestKey, false)
	m, err := c.seg.ReadManifestShared(ctx, v.ManifestKey)
	if err != nil {
		release()
		return catalog.Collection{}, nil, nil, fmt.Errorf("read manifest of version %d: %w", version, err)
	}
	coll.SegmentVersion, coll.ManifestKey, coll.RecordCount = v.Version, v.ManifestKey, v.RecordCount
	coll.CompactionOffset, coll.LogPosition = v.CompactionOffset, v.CompactionOffset
	return coll, m, release, nil
}

// versionGone turns a missing blob met by a read of a kept version into
// what it means: the version was retired and collected meanwhile (a
// *catalog.VersionNotFoundError, as if the read had started later), or,
// while the version is still kept, data loss naming the blob. Other errors
// pass through.
func (c *Compactor) versionGone(ctx context.Context, collectionID string, version int64, err error) error {
	var missing *segment.MissingError
	if err == nil || !errors.As(err, &missing) {
		return err
	}
	if _, verr := c.cat.GetVersion(ctx, collectionID, version); verr != nil {
		if errors.Is(verr, catalog.ErrNotFound) {
			return verr
		}
		return err
	}
	return missing.DataLoss()
}

// GetRecordsAt is GetRecords of one kept version alone: the records with
// the given ids as version holds them, without the log tail (so, without
// the writes after the version's compaction offset). The result's
// SegmentVersion is version and its LogPosition the version's compaction
// offset. Errors: catalog.ErrNotFound (no collection); a
// *catalog.VersionNotFoundError (matching catalog.ErrNotFound) naming the
// oldest kept version when version is not kept; catalog.ErrInvalidArgument
// for a version below 1 or more than MaxReadIDs ids; storage errors and
// damaged data as GetRecords.
func (c *Compactor) GetRecordsAt(ctx context.Context, collectionID string, version int64, ids []string) (ReadResult, error) {
	res, err := c.getRecordsAt(ctx, collectionID, version, ids)
	err = c.versionGone(ctx, collectionID, version, err)
	c.noteCorrupt("read", collectionID, err)
	if err != nil {
		return ReadResult{}, fmt.Errorf("get records of %s at version %d: %w", collectionID, version, err)
	}
	return res, nil
}

func (c *Compactor) getRecordsAt(ctx context.Context, collectionID string, version int64, ids []string) (ReadResult, error) {
	if len(ids) > MaxReadIDs {
		return ReadResult{}, fmt.Errorf("%d ids requested, the limit is %d: %w", len(ids), MaxReadIDs, catalog.ErrInvalidArgument)
	}
	coll, m, release, err := c.openVersion(ctx, collectionID, version)
	if err != nil {
		return ReadResult{}, err
	}
	defer release()
	ids = slices.Clone(ids)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	found, err := c.seg.Get(ctx, m, ids)
	if err != nil {
		return ReadResult{}, err
	}
	out := make([]materialize.Record, 0, len(found))
	for _, id := range ids {
		if r, ok := found[id]; ok {
			out = append(out, r)
		}
	}
	return result(coll, out, ""), nil
}

// ListRecordsAt is ListRecords of one kept version alone: up to limit of
// its records with id > after, in id order, and the id to pass as after
// for the next page ("" when none); no log tail. Errors as GetRecordsAt,
// and catalog.ErrInvalidArgument for a limit outside 1..MaxReadIDs.
func (c *Compactor) ListRecordsAt(ctx context.Context, collectionID string, version int64, after string, limit int) (ReadResult, error) {
	res, err := c.listRecordsAt(ctx, collectionID, version, after, limit)
	err = c.versionGone(ctx, collectionID, version, err)
	c.noteCorrupt("read", collectionID, err)
	if err != nil {
		return ReadResult{}, fmt.Errorf("list records of %s at version %d: %w", collectionID, version, err)
	}
	return res, nil
}

func (c *Compactor) listRecordsAt(ctx context.Context, collectionID string, version int64, after string, limit int) (ReadResult, error) {
	if limit <= 0 || limit > MaxReadIDs {
		return ReadResult{}, fmt.Errorf("page size %d is outside 1..%d: %w", limit, MaxReadIDs, catalog.ErrInvalidArgument)
	}
	coll, m, release, err := c.openVersion(ctx, collectionID, version)
	if err != nil {
		return ReadResult{}, err
	}
	defer release()
	// One record more than asked tells whether a next page exists.
	out := make([]materialize.Record, 0, limit+1)
	err = c.seg.Scan(ctx, m, after, func(r materialize.Record) bool {
		out = append(out, r)
		return len(out) <= limit
	})
	if err != nil {
		return ReadResult{}, err
	}
	if len(out) > limit {
		out = out[:limit]
		return result(coll, out, out[limit-1].ID), nil
	}
	return result(coll, out, ""), nil
}

// MaxRollbackReasonBytes bounds RollbackRequest.Reason and By.
const MaxRollbackReasonBytes = 1_024

// RollbackRequest asks for a rollback of a collection to a kept version.
type RollbackRequest struct {
	ToVersion int64  // the kept version whose segment becomes current again
	Reason    string // the operator's, kept in the version history
	By        string // who asks, as the caller names them
	Node      string // the node that runs it, named on its job
}

// RollbackResult is what a rollback did.
type RollbackResult struct {
	Collection catalog.Collection // the collection after the rollback
	// Version is the new version's row (RollbackOf = the version restored).
	Version catalog.Version
	// Replaced is the version that was current before.
	Replaced int64
	// JobID is the rollback's job (kind rollback, SUCCEEDED), which
	// records it in the job history.
	JobID string
	// Reread is how many operation records after the restored version's
	// compaction offset the next compaction reads again.
	Reread int64
}

// Rollback makes kept version req.ToVersion's segment current again, as a
// new version (the next number: numbers are never reused) whose manifest
// is a copy of that version's, listing the same blocks, deltas and vector
// index blobs under the new version number, and whose compaction offset is
// that version's. Every operation record appended after that offset is
// then the collection's backlog: reads apply it as the log tail, and the
// next compaction materializes it again, so the versions after
// req.ToVersion are undone without losing a write. It does not queue that
// compaction (the scheduler does, or a one-off; pause the collection first
// to keep it at the restored version).
//
// The rollback is recorded in the version history (the new version's
// RollbackOf, Reason and By) and in the job history, as a job of kind
// rollback finished in the same transaction (RollbackResult.JobID).
//
// It is fenced like a compaction's commit (catalog.CommitRollback: the
// compare-and-swap on the segment version and no job of the collection
// RUNNING), and GC keeps the shared blobs for as long as any kept version
// lists them. Errors: catalog.ErrNotFound (no collection); a
// *catalog.VersionNotFoundError naming the kept versions;
// catalog.ErrInvalidArgument (a version below 1, the current version, a
// reason over MaxRollbackReasonBytes); catalog.ErrFailedPrecondition (a job
// of the collection is running, naming it; the log after the version was
// purged); catalog.ErrConflict (a commit won the race: retry); storage
// errors. After an error nothing changed and the manifest copy is removed.
func (c *Compactor) Rollback(ctx context.Context, collectionID string, req RollbackRequest) (_ RollbackResult, err error) {
	ctx, span := startSpan(ctx, "rollback")
	defer func() { endSpan(span, err) }()
	fail := func(err error) (RollbackResult, error) {
		return RollbackResult{}, fmt.Errorf("roll back %s to version %d: %w", collectionID, req.ToVersion, err)
	}
	switch {
	case req.ToVersion < 1:
		return fail(fmt.Errorf("version %d: versions start at 1: %w", req.ToVersion, catalog.ErrInvalidArgument))
	case len(req.Reason) > MaxRollbackReasonBytes:
		return fail(fmt.Errorf("reason of %d bytes, more than %d: %w", len(req.Reason), MaxRollbackReasonBytes, catalog.ErrInvalidArgument))
	case len(req.By) > MaxRollbackReasonBytes:
		return fail(fmt.Errorf("operator name of %d bytes, more than %d: %w", len(req.By), MaxRollbackReasonBytes, catalog.ErrInvalidArgument))
	}
	coll, err := c.cat.GetCollection(ctx, collectionID)
	if err != nil {
		return fail(err)
	}
	to, err := c.cat.GetVersion(ctx, collectionID, req.ToVersion)
	if err != nil {
		return fail(err)
	}
	if to.Version == coll.SegmentVersion {
		return fail(fmt.Errorf("version %d is already the current version: %w", to.Version, catalog.ErrInvalidArgument))
	}
	// Until the end, this process's GC keeps the restored version and the
	// manifest copy (an orphan until the commit).
	unpin := c.pins.pin(collectionID, to.ManifestKey, true)
	defer unpin()
	m, err := c.seg.ReadManifest(ctx, to.ManifestKey)
	if err != nil {
		return fail(fmt.Errorf("read manifest of version %d: %w", to.Version, c.versionGone(ctx, collectionID, to.Version, err)))
	}
	cp := *m
	cp.Version = coll.SegmentVersion + 1
	cp.CreatedAt = c.seg.Now().UTC().Round(0) // the clock of every manifest the store writes
	w := c.seg.NewWriter(collectionID, m)
	key, _, err := w.WriteManifest(ctx, &cp)
	if err != nil {
		c.abortWriter(ctx, w, collectionID)
		return fail(classifyWrite(ctx, err))
	}
	rb := catalog.Rollback{CollectionID: collectionID, BaseVersion: coll.SegmentVersion, NewVersion: cp.Version, ToVersion: to.Version,
		FromManifestKey: to.ManifestKey, ManifestKey: key, Reason: strings.TrimSpace(req.Reason), By: strings.TrimSpace(req.By),
		JobID: uuid.NewString(), Node: req.Node}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.CommitTimeout)
	defer cancel()
	if err := c.cat.CommitRollback(cctx, rb); err != nil {
		if c.committed(cctx, err, collectionID, rb.NewVersion, key) {
			c.logger.Warn("rollback commit reported an error but took effect", "collection", collectionID, "version", rb.NewVersion, "err", err)
		} else {
			c.abortWriter(ctx, w, collectionID)
			if cctx.Err() != nil {
				err = fmt.Errorf("not done within --commit-timeout %s: %w", c.cfg.CommitTimeout, err)
			}
			return fail(err)
		}
	}
	after, err := c.cat.GetCollection(cctx, collectionID)
	if err != nil {
		return fail(fmt.Errorf("read the collection after the rollback: %w", err))
	}
	v, err := c.cat.GetVersion(cctx, collectionID, rb.NewVersion)
	if err != nil {
		return fail(fmt.Errorf("read the version the rollback made: %w", err))
	}
	c.logger.Info("rolled back", "collection", collectionID, "to_version", to.Version, "version", rb.NewVersion,
		"replaced", coll.SegmentVersion, "compaction_offset", to.CompactionOffset, "backlog", after.Backlog(), "by", rb.By, "reason", rb.Reason)
	return RollbackResult{Collection: after, Version: v, Replaced: coll.SegmentVersion, Reread: max(0, coll.CompactionOffset-to.CompactionOffset), JobID: rb.JobID}, nil
}

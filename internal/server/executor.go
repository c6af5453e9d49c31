package server

import (
	"context"
	"errors"
	"fmt"

	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/compaction"
	"github.com/compactorhq/compactor/internal/jobtype"
	"github.com/compactorhq/compactor/internal/manager"
	"github.com/compactorhq/compactor/internal/segment"
)

// executor adapts a compaction.Compactor to the manager's Executor (and its
// Estimator and Throttler).
type executor struct {
	c        *compaction.Compactor
	throttle *segment.Throttle // caps the bytes per second compactions write
}

// SetMaxThroughput implements manager.Throttler.
func (e executor) SetMaxThroughput(bytesPerSecond int64) { e.throttle.SetLimit(bytesPerSecond) }

// Prepare implements manager.Executor: a compaction up to its manifest.
func (e executor) Prepare(ctx context.Context, j catalog.Job, progress func(manager.Progress)) (manager.Prepared, error) {
	p, err := e.c.Prepare(ctx, j.CollectionID, compaction.Options{Progress: progress, JobID: j.ID})
	return prepared{p}, err
}

// prepared adapts a compaction.Prepared to the manager's Prepared.
type prepared struct{ p *compaction.Prepared }

func (p prepared) Outcome() manager.Outcome { return p.p.Result().Outcome() }

// Commit writes the job's row j in the commit transaction.
func (p prepared) Commit(ctx context.Context, j catalog.Job) error { return p.p.Commit(ctx, &j) }

func (p prepared) Abort(ctx context.Context) error { return p.p.Abort(ctx) }

// Transient: compaction's transient errors, and a full store (catalog or
// blob store), which says nothing about the collection: the job is retried
// with backoff and never dead-letters the collection.
func (e executor) Transient(err error) bool {
	return compaction.IsTransient(err) || errors.Is(err, catalog.ErrStorageFull)
}

func (e executor) GC(ctx context.Context, collectionID string) error {
	_, err := e.c.GC(ctx, collectionID)
	return err
}

// Estimate implements manager.Estimator for plan previews.
func (e executor) Estimate(ctx context.Context, collectionID string) (manager.Estimate, error) {
	return e.c.Estimate(ctx, collectionID)
}

// rebuildExecutor runs the jobs of kind index_rebuild on a
// compaction.Compactor: a fresh vector index of the current version.
type rebuildExecutor struct{ executor }

// Prepare implements manager.Executor: the new index and manifest, up to
// the commit.
func (e rebuildExecutor) Prepare(ctx context.Context, j catalog.Job, progress func(manager.Progress)) (manager.Prepared, error) {
	params, err := jobtype.DecodeIndexRebuildParams(j.Params)
	if err != nil {
		return nil, fmt.Errorf("job %s: %w", j.ID, err)
	}
	p, err := e.c.PrepareRebuild(ctx, j.CollectionID, compaction.RebuildOptions{Params: params, Progress: progress, JobID: j.ID})
	return prepared{p}, err
}

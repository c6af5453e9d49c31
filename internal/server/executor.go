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
	// collections reads a job's collection for its throughput share.
	collections interface {
		GetCollection(ctx context.Context, id string) (catalog.Collection, error)
	}
}

// SetMaxThroughput implements manager.Throttler.
func (e executor) SetMaxThroughput(bytesPerSecond int64) { e.throttle.SetLimit(bytesPerSecond) }

// Prepare implements manager.Executor: a compaction up to its manifest.
// Its writes count toward the throttle's writers, and a collection with a
// throughput share writes at most that share of the cap while another
// compaction writes on this node.
func (e executor) Prepare(ctx context.Context, j catalog.Job, progress func(manager.Progress)) (manager.Prepared, error) {
	leave := e.throttle.Enter()
	defer leave()
	p, err := e.c.Prepare(e.shareContext(ctx, j), j.CollectionID, compaction.Options{Progress: progress, JobID: j.ID,
		OnEstimate: func(est jobtype.Estimate) { progress(manager.Progress{Estimate: &est}) }})
	return prepared{p}, err
}

// EstimatesInline implements manager.InlineEstimator: a compaction prices
// itself from the log slice it reads (compaction.Options.OnEstimate).
func (e executor) EstimatesInline() bool { return true }

// shareContext is ctx carrying the throughput share of job j's collection,
// if it has one. A failed read is the compaction's to report (it reads the
// collection first): the job then runs without a share.
func (e executor) shareContext(ctx context.Context, j catalog.Job) context.Context {
	if e.collections == nil {
		return ctx
	}
	c, err := e.collections.GetCollection(ctx, j.CollectionID)
	if err != nil {
		return ctx
	}
	return e.throttle.WithShare(ctx, c.Policy.ThroughputShare)
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

// Classify implements manager.Classifier: compaction's classes
// (compaction.Classify), a full store included as infrastructure.
func (e executor) Classify(err error) jobtype.FailureClass { return compaction.Classify(err) }

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

// EstimatesInline implements manager.InlineEstimator: a rebuild is
// estimated before it runs.
func (rebuildExecutor) EstimatesInline() bool { return false }

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

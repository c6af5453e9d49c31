package server

import (
	"context"
	"errors"

	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/compaction"
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

func outcomeOf(r compaction.Result) manager.Outcome {
	return manager.Outcome{
		OffsetStart:    r.OffsetStart,
		OffsetEnd:      r.OffsetEnd,
		RecordsRead:    r.RecordsRead,
		RecordsWritten: r.RecordsWritten,
		BytesWritten:   r.BytesWritten,
		VersionBefore:  r.VersionBefore,
		VersionAfter:   r.VersionAfter,
		Remaining:      r.Remaining,
		Note:           r.Note,
	}
}

// Prepare implements manager.Executor: a compaction up to its manifest.
func (e executor) Prepare(ctx context.Context, j catalog.Job, progress func(manager.Progress)) (manager.Prepared, error) {
	p, err := e.c.Prepare(ctx, j.CollectionID, compaction.Options{
		Progress: func(p compaction.Progress) {
			progress(manager.Progress{Phase: p.Phase, RecordsRead: p.RecordsRead, RecordsTotal: p.RecordsTotal, BytesWritten: p.BytesWritten,
				BlocksWritten: int64(p.BlocksWritten), BlocksTotal: int64(p.BlocksTotal), Planned: true, OffsetStart: p.OffsetStart, OffsetEnd: p.OffsetEnd, VersionBefore: p.VersionBefore})
		},
	})
	return prepared{p}, err
}

// prepared adapts a compaction.Prepared to the manager's Prepared.
type prepared struct{ p *compaction.Prepared }

func (p prepared) Outcome() manager.Outcome { return outcomeOf(p.p.Result()) }

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
	x, err := e.c.Estimate(ctx, collectionID)
	if err != nil {
		return manager.Estimate{}, err
	}
	return manager.Estimate{Records: x.Records, BlocksTotal: x.BlocksTotal, BlocksToRewrite: x.BlocksToRewrite, BytesToRewrite: x.BytesToRewrite}, nil
}

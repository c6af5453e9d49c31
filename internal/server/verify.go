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

// verifyExecutor runs the jobs of kind verify on a compaction.Compactor: a
// re-read of a kept version, optionally replayed from the log. It commits
// nothing. scrub caps the bytes per second that the scrub's jobs read
// (--scrub-max-throughput); an operator's verify job reads at full speed.
type verifyExecutor struct {
	executor
	scrub *segment.Throttle
}

// EstimatesInline implements manager.InlineEstimator: a verification is
// estimated before it runs.
func (verifyExecutor) EstimatesInline() bool { return false }

// Prepare implements manager.Executor: the whole verification. A version
// that fails it is the job's error (a *segment.VerificationError, not
// transient); the Prepared it returns otherwise has nothing to commit and
// its note says what was checked.
func (e verifyExecutor) Prepare(ctx context.Context, j catalog.Job, progress func(manager.Progress)) (manager.Prepared, error) {
	params, err := jobtype.DecodeVerifyParams(j.Params)
	if err != nil {
		return nil, fmt.Errorf("job %s: %w", j.ID, err)
	}
	phase := compaction.VerifyPhaseVerify
	if params.Scrub {
		phase = compaction.VerifyPhaseScrub
	}
	p := manager.Progress{Phase: jobtype.PhaseVerifying}
	progress(p)
	res, err := e.c.Verify(ctx, j.CollectionID, compaction.VerifyOptions{
		Version: params.Version, Replay: params.Replay, Phase: phase,
		OnManifest: func(n int) {
			p.BlocksTotal = int64(n)
			progress(p)
		},
		OnBlob: func(ctx context.Context, kind, _ string, n int64) error {
			if kind != segment.KindManifest {
				p.BlocksWritten++
				p.BlocksTotal = max(p.BlocksTotal, p.BlocksWritten)
				progress(p)
			}
			if params.Scrub {
				return e.scrub.Wait(ctx, n)
			}
			return nil
		},
		OnLog: func(read, total int64) {
			p.Phase, p.OpRecordsRead, p.OpRecordsTotal = jobtype.PhaseReplaying, read, total
			progress(p)
		},
	})
	out := verified{res: res}
	if err != nil {
		return out, err
	}
	return out, nil
}

// Classify implements manager.Classifier: a version that fails its
// verification is damaged stored data (jobtype.FailureData), which the
// manager answers with a repair, not a dead-letter count; other errors
// are classified as a compaction's.
func (e verifyExecutor) Classify(err error) jobtype.FailureClass {
	if errors.Is(err, segment.ErrVerification) {
		return jobtype.FailureData
	}
	return e.executor.Classify(err)
}

// verified is a verify job's end: nothing to commit.
type verified struct{ res compaction.VerifyResult }

func (v verified) Outcome() manager.Outcome {
	o := manager.Outcome{VersionBefore: v.res.Version, VersionAfter: v.res.Version, OpRecordsRead: v.res.OpRecordsRead,
		OffsetStart: v.res.ReplayOffsets[0], OffsetEnd: v.res.ReplayOffsets[1]}
	if v.res.ManifestKey != "" && len(v.res.Problems) == 0 {
		o.Note = v.res.Note()
	}
	return o
}

func (verified) Commit(context.Context, catalog.Job) error {
	return fmt.Errorf("a verify job commits nothing")
}

func (verified) Abort(context.Context) error { return nil }

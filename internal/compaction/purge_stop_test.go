package compaction

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/compactorhq/compactor/internal/materialize"
)

// blockingPurge is a catalog whose log purge runs until its context ends,
// as the purge of a very large compaction would, and reports each call.
type blockingPurge struct {
	Catalog
	started chan struct{}
	ended   chan error
}

func (b blockingPurge) PurgeLog(ctx context.Context, _ string) (int64, error) {
	b.started <- struct{}{}
	<-ctx.Done()
	b.ended <- ctx.Err()
	return 0, ctx.Err()
}

// StopPurges ends a running log purge at once (a shutdown does not wait for
// the purge of a large compaction) and starts no new one afterwards; the
// compaction that started it is unaffected.
func TestStopPurgesEndsARunningPurge(t *testing.T) {
	e := newEnv(t, envConfig{maxRecords: 1000, batchRecords: 100, maxBlock: 64, minBlock: 16})
	// The purge's own deadline, past the wait below: a purge that
	// StopPurges does not end fails the test at the wait, and its cleanup
	// (WaitPurges) then ends by this deadline instead of the default's.
	e.comp.cfg.CommitTimeout = 2 * time.Minute
	bp := blockingPurge{Catalog: e.comp.cat, started: make(chan struct{}, 2), ended: make(chan error, 2)}
	e.comp.cat = bp
	var ops []materialize.OperationRecord
	for i := range 50 {
		ops = append(ops, materialize.OperationRecord{Op: materialize.OpUpsert, ID: fmt.Sprintf("id-%03d", i), Embedding: emb(float32(i))})
	}
	e.push(ops...)
	e.compact()
	<-bp.started // the commit's purge runs, and would run until its deadline
	e.comp.StopPurges()
	waited := make(chan struct{})
	go func() { e.comp.WaitPurges(); close(waited) }()
	select {
	case <-waited:
	case <-time.After(time.Minute):
		t.Fatal("WaitPurges did not return after StopPurges")
	}
	if err := <-bp.ended; !errors.Is(err, context.Canceled) {
		t.Fatalf("the purge ended with %v, want its context canceled by StopPurges", err)
	}
	e.comp.purgeLog(e.ctx, e.id)
	e.comp.WaitPurges()
	select {
	case <-bp.started:
		t.Fatal("a purge started after StopPurges")
	default:
	}
	e.comp.purgeMu.Lock()
	running := len(e.comp.purges)
	e.comp.purgeMu.Unlock()
	if running != 0 {
		t.Fatalf("%d purges registered after StopPurges", running)
	}
	e.check("after the stopped purge")
}

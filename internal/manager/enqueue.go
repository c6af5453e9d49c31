package manager

import (
	"context"
	"sync"
	"time"

	"github.com/compactorhq/compactor/internal/audit"
	"github.com/compactorhq/compactor/internal/catalog"
)

// maxEnqueueBatch bounds the Compact calls written in one transaction.
const maxEnqueueBatch = 512

// enqueuer writes the jobs of concurrent Compact calls in shared
// transactions (a group commit): on SQLite, where writes are serial and
// each commit is an fsync, a thousand concurrent calls cost a handful of
// commits instead of a thousand. There is no goroutine of its own: the
// first caller to find no write in flight leads, writing every call
// pending (its own included); calls that arrive meanwhile wait, and when
// the write ends one of them leads the next. Each call stays all or
// nothing (catalog.EnqueueJobs). It owns pending and busy, under mu.
type enqueuer struct {
	store interface {
		EnqueueJobs(ctx context.Context, calls []catalog.EnqueueCall) ([]catalog.EnqueueOutcome, error)
	}
	timeout time.Duration // Config.PersistTimeout

	mu      sync.Mutex
	pending []*enqueueWait
	busy    bool // a leader is writing
}

// enqueueWait is one call waiting in the enqueuer.
type enqueueWait struct {
	call catalog.EnqueueCall
	out  catalog.EnqueueOutcome
	done chan struct{} // closed when out is set
	lead chan struct{} // receives once when this call must lead
}

// enqueue writes call, batched with the concurrent ones. A caller whose
// ctx ends before its call is taken into a write gets ctx's error and
// nothing is enqueued; once taken, the write (bounded by
// Config.PersistTimeout) completes and its result is returned.
//
// The actor ctx carries (audit.ActorFrom: the principal of an RPC or a
// page action), when the call names none, becomes the call's Actor (an
// audit event per job, in the enqueue's transaction) and the TriggeredBy of
// its requests that name no one; without an actor (the scheduler, the
// scrub) nothing is audited.
func (e *enqueuer) enqueue(ctx context.Context, call catalog.EnqueueCall) catalog.EnqueueOutcome {
	if actor, ok := audit.ActorFrom(ctx); ok && call.Actor == nil {
		call.Actor = &actor
		reqs := make([]catalog.JobRequest, len(call.Requests))
		for i, r := range call.Requests {
			if r.TriggeredBy == "" {
				r.TriggeredBy = actor.Name
			}
			reqs[i] = r
		}
		call.Requests = reqs
	}
	w := &enqueueWait{call: call, done: make(chan struct{}), lead: make(chan struct{}, 1)}
	e.mu.Lock()
	e.pending = append(e.pending, w)
	if !e.busy {
		e.busy = true
		e.mu.Unlock()
		e.lead(ctx)
		<-w.done
		return w.out
	}
	e.mu.Unlock()
	select {
	case <-w.done:
		return w.out
	case <-w.lead:
		e.lead(ctx)
		<-w.done
		return w.out
	case <-ctx.Done():
	}
	e.mu.Lock()
	select {
	case <-w.lead:
		// Chosen to lead as ctx ended: lead anyway, or the calls behind
		// would wait for ever.
		e.mu.Unlock()
		e.lead(ctx)
		<-w.done
		return w.out
	default:
	}
	for i, p := range e.pending {
		if p == w {
			e.pending = append(e.pending[:i], e.pending[i+1:]...)
			e.mu.Unlock()
			return catalog.EnqueueOutcome{Err: ctx.Err()}
		}
	}
	e.mu.Unlock()
	<-w.done // in a write already: its outcome is the truth
	return w.out
}

// lead writes one batch of pending calls, then hands the lead to the next
// pending call, if any.
func (e *enqueuer) lead(ctx context.Context) {
	e.mu.Lock()
	n := min(len(e.pending), maxEnqueueBatch)
	batch := e.pending[:n:n]
	e.pending = append([]*enqueueWait(nil), e.pending[n:]...)
	e.mu.Unlock()

	calls := make([]catalog.EnqueueCall, len(batch))
	for i, w := range batch {
		calls[i] = w.call
	}
	// Detached from the leader's ctx: the batch holds other callers' calls.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.timeout)
	outs, err := e.store.EnqueueJobs(wctx, calls)
	if err != nil && len(calls) > 1 {
		// The batch failed as a whole (e.g. a race with another replica
		// on one collection): each call alone, so that one call's failure
		// stays its own.
		outs, err = make([]catalog.EnqueueOutcome, len(calls)), nil
		for i, call := range calls {
			one, cerr := e.store.EnqueueJobs(wctx, []catalog.EnqueueCall{call})
			if cerr != nil {
				outs[i] = catalog.EnqueueOutcome{Err: cerr}
				continue
			}
			outs[i] = one[0]
		}
	}
	cancel()
	for i, w := range batch {
		if err != nil {
			w.out = catalog.EnqueueOutcome{Err: err}
		} else {
			w.out = outs[i]
		}
		close(w.done)
	}

	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.pending) == 0 {
		e.busy = false
		return
	}
	e.pending[0].lead <- struct{}{}
}

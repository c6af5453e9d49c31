package segment

import (
	"context"
	"runtime"
	"sync"

	"github.com/compactorhq/compactor/internal/materialize"
)

// blockSink receives the final blocks of a new version in manifest order:
// reused base blocks by reference, and runs of records that a bounded pool
// of encoders encodes and puts concurrently. The manifest keeps the order
// of arrival whatever order the puts finish in; at most the pool's size of
// blocks are in flight (the producer waits for a free encoder), so memory
// stays bounded. With one encoder, blocks are encoded and put on the
// calling goroutine, one after the other.
type blockSink struct {
	ctx     context.Context
	cancel  context.CancelFunc
	w       *Writer
	onBlock func(int64)
	slots   []*sinkSlot
	// reported is the number of slots whose completion onBlock has seen.
	reported int
	free     chan struct{} // one token per idle encoder
	wg       sync.WaitGroup
	mu       sync.Mutex
	err      error // the first failure of an encoder
}

// sinkSlot is one block of the new manifest.
type sinkSlot struct {
	ref    BlockRef
	reused bool
	done   chan struct{} // closed when ref is known (or the put failed)
}

func newBlockSink(ctx context.Context, w *Writer, encoders int, onBlock func(int64)) *blockSink {
	if encoders <= 0 {
		encoders = runtime.GOMAXPROCS(0)
	}
	ctx, cancel := context.WithCancel(ctx)
	s := &blockSink{ctx: ctx, cancel: cancel, w: w, onBlock: onBlock, free: make(chan struct{}, encoders)}
	for range encoders {
		s.free <- struct{}{}
	}
	return s
}

// reuse appends a base block, by reference.
func (s *blockSink) reuse(ref BlockRef) error {
	done := make(chan struct{})
	close(done)
	s.slots = append(s.slots, &sinkSlot{ref: ref, reused: true, done: done})
	return s.report()
}

// write appends a block of recs (sorted, unique, non-empty; not modified
// afterwards), encoded and put by a free encoder. It waits for one, and
// returns the first failure of any encoder so far.
func (s *blockSink) write(recs []materialize.Record) error {
	if err := s.failed(); err != nil {
		return err
	}
	sl := &sinkSlot{done: make(chan struct{})}
	s.slots = append(s.slots, sl)
	if cap(s.free) == 1 {
		// One encoder: on this goroutine (no hand-off), as in Write.
		ref, err := s.w.putBlock(s.ctx, recs)
		sl.ref = ref
		close(sl.done)
		if err != nil {
			s.fail(err)
			return err
		}
		return s.report()
	}
	select {
	case <-s.free:
	case <-s.ctx.Done():
		close(sl.done)
		if err := s.failed(); err != nil {
			return err
		}
		return s.ctx.Err()
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer func() { s.free <- struct{}{} }()
		ref, err := s.w.putBlock(s.ctx, recs)
		sl.ref = ref
		close(sl.done)
		if err != nil {
			s.fail(err)
		}
	}()
	if err := s.report(); err != nil {
		return err
	}
	return s.failed()
}

// report calls onBlock for the blocks written, in manifest order, that
// have completed since the last call.
func (s *blockSink) report() error {
	for ; s.reported < len(s.slots); s.reported++ {
		sl := s.slots[s.reported]
		select {
		case <-sl.done:
		default:
			return nil
		}
		if !sl.reused && sl.ref.Key != "" && s.onBlock != nil {
			s.onBlock(sl.ref.Bytes)
		}
	}
	return nil
}

func (s *blockSink) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		s.err = err
		s.cancel()
	}
}

func (s *blockSink) failed() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// wait waits for every encoder and returns the slots in manifest order,
// or the first failure.
func (s *blockSink) wait() ([]*sinkSlot, error) {
	s.wg.Wait()
	defer s.cancel()
	if err := s.failed(); err != nil {
		return nil, err
	}
	if err := s.report(); err != nil {
		return nil, err
	}
	return s.slots, nil
}

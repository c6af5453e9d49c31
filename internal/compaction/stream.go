package compaction

import (
	"context"
	"fmt"
	"iter"
	"sync"

	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/segment"
)

// logBatch is one batch of the log slice, read ahead by readRuns' reader.
type logBatch struct {
	entries []opEntry
	size    int64 // bytes the entries hold
	last    int64 // offset of the last entry
	err     error
}

// readRuns reads the log rows (after, end] of collectionID in batches of
// Config.BatchRecords into runs: a reader goroutine fetches batch k+1 while
// this goroutine adds batch k to the current run, sorted and kept or spilled
// each time it reaches a quarter of the runs' budget. ctx is checked between
// batches; onBatch is called with the number of records of each batch.
func (c *Compactor) readRuns(ctx context.Context, collectionID string, after, end int64, runs *runSet, onBatch func(n int)) error {
	return c.readRunsFrom(ctx, c.cat.ScanLog, collectionID, after, end, runs, onBatch)
}

// readRunsFrom is readRuns reading the log with scan (Catalog.ScanLog, or
// ScanKeptLog for a slice already compacted).
func (c *Compactor) readRunsFrom(ctx context.Context, scan func(ctx context.Context, id string, after, upTo int64, limit int, fn func(offset int64, record []byte) error) (int, error),
	collectionID string, after, end int64, runs *runSet, onBatch func(n int)) error {
	rctx, stop := context.WithCancel(ctx)
	batches := make(chan logBatch, 1)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(batches)
		var a arena
		for from := after; from < end; {
			b := logBatch{entries: make([]opEntry, 0, c.cfg.BatchRecords)}
			var derr error
			_, err := scan(rctx, collectionID, from, end, c.cfg.BatchRecords, func(off int64, rec []byte) error {
				e, err := newEntry(&a, off, rec)
				if err != nil {
					derr = err
					return err
				}
				b.entries = append(b.entries, e)
				b.size += int64(len(rec)) + entryBytes
				return nil
			})
			switch {
			case derr != nil:
				b.err = fmt.Errorf("read log after offset %d: %w", from, derr)
			case err != nil:
				b.err = fmt.Errorf("read log after offset %d: %w", from, err)
			case len(b.entries) == 0:
				// Another compaction committed since the snapshot: a lost
				// race, not a damaged collection.
				b.err = fmt.Errorf("log offsets (%d, %d] were compacted meanwhile: %w", from, end, catalog.ErrConflict)
			default:
				b.last = b.entries[len(b.entries)-1].off
				from = b.last
			}
			select {
			case batches <- b:
			case <-rctx.Done():
				return
			}
			if b.err != nil {
				return
			}
		}
	}()
	defer func() {
		stop()
		for range batches {
		}
		wg.Wait()
	}()

	runLimit := max(runs.budget/4, 1)
	var (
		run  []opEntry
		size int64
		from = after
	)
	for {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("read log after offset %d: %w", from, err)
		}
		b, ok := <-batches
		if !ok {
			break
		}
		if b.err != nil {
			return b.err
		}
		run = append(run, b.entries...)
		size += b.size
		from = b.last
		if size >= runLimit {
			if err := runs.add(run, size); err != nil {
				return err
			}
			run, size = nil, 0
		}
		onBatch(len(b.entries))
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("read log after offset %d: %w", from, err)
	}
	if len(run) > 0 {
		return runs.add(run, size)
	}
	return nil
}

// changeBatch is a batch of changes handed from the merge to the writer.
type changeBatch struct {
	changes []segment.Change
	err     error
}

// changesOf merges runs into changes (one per record id, its operation
// records decoded) on a goroutine of its own, a few hundred changes ahead
// of the writer that consumes them, so merging and decoding overlap with
// materializing and encoding.
func changesOf(ctx context.Context, runs *runSet) iter.Seq2[segment.Change, error] {
	return func(yield func(segment.Change, error) bool) {
		const batch = 256
		pctx, stop := context.WithCancel(ctx)
		ch := make(chan changeBatch, 4)
		done := make(chan struct{})
		go func() {
			defer close(done)
			defer close(ch)
			send := func(b changeBatch) bool {
				select {
				case ch <- b:
					return true
				case <-pctx.Done():
					return false
				}
			}
			cur := make([]segment.Change, 0, batch)
			ok := true
			runs.changes(func(c segment.Change, err error) bool {
				if err != nil {
					ok = false
					send(changeBatch{err: err})
					return false
				}
				cur = append(cur, c)
				if len(cur) == batch {
					if !send(changeBatch{changes: cur}) {
						ok = false
						return false
					}
					cur = make([]segment.Change, 0, batch)
				}
				return true
			})
			if ok && len(cur) > 0 {
				send(changeBatch{changes: cur})
			}
		}()
		defer func() {
			stop()
			for range ch {
			}
			<-done
		}()
		for b := range ch {
			if b.err != nil {
				yield(segment.Change{}, b.err)
				return
			}
			for _, c := range b.changes {
				if !yield(c, nil) {
					return
				}
			}
		}
	}
}

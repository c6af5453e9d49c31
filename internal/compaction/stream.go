package compaction

import (
	"context"
	"fmt"
	"iter"
	"sync"

	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/segment"
)

// logBatch is one batch of the log slice, read ahead by logBatches' readers.
type logBatch struct {
	entries []opEntry
	size    int64 // bytes the entries hold
	last    int64 // offset of the last entry
	err     error
}

// logReaders is how many goroutines read a log slice at once, each on a
// read connection of its own: the catalog's row decoding, most of the CPU
// of reading the log, runs on both cores instead of one.
const logReaders = 2

// scanFunc is Catalog.ScanLog or Catalog.ScanKeptLog.
type scanFunc func(ctx context.Context, id string, after, upTo int64, limit int, fn func(offset int64, record []byte) error) (int, error)

// logBatches reads the log rows (after, end] of collectionID with scan and
// yields them in offset order, one batch per range of Config.BatchRecords
// offsets (the rows of a slice are dense in offsets). logReaders goroutines
// read the ranges round-robin, each at most two ranges ahead of the
// consumer, so memory stays at a few batches. Each entry's record is a copy
// (arena memory) the consumer may keep. A batch with err set is the last
// one yielded: a failure to read or decode, or catalog.ErrConflict when a
// range holds no row (another compaction committed since the snapshot: the
// rows at or below its offset are skipped). The readers stop when the
// consumer stops or ctx ends.
func (c *Compactor) logBatches(ctx context.Context, scan scanFunc, collectionID string, after, end int64) iter.Seq[logBatch] {
	return func(yield func(logBatch) bool) {
		batch := int64(c.cfg.BatchRecords)
		ranges := (end - after + batch - 1) / batch
		if ranges <= 0 {
			return
		}
		rctx, stop := context.WithCancel(ctx)
		readers := int(min(int64(logReaders), ranges))
		out := make([]chan logBatch, readers)
		var wg sync.WaitGroup
		for r := range readers {
			out[r] = make(chan logBatch, 1)
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer close(out[r])
				var a arena
				for k := int64(r); k < ranges; k += int64(readers) {
					from, upTo := after+k*batch, min(after+(k+1)*batch, end)
					b := logBatch{entries: make([]opEntry, 0, upTo-from)}
					var derr error
					_, err := scan(rctx, collectionID, from, upTo, 0, func(off int64, rec []byte) error {
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
						b.err = fmt.Errorf("log offsets (%d, %d] were compacted meanwhile: %w", from, end, catalog.ErrConflict)
					default:
						b.last = b.entries[len(b.entries)-1].off
					}
					select {
					case out[r] <- b:
					case <-rctx.Done():
						return
					}
					if b.err != nil {
						return
					}
				}
			}()
		}
		defer func() {
			stop()
			for _, ch := range out {
				for range ch {
				}
			}
			wg.Wait()
		}()
		for k := range ranges {
			b, ok := <-out[k%int64(readers)]
			if !ok {
				return // ctx ended
			}
			if !yield(b) || b.err != nil {
				return
			}
		}
	}
}

// readRuns reads the log rows (after, end] of collectionID (logBatches)
// into runs: this goroutine adds each batch to the current run, sorted and
// kept or spilled each time it reaches a quarter of the runs' budget, while
// the readers fetch the next ones. ctx is checked between batches; onBatch
// is called with the number of records of each batch.
func (c *Compactor) readRuns(ctx context.Context, collectionID string, after, end int64, runs *runSet, onBatch func(n int)) error {
	return c.readRunsFrom(ctx, c.cat.ScanLog, collectionID, after, end, runs, nil, onBatch)
}

// readRunsFrom is readRuns reading the log with scan (Catalog.ScanLog, or
// ScanKeptLog for a slice already compacted). onRows, when set, is given
// each batch's rows in offset order before they join a run (it must not
// keep the slice); an error it returns ends the read.
func (c *Compactor) readRunsFrom(ctx context.Context, scan scanFunc, collectionID string, after, end int64, runs *runSet, onRows func([]opEntry) error, onBatch func(n int)) error {
	runLimit := max(runs.budget/4, 1)
	var (
		run  []opEntry
		size int64
		from = after
	)
	for b := range c.logBatches(ctx, scan, collectionID, after, end) {
		if b.err != nil {
			return b.err
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("read log after offset %d: %w", from, err)
		}
		if onRows != nil {
			if err := onRows(b.entries); err != nil {
				return err
			}
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

package compaction

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/materialize"
)

// fakeLog is a dense log of n rows (offsets 1..n) that a scanFunc reads;
// the rows of offsets in missing are absent (as if compacted meanwhile).
type fakeLog struct {
	rows    map[int64][]byte
	missing map[int64]bool
}

func newFakeLog(t *testing.T, n int64) *fakeLog {
	t.Helper()
	l := &fakeLog{rows: map[int64][]byte{}, missing: map[int64]bool{}}
	for off := int64(1); off <= n; off++ {
		rec, err := materialize.OperationRecord{Op: materialize.OpDelete, ID: fmt.Sprintf("id-%04d", off)}.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		l.rows[off] = rec
	}
	return l
}

func (l *fakeLog) scan(ctx context.Context, _ string, after, upTo int64, limit int, fn func(int64, []byte) error) (int, error) {
	n := 0
	for off := after + 1; off <= upTo && (limit <= 0 || n < limit); off++ {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		if l.missing[off] {
			continue
		}
		n++
		if err := fn(off, l.rows[off]); err != nil {
			return n, err
		}
	}
	return n, nil
}

func TestLogBatchesYieldEveryRowInOffsetOrderWhateverReaderReadIt(t *testing.T) {
	l := newFakeLog(t, 1003)
	c := &Compactor{cfg: Config{BatchRecords: 100}}
	var want int64 = 3 // after offset 3
	for b := range c.logBatches(context.Background(), l.scan, "c", 3, 1003) {
		if b.err != nil {
			t.Fatalf("batch: %v", b.err)
		}
		for _, e := range b.entries {
			if want++; e.off != want {
				t.Fatalf("offset %d, want %d", e.off, want)
			}
			if got := string(e.id()); got != fmt.Sprintf("id-%04d", e.off) {
				t.Fatalf("offset %d has id %q", e.off, got)
			}
		}
		if b.last != want {
			t.Fatalf("batch last %d, want %d", b.last, want)
		}
	}
	if want != 1003 {
		t.Fatalf("read up to offset %d, want 1003", want)
	}
}

func TestLogBatchesEndWithAConflictAtARangeCompactedMeanwhile(t *testing.T) {
	l := newFakeLog(t, 1000)
	for off := int64(501); off <= 600; off++ {
		l.missing[off] = true // the sixth range of 100 offsets
	}
	c := &Compactor{cfg: Config{BatchRecords: 100}}
	var batches int
	var last error
	for b := range c.logBatches(context.Background(), l.scan, "c", 0, 1000) {
		batches++
		last = b.err
	}
	if batches != 6 || !errors.Is(last, catalog.ErrConflict) {
		t.Fatalf("%d batches, last error %v; want 6 batches ending with catalog.ErrConflict", batches, last)
	}
}

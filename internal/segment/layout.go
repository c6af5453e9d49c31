package segment

import (
	"context"

	"github.com/compactorhq/compactor/internal/materialize"
)

// span is a run of the new version's records: either one base block reused
// as it is (rewrite false), or records to write as one or more blocks.
type span struct {
	rewrite bool
	base    int // index in base.Blocks when !rewrite
	recs    []materialize.Record
}

func (sp span) size(blocks []BlockRef) int {
	if sp.rewrite {
		return len(sp.recs)
	}
	return int(blocks[sp.base].Records)
}

// layout turns the stream of spans (reused base blocks and rewritten runs,
// in id order) into blocks: a rewritten span under MinBlockRecords merges
// with a neighbour (pickNeighbour), spans over MaxBlockRecords are cut into
// near-equal blocks. It keeps a window of spans not yet final: the head
// leaves it once no later merge can reach it (it and its successor had
// their merge check, and the successor holds at least MinBlockRecords
// records). The open span (being built, always the last) that grows past
// trimAt records while it heads the window sends blocks of 15/16 of
// MaxBlockRecords from its front, so memory stays bounded whatever the size
// of the change.
type layout struct {
	w        *Writer
	ctx      context.Context
	blocks   []BlockRef
	min, max int
	trimAt   int
	out      *blockSink
	window   []span
	checked  int // window[:checked] had their merge check
	openIdx  int // index of the open span in window; -1: none
}

func (l *layout) open() {
	l.window = append(l.window, span{rewrite: true})
	l.openIdx = len(l.window) - 1
}

func (l *layout) add(r materialize.Record) error {
	sp := &l.window[l.openIdx]
	sp.recs = append(sp.recs, r)
	if len(sp.recs) <= l.trimAt {
		return nil
	}
	// A large open span: settle what precedes it, so that it heads the
	// window and can send its front.
	if l.openIdx > 0 {
		if err := l.settle(false, true); err != nil {
			return err
		}
		if err := l.emitFront(); err != nil {
			return err
		}
		if l.openIdx != 0 {
			return nil
		}
	}
	// Blocks cut from the front are filled to 15/16 of the maximum, so that
	// a few later inserts into one of them do not split it at once (the
	// rest of a run is cut into near-equal blocks, which leaves room too).
	cut := l.max - l.max/16
	sp = &l.window[0]
	for len(sp.recs) > l.trimAt {
		if err := l.out.write(sp.recs[:cut:cut]); err != nil {
			return err
		}
		sp.recs = sp.recs[cut:]
	}
	return nil
}

func (l *layout) close() error {
	if len(l.window[l.openIdx].recs) == 0 {
		// Changed and empty: the block is dropped.
		l.window = l.window[:l.openIdx]
		l.checked = min(l.checked, len(l.window))
	}
	l.openIdx = -1
	if err := l.settle(false, false); err != nil {
		return err
	}
	return l.emitFront()
}

func (l *layout) reuse(i int) error {
	l.window = append(l.window, span{base: i})
	if err := l.settle(false, false); err != nil {
		return err
	}
	return l.emitFront()
}

func (l *layout) finish() error {
	if err := l.settle(true, false); err != nil {
		return err
	}
	for _, sp := range l.window {
		if err := l.send(sp); err != nil {
			return err
		}
	}
	l.window = nil
	return nil
}

// settle runs the merge check over the spans not checked yet whose
// successor is known (every span when final). withOpen: the open span
// counts as a known successor (its size so far standing for its final
// size).
func (l *layout) settle(final, withOpen bool) error {
	i := l.checked
	for i < len(l.window) {
		if l.openIdx >= 0 && (i >= l.openIdx || (i == l.openIdx-1 && !withOpen)) {
			break
		}
		if !final && l.openIdx < 0 && i == len(l.window)-1 {
			break
		}
		sp := l.window[i]
		if !sp.rewrite || len(sp.recs) >= l.min || len(l.window) == 1 {
			i++
			continue
		}
		j := pickNeighbour(l.window, i, l.blocks)
		lo, hi := min(i, j), max(i, j)
		loRecs, err := l.records(l.window[lo])
		if err != nil {
			return err
		}
		hiRecs, err := l.records(l.window[hi])
		if err != nil {
			return err
		}
		recs := make([]materialize.Record, 0, len(loRecs)+len(hiRecs))
		recs = append(append(recs, loRecs...), hiRecs...)
		l.window[lo] = span{rewrite: true, recs: recs}
		l.window = append(l.window[:hi], l.window[hi+1:]...)
		switch {
		case l.openIdx == hi:
			l.openIdx = lo
		case l.openIdx > hi:
			l.openIdx--
		}
		i = lo // still under the minimum: merge again
	}
	l.checked = i
	return nil
}

// records returns the records of sp, reading its base block if reused.
func (l *layout) records(sp span) ([]materialize.Record, error) {
	if sp.rewrite {
		return sp.recs, nil
	}
	return l.w.baseRecords(l.ctx, sp.base)
}

// emitFront sends the spans at the head of the window that no later merge
// can reach.
func (l *layout) emitFront() error {
	for len(l.window) >= 2 && l.checked >= 1 && l.openIdx != 0 {
		next := l.window[1]
		if next.size(l.blocks) < l.min || (l.checked < 2 && l.openIdx != 1) {
			return nil
		}
		if err := l.send(l.window[0]); err != nil {
			return err
		}
		l.window = l.window[1:]
		l.checked--
		if l.openIdx >= 0 {
			l.openIdx--
		}
	}
	return nil
}

// send writes a final span: a reused block by reference, a rewritten one
// cut into near-equal blocks of at most MaxBlockRecords.
func (l *layout) send(sp span) error {
	if !sp.rewrite {
		return l.out.reuse(l.blocks[sp.base])
	}
	for _, part := range splitEven(sp.recs, l.max) {
		if err := l.out.write(part); err != nil {
			return err
		}
	}
	return nil
}

// pickNeighbour chooses the span to merge spans[i] with: a neighbour being
// rewritten anyway (no extra read), else the smaller one.
func pickNeighbour(spans []span, i int, blocks []BlockRef) int {
	switch {
	case i == 0:
		return 1
	case i == len(spans)-1:
		return i - 1
	}
	prev, next := spans[i-1], spans[i+1]
	if prev.rewrite != next.rewrite {
		if prev.rewrite {
			return i - 1
		}
		return i + 1
	}
	if next.size(blocks) < prev.size(blocks) {
		return i + 1
	}
	return i - 1
}

// splitEven splits recs into ceil(n/maxRecs) runs whose sizes differ by at
// most one.
func splitEven(recs []materialize.Record, maxRecs int) [][]materialize.Record {
	n := len(recs)
	if n == 0 {
		return nil
	}
	k := (n + maxRecs - 1) / maxRecs
	parts := make([][]materialize.Record, 0, k)
	size, extra := n/k, n%k
	for p := range k {
		sz := size
		if p < extra {
			sz++
		}
		parts = append(parts, recs[:sz:sz])
		recs = recs[sz:]
	}
	return parts
}

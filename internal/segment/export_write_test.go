package segment

import (
	"context"
	"iter"
	"math"
	"slices"
)

// Seq yields changes, for Writer.Write.
func Seq(changes []Change) iter.Seq2[Change, error] {
	return func(yield func(Change, error) bool) {
		for _, c := range changes {
			if !yield(c, nil) {
				return
			}
		}
	}
}

// WriteBlocks is Write forced to write blocks whatever the delta rule
// says, with one encoder and a window that holds the changes whole (every
// run cut into near-equal blocks): the write of the tests of the block
// layout.
func (w *Writer) WriteBlocks(ctx context.Context, changes []Change, compactionOffset int64, dimension int, onBlock func(int64)) (*Manifest, WriteReport, error) {
	return w.WriteBlocksWith(ctx, changes, WriteOptions{CompactionOffset: compactionOffset, Dimension: dimension, OnBlock: onBlock,
		Encoders: 1, Window: math.MaxInt})
}

// WriteBlocksWith is WriteBlocks with the options given.
func (w *Writer) WriteBlocksWith(ctx context.Context, changes []Change, opts WriteOptions) (*Manifest, WriteReport, error) {
	if err := w.begin(); err != nil {
		return nil, WriteReport{}, err
	}
	next, stop := iter.Pull2(Seq(slices.Clone(changes)))
	defer stop()
	return w.writeBlocks(ctx, next, opts)
}

// WriteDelta is Write forced to write a delta whatever the delta rule
// says.
func (w *Writer) WriteDelta(ctx context.Context, changes []Change, compactionOffset int64, dimension int) (*Manifest, WriteReport, error) {
	if err := w.begin(); err != nil {
		return nil, WriteReport{}, err
	}
	return w.writeDelta(ctx, changes, WriteOptions{CompactionOffset: compactionOffset, Dimension: dimension})
}

// PreferDelta is Write's delta rule for a stream gathered whole.
func (s *Store) PreferDelta(base *Manifest, changes []Change) bool {
	return s.preferDelta(base, changes)
}

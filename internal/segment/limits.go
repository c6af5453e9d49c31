package segment

import "github.com/compactorhq/compactor/internal/materialize"

// MaxBlockRecords is the most records a block this store writes holds
// (Config.MaxBlockRecords after defaults).
func (s *Store) MaxBlockRecords() int { return s.cfg.MaxBlockRecords }

// MinBlockRecords is the record count under which a rewritten block is
// merged with a neighbour.
func (s *Store) MinBlockRecords() int { return s.cfg.MinBlockRecords }

// WritesDelta reports whether Writer.Write over base would write a change
// of opRecords operation records to the ids (sorted, unique) as one delta
// rather than blocks: the decision of Write's steps 1 and 2, for estimates
// of a compaction that has not run.
func (s *Store) WritesDelta(base *Manifest, ids []string, opRecords int64) bool {
	if base == nil || opRecords > s.maxDeltaChanges(base) {
		return false
	}
	changes := make([]Change, len(ids))
	for i, id := range ids {
		changes[i] = Change{ID: id}
	}
	return s.preferDelta(base, changes)
}

// MaxDeltaChanges is the most operation records a compaction over base
// may write as a delta: WritesDelta is false for more (0 when base takes
// no delta).
func (s *Store) MaxDeltaChanges(base *Manifest) int64 { return s.maxDeltaChanges(base) }

// EncodedBytes is the size, in bytes, of a block file of recs (sorted by
// unique id) in the current format: what an estimate of a first
// compaction measures a sample of its records with.
func EncodedBytes(recs []materialize.Record) (int64, error) {
	b, err := encodeBlock(recs)
	return int64(len(b)), err
}

// ReadsBack reports whether a write reads each block and delta it wrote
// back before its manifest (the read-back check; Config.NoReadBack off).
func (s *Store) ReadsBack() bool { return !s.cfg.NoReadBack }

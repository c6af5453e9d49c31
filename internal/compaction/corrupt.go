package compaction

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/jobtype"
	"github.com/compactorhq/compactor/internal/materialize"
	"github.com/compactorhq/compactor/internal/segment"
)

// KindLogRow is the CorruptKind of a log row that does not decode.
const KindLogRow = "log_row"

// corruptKinds are the values of the kind label of
// compactor_corrupt_blocks_total.
var corruptKinds = []string{segment.KindBlock, segment.KindDelta, segment.KindManifest, segment.KindIndex, KindLogRow}

// CorruptKind reports whether err is stored data of a collection that is
// damaged, and of which kind: segment.KindBlock, segment.KindDelta or segment.KindManifest (a
// *segment.CorruptError, naming the collection and the blob key), or
// KindLogRow (materialize.ErrCorruptRecord; the message names the collection
// and the log offset). Such an error is not transient: retrying does not
// mend it; reads answer it as data loss and compactions of the collection
// fail until an operator repairs or deletes it.
func CorruptKind(err error) (kind string, ok bool) {
	var ce *segment.CorruptError
	switch {
	case errors.As(err, &ce):
		return ce.Kind, true
	case errors.Is(err, segment.ErrCorrupt):
		return segment.KindBlock, true
	case errors.Is(err, materialize.ErrCorruptRecord):
		return KindLogRow, true
	}
	return "", false
}

// Option configures a Compactor (see New).
type Option func(*Compactor)

// WithRegisterer registers the Compactor's metrics on reg:
// compactor_corrupt_blocks_total{kind="block|delta|manifest|log_row"}, the reads
// and compactions that failed on damaged stored data, and
// compactor_query_duration_seconds{plan="exact|index"}, and the
// verification series (compactor_verification_failures_total{phase},
// compactor_verifications_total{phase},
// compactor_verification_read_bytes_total{phase}).
func WithRegisterer(reg prometheus.Registerer) Option {
	return func(c *Compactor) {
		v := promauto.With(reg).NewCounterVec(prometheus.CounterOpts{
			Name: "compactor_corrupt_blocks_total",
			Help: "Reads and compactions that failed on a corrupt segment block, delta, manifest or log row, by kind. A damaged blob counts at every read that meets it: any increase needs an operator (the log and the collection's last job name the collection and the blob).",
		}, []string{"kind"})
		for _, k := range corruptKinds {
			v.WithLabelValues(k)
		}
		c.corrupt = v
		c.query = newQueryMetrics(reg)
		c.indexm = newIndexMetrics(reg)
		c.verifym = newVerifyMetrics(reg)
		c.purgem = newPurgeMetrics(reg)
	}
}

// noteCorrupt counts and logs err when it is damaged stored data of
// collectionID; op says what met it ("read", "compaction").
func (c *Compactor) noteCorrupt(op, collectionID string, err error) {
	kind, ok := CorruptKind(err)
	if !ok {
		return
	}
	if c.corrupt != nil {
		c.corrupt.WithLabelValues(kind).Inc()
	}
	c.logger.Error("corrupt data", "op", op, "kind", kind, "collection", collectionID, "err", err)
}

// Classify says where a compaction's failure comes from
// (jobtype.FailureClass), from the marks the error got where it happened:
//   - data: damaged stored data (CorruptKind; a blob of the current
//     version missing is one), a block too large to decode; retrying
//     fails the same way until an operator repairs the data;
//   - infrastructure: a transient error (IsTransient: the blob store or
//     the catalog unavailable, a lost compare-and-swap or lease, a context
//     end), a full store (catalog.ErrStorageFull, ENOSPC included);
//   - internal: anything else. An error no layer classified is treated as
//     a bug, which counts toward the dead-letter state: retrying an
//     unknown error forever would hide it, and the dead-letter re-drives
//     (after a cool-off, after an upgrade) give it bounded further tries.
//
// Data wins over infrastructure: a corrupt block read through a flaky
// store is still corrupt.
func Classify(err error) jobtype.FailureClass {
	switch {
	case err == nil:
		return ""
	case isDataFailure(err):
		return jobtype.FailureData
	case IsTransient(err) || errors.Is(err, catalog.ErrStorageFull):
		return jobtype.FailureInfrastructure
	}
	return jobtype.FailureInternal
}

// isDataFailure reports whether err is about the collection's stored data.
func isDataFailure(err error) bool {
	_, corrupt := CorruptKind(err)
	return corrupt || errors.Is(err, segment.ErrBlockTooLarge)
}

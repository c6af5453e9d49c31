// Package jobtype is the vocabulary of jobs that every layer shares (after
// River's rivertype): the kinds of job, the phases of a run, its progress,
// its outcome, an estimate of a job not yet run, and the result of a
// request to enqueue one. It imports nothing of the project, so the
// catalog, the compaction, the manager and the adapters all import it and
// pass its values across without conversion; the RPC and page adapters
// convert them once, at their edges.
//
// Counters name what they count: operation records are the log's (what
// clients pushed and a job reads, OpRecords*), records are the materialized
// ones a job writes into a segment (Records*).
package jobtype

import (
	"encoding/json"
	"fmt"
	"time"
)

// Kind names a kind of job; the manager dispatches a job to the executor
// of its kind.
type Kind string

// Kinds of job. Every kind shares the one queue (the catalog's jobs
// table), the lease, the failure policy, cancel, watch and the history.
// The queue keeps at most one QUEUED job per collection and kind, and at
// most one RUNNING job per collection whatever its kind: every kind commits
// segment versions of its collection, so two running at once would only
// make one lose its compare-and-swap.
const (
	// KindCompaction materializes a collection's log into a new segment
	// version (a job row written before jobs had kinds is one).
	KindCompaction Kind = "compaction"
	// KindIndexRebuild builds a fresh vector index from the current
	// version's blocks and commits it as a new version with the same
	// blocks.
	KindIndexRebuild Kind = "index_rebuild"
	// KindVerify re-checks the digests of a collection's kept versions
	// (reserved: the name is part of the API).
	KindVerify Kind = "verify"
	// KindRollback is a rollback of a collection to a kept version. It is
	// never queued: the rollback commits in the request that asks for it,
	// and its job row, finished (SUCCEEDED) in the same transaction, records
	// it in the history.
	KindRollback Kind = "rollback"
)

// Kinds lists every kind, in the order surfaces list them.
func Kinds() []Kind { return []Kind{KindCompaction, KindIndexRebuild, KindVerify, KindRollback} }

// Known reports whether k is one of Kinds.
func (k Kind) Known() bool {
	switch k {
	case KindCompaction, KindIndexRebuild, KindVerify, KindRollback:
		return true
	}
	return false
}

// Phase is the step a running job is in, as its progress reports it.
type Phase string

// The phases of a compaction, in order. PhaseStarting is the manager's,
// from the claim until the executor's first report.
const (
	PhaseStarting Phase = "starting"
	// PhaseReading reads the log slice into sorted runs.
	PhaseReading Phase = "reading log"
	// PhaseMaterializing reads the base version and gathers the changes
	// until the segment writer decides between a delta and blocks.
	PhaseMaterializing Phase = "materializing"
	// PhaseWriting writes the changed blocks (or the one delta), the
	// changes materialized as they are written.
	PhaseWriting Phase = "writing blocks"
	// PhaseIndexing builds the version's vector index (skipped by a
	// collection with indexing off).
	PhaseIndexing Phase = "indexing"
	// PhaseCommitting commits the new version in the catalog (compare-and-
	// swap, advance of the compaction offset, the job row).
	PhaseCommitting Phase = "committing"
)

// Progress of a running job. The executor reports the phase, the counters
// and the plan; the manager adds Fraction and ETA, computed from the rates
// observed in the job; the catalog persists it with the job's lease
// (UpdatedAt), which is what other replicas show.
type Progress struct {
	Phase          Phase
	OpRecordsRead  int64 // operation records read from the log so far
	OpRecordsTotal int64 // operation records the job reads; 0 while unknown
	BytesWritten   int64 // bytes of blocks (and manifest) written so far
	// BlocksWritten and BlocksTotal count the blocks the job writes;
	// BlocksTotal is 0 while unknown (before the writing phase).
	BlocksWritten, BlocksTotal int64
	// VectorsIndexed and VectorsTotal count the vectors the indexing
	// phase inserts into a vector index (an index rebuild: every vector of
	// the version); VectorsTotal is 0 while unknown.
	VectorsIndexed, VectorsTotal int64
	// NoIndexing: the job has no indexing phase (a compaction of a
	// collection with indexing off), so the phase's weight goes to the
	// others. Set from the first report on.
	NoIndexing bool
	// Fraction is how much of the whole job is done, from 0 to 1 (below 1
	// while the job runs). Set by the manager.
	Fraction float64
	// ETA is the estimated time to the job's end, meaningful only when
	// ETAKnown; a known ETA is positive. Set by the manager.
	ETA      time.Duration
	ETAKnown bool
	// UpdatedAt is when the progress was persisted; zero for a live report.
	UpdatedAt time.Time
	// Planned: the executor has read the collection, and the plan below is
	// known. The manager keeps it on the job and persists it when the
	// phase changes, so that a job interrupted by a crash or a lost lease
	// still shows where it started and how far it got.
	Planned       bool
	OffsetStart   int64 // log offsets (OffsetStart, OffsetEnd] the job reads
	OffsetEnd     int64
	VersionBefore int64 // the segment version the job builds on
}

// Outcome is what a job did.
type Outcome struct {
	OffsetStart, OffsetEnd int64 // log offsets (start, end] the job covered
	OpRecordsRead          int64 // operation records read from the log
	RecordsWritten         int64 // materialized records in the blocks written
	BytesWritten           int64 // bytes of blocks and manifest written
	VersionBefore          int64
	VersionAfter           int64 // == VersionBefore when nothing was committed
	// Remaining is the backlog (operation records) left beyond OffsetEnd:
	// when positive the manager queues a continuation job at once.
	Remaining int64
	Note      string
}

// Committed reports whether the job committed (or, before its commit,
// would commit) a new version.
func (o Outcome) Committed() bool { return o.VersionAfter != o.VersionBefore }

// Estimate is what the next job of a collection would do, from its
// manifest and its log, without writing anything.
type Estimate struct {
	OpRecords       int64 // operation records the job would read (at most the job's maximum)
	BlocksTotal     int   // blocks of the current version
	BlocksToRewrite int   // blocks whose id range holds an id of those records
	// BytesToRewrite is the bytes of those blocks plus, for ids outside
	// every block, the version's mean bytes per record times their count
	// (0 before the first version).
	BytesToRewrite int64
	// The vector index work, when the collection has indexing on
	// (Indexed): VectorsToInsert counts the operation records that carry
	// an embedding (ADD, UPSERT, an UPDATE with one) and VectorsToDelete
	// the DELETEs, upper bounds of the vectors an incremental build
	// inserts and tombstones; IndexFullBuild says the job builds the index
	// from every record instead, and IndexFullBuildReason why.
	Indexed                          bool
	VectorsToInsert, VectorsToDelete int64
	IndexFullBuild                   bool
	IndexFullBuildReason             string
}

// Enqueued is one job a request to enqueue returned, as J (the catalog's
// row, or the manager's view of it).
type Enqueued[J any] struct {
	Job     J
	Created bool // false: an already queued job was returned
}

// IndexRebuildParams are the parameters of a KindIndexRebuild job, kept
// as its row's params (a JSON object): the HNSW parameters the new index is
// built with, which become the collection's on commit; 0 keeps the
// collection's.
type IndexRebuildParams struct {
	M              int `json:"m,omitempty"`               // neighbours per node and layer
	EfConstruction int `json:"ef_construction,omitempty"` // candidate list size while building
}

// Encode returns p as a job's params: "" when p keeps every parameter.
func (p IndexRebuildParams) Encode() string {
	if p == (IndexRebuildParams{}) {
		return ""
	}
	b, _ := json.Marshal(p) // a struct of ints always encodes
	return string(b)
}

// DecodeIndexRebuildParams reads a job's params ("" is the zero value).
// Errors: a params text that is not such a JSON object.
func DecodeIndexRebuildParams(s string) (IndexRebuildParams, error) {
	var p IndexRebuildParams
	if s == "" {
		return p, nil
	}
	if err := json.Unmarshal([]byte(s), &p); err != nil {
		return p, fmt.Errorf("index rebuild params %q: %w", s, err)
	}
	return p, nil
}

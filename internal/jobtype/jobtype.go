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
	// Estimate, when set, is the job's estimate, reported once by an
	// executor that prices its job from its own read of the log slice
	// (manager.InlineEstimator) instead of being estimated before it runs.
	// A report that carries it carries nothing else: the manager stores
	// the job's prediction from it and publishes no progress.
	Estimate *Estimate
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
	// Actual holds the blob and index figures (nil when unknown).
	Actual *Actual
}

// Committed reports whether the job committed (or, before its commit,
// would commit) a new version.
func (o Outcome) Committed() bool { return o.VersionAfter != o.VersionBefore }

// Estimate is what the next job of a collection would do, from its
// manifest and its log, without writing anything. Counts are upper bounds
// where the materialization rules may shrink them (an UPDATE of an absent
// id writes nothing, a DELETE drops a record); the blob counts assume a
// cold decoded block cache.
type Estimate struct {
	OpRecords       int64 // operation records the job would read (at most the job's maximum)
	LogBytes        int64 // bytes of those operation records as stored in the log
	BlocksTotal     int   // blocks of the current version
	BlocksToRewrite int   // blocks that hold or take an id of those records
	// BytesToRewrite is the bytes of the blocks rewritten (those holding
	// or taking an id of those records, and neighbours merged with them);
	// before the first version, the log bytes of the records.
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
	// Delta: the change is small and spread, so the job writes one
	// merge-on-read delta instead of rewriting blocks (BlocksToWrite 0).
	Delta bool
	// RecordsToWrite is the records the job writes into blocks (or the
	// delta): those of the blocks it rewrites plus the new ids.
	RecordsToWrite int64
	// BlocksToWrite is the block files the job writes (the rewritten
	// blocks' records at the writer's block size), 0 for a delta.
	BlocksToWrite int
	// BytesRead is the bytes the job reads from the blob store: the
	// manifest, the blocks it rewrites and, for an incremental index
	// build, the previous index's blobs (unless this process has them
	// cached), for a full build the new version's blocks. BytesWritten is
	// the bytes it writes: blocks (or the delta), the manifest and the
	// index, whose part is IndexBytes (a job row's BytesWritten counts
	// blocks and manifest only).
	BytesRead, BytesWritten, IndexBytes int64
	// BlobGets and BlobPuts count the blob store calls of those reads and
	// writes.
	BlobGets, BlobPuts int64
	// BlocksAfter and BytesAfter are the blocks of the new version and
	// their bytes (what a full index build reads back).
	BlocksAfter int
	BytesAfter  int64
	// WriteAmplification is RecordsToWrite per operation record read (1:
	// every operation record written once; copy-on-write of large blocks
	// for few changes raises it).
	WriteAmplification float64
}

// Prediction prices an Estimate in time on the node that made it: the
// predicted duration from the throughput that node has measured (and the
// cap in force), and how it was derived.
type Prediction struct {
	Estimate
	// Seconds is the predicted duration of the job; meaningful only when
	// SecondsKnown (no measurement yet otherwise). WriteSeconds and
	// IndexSeconds are its two terms: bytes written at the measured (or
	// capped) write rate, vectors indexed at the measured index rate.
	Seconds, WriteSeconds, IndexSeconds float64
	SecondsKnown                        bool
	// BytesPerSecond is the write rate used (the cap when lower),
	// VectorsPerSecond the index rate; Basis says in words where they
	// come from.
	BytesPerSecond, VectorsPerSecond float64
	Basis                            string
	// Window is when the job would run ("now" unless a compaction window
	// holds it).
	Window string
}

// PlanTotals sums the predictions of a plan's priced jobs (Add each).
type PlanTotals struct {
	Jobs                    int // predictions added
	OpRecords, LogBytes     int64
	BytesRead, BytesWritten int64
	BlobGets, BlobPuts      int64
	// BlocksToRewrite of BlocksTotal: the blocks the jobs rewrite, of
	// those their collections' current versions hold.
	BlocksToRewrite, BlocksTotal int64
	RecordsToWrite               int64
	VectorsToInsert              int64
	VectorsToDelete              int64
	// Seconds sums the known durations; SecondsUnknown counts the
	// predictions without one. The jobs run --workers at a time, so the
	// plan takes about Seconds / workers when the work spreads evenly.
	Seconds        float64
	SecondsUnknown int
	// WriteAmplification is RecordsToWrite per operation record, over
	// the whole plan (0 without operation records).
	WriteAmplification float64
}

// Add counts p.
func (t *PlanTotals) Add(p *Prediction) {
	t.Jobs++
	t.OpRecords += p.OpRecords
	t.LogBytes += p.LogBytes
	t.BytesRead += p.BytesRead
	t.BytesWritten += p.BytesWritten
	t.BlobGets += p.BlobGets
	t.BlobPuts += p.BlobPuts
	t.BlocksToRewrite += int64(p.BlocksToRewrite)
	t.BlocksTotal += int64(p.BlocksTotal)
	t.RecordsToWrite += p.RecordsToWrite
	t.VectorsToInsert += p.VectorsToInsert
	t.VectorsToDelete += p.VectorsToDelete
	if p.SecondsKnown {
		t.Seconds += p.Seconds
	} else {
		t.SecondsUnknown++
	}
	if t.OpRecords > 0 {
		t.WriteAmplification = float64(t.RecordsToWrite) / float64(t.OpRecords)
	}
}

// Actual is what a job did, beside its job row's counters, in the units
// of an Estimate: what the prediction is compared with.
type Actual struct {
	BytesRead      int64 // bytes read from the blob store
	BytesWritten   int64 // bytes written to the blob store (the index's included)
	BlobGets       int64
	BlobPuts       int64
	BlocksWritten  int64 // block files written
	DeltasWritten  int64
	VectorsIndexed int64   // vectors inserted into the index (a full build: every one)
	IndexSeconds   float64 // the index phase's duration
	IndexBuild     string  // "full", "incremental", "repaired"; "" without index
}

// FailureClass says where a failure comes from, decided where the error
// happens: infrastructure failures are retried with backoff and never
// count toward the dead-letter state; data and internal ones count.
type FailureClass string

// Failure classes.
const (
	// FailureInfrastructure: the blob store, the catalog, the network, a
	// full disk, a lost compare-and-swap or lease: says nothing about the
	// collection.
	FailureInfrastructure FailureClass = "infrastructure"
	// FailureData: a corrupt or invalid stored file or log row, a block
	// too large to decode: fails again at every attempt until repaired.
	FailureData FailureClass = "data"
	// FailureInternal: a bug (a recovered panic), or an error nothing
	// classified.
	FailureInternal FailureClass = "internal"
)

// Counts reports whether a failure of class c counts toward the
// dead-letter state.
func (c FailureClass) Counts() bool { return c != FailureInfrastructure }

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

// Package catalog keeps the compactor's metadata in SQL: collections, the
// per-collection write-ahead log (log rows), committed segment versions and
// compaction jobs (DESIGN.md §7).
//
// SQLite (pure Go, modernc.org/sqlite, WAL mode, one writer connection and a
// pool of readers) in a data directory is the embedded default. The SQL is
// kept portable and every dialect difference (placeholders, DDL types, DSN,
// pragmas) lives in dialect.go, so a PostgreSQL backend is a new dialect and
// a migrations directory, not a redesign. Migrations are versioned SQL files
// under migrations/<dialect>/, applied at Open with goose.
//
// Times are stored as unix milliseconds (INTEGER) in UTC.
package catalog

import (
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/compactorhq/compactor/internal/jobtype"
)

// Sentinel errors. Every error the package returns for one of these
// conditions matches it with errors.Is.
var (
	// ErrNotFound: no collection or job with that id.
	ErrNotFound = errors.New("not found")
	// ErrAlreadyExists: a collection with that name exists.
	ErrAlreadyExists = errors.New("already exists")
	// ErrConflict: a compaction commit lost its compare-and-swap on the
	// segment version (another compaction committed first).
	ErrConflict = errors.New("segment version conflict")
	// ErrBackpressure: the collection's uncompacted backlog is at its limit.
	ErrBackpressure = errors.New("backlog limit reached")
	// ErrInvalidArgument: a name, dimension or offset that cannot be accepted.
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrUnavailable: the database cannot be reached or is busy; transient.
	ErrUnavailable = errors.New("catalog unavailable")
	// ErrFailedPrecondition: the collection is not in a state that allows
	// the operation (a rollback while a job of the collection runs, or to a
	// version whose later log rows are gone).
	ErrFailedPrecondition = errors.New("failed precondition")
	// ErrStorageFull: a store (the catalog database or the blob store) has
	// no space left for a write. Every such error is a *StorageFullError.
	ErrStorageFull = errors.New("storage full")
)

// Stores named by StorageFullError.Store.
const (
	StoreCatalog = "catalog database"
	StoreBlobs   = "blob store"
)

// StorageFullError says that a write failed because a store is out of space:
// SQLite's SQLITE_FULL ("database or disk is full"), a PostgreSQL error of
// SQLSTATE class 53 (insufficient resources: 53100 disk_full, 53200
// out_of_memory...), or ENOSPC / EDQUOT from the file system under the blob
// store. It matches ErrStorageFull. Its message names the store and what an
// operator can do, and carries no server path (it reaches clients); Err, the
// driver's or the file system's error, is for the server log.
type StorageFullError struct {
	Store string // StoreCatalog or StoreBlobs
	// Code is the driver's code when there is one ("SQLITE_FULL",
	// "SQLSTATE 53100", "ENOSPC"), for operators.
	Code string
	Err  error
}

func (e *StorageFullError) Error() string {
	return fmt.Sprintf("the %s is out of space (%s): nothing was written; free space on its volume "+
		"(delete collections that are no longer needed, or grow the volume) and retry", e.Store, e.Code)
}

// Is reports whether target is ErrStorageFull.
func (e *StorageFullError) Is(target error) bool { return target == ErrStorageFull }

// Unwrap returns the underlying driver or file-system error.
func (e *StorageFullError) Unwrap() error { return e.Err }

// IsNoSpace reports whether err is a file system's "no space left on
// device" (ENOSPC) or "disk quota exceeded" (EDQUOT), however wrapped, and
// returns the errno's name.
func IsNoSpace(err error) (code string, ok bool) {
	switch {
	case errors.Is(err, syscall.ENOSPC):
		return "ENOSPC", true
	case errors.Is(err, syscall.EDQUOT):
		return "EDQUOT", true
	}
	return "", false
}

// ConflictError is returned by CommitCompaction when the collection's segment
// version is not the one the compaction started from. It matches ErrConflict.
type ConflictError struct {
	CollectionID string
	Expected     int64 // the base version of the compaction
	Actual       int64 // the version found at commit
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("collection %s: segment version is %d, compaction started from %d", e.CollectionID, e.Actual, e.Expected)
}

// Is reports whether target is ErrConflict.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// VersionNotFoundError is returned for a segment version that a
// collection does not keep: never committed, or retired by GC (beyond
// --versions-to-keep). It names the versions that are kept. It matches
// ErrNotFound.
type VersionNotFoundError struct {
	CollectionID string
	Version      int64
	// Oldest and Newest are the kept versions' range; both 0 when the
	// collection has no committed version.
	Oldest, Newest int64
}

func (e *VersionNotFoundError) Error() string {
	switch {
	case e.Newest == 0:
		return fmt.Sprintf("collection %s has no version %d: it has no committed version yet", e.CollectionID, e.Version)
	case e.Version > e.Newest:
		return fmt.Sprintf("collection %s has no version %d: the newest is %d (kept: %d to %d)", e.CollectionID, e.Version, e.Newest, e.Oldest, e.Newest)
	}
	return fmt.Sprintf("collection %s no longer keeps version %d: the oldest kept version is %d (kept: %d to %d; --versions-to-keep bounds how many)",
		e.CollectionID, e.Version, e.Oldest, e.Oldest, e.Newest)
}

// Is reports whether target is ErrNotFound.
func (e *VersionNotFoundError) Is(target error) bool { return target == ErrNotFound }

// BackpressureError is returned by AppendLog when appending would take the
// collection's backlog (log position minus compaction offset, in records)
// past the limit. It matches ErrBackpressure.
type BackpressureError struct {
	CollectionID string
	Backlog      int64 // records not yet compacted
	Incoming     int   // records in the rejected batch
	Limit        int64 // the configured maximum backlog, records
}

func (e *BackpressureError) Error() string {
	return fmt.Sprintf("collection %s: backlog of %d records plus %d incoming exceeds the limit of %d; retry after compaction",
		e.CollectionID, e.Backlog, e.Incoming, e.Limit)
}

// Is reports whether target is ErrBackpressure.
func (e *BackpressureError) Is(target error) bool { return target == ErrBackpressure }

// KeyReuseError is returned by AppendLogKeyed when the collection already
// has the idempotency key, within its window, for a different batch. It
// matches ErrInvalidArgument.
type KeyReuseError struct {
	CollectionID string
	Key          string
	// The log offsets of the batch the key was first used for.
	FirstOffset, LastOffset int64
}

func (e *KeyReuseError) Error() string {
	return fmt.Sprintf("collection %s: idempotency key %q was used for a different batch (log offsets %d..%d); give each batch its own key",
		e.CollectionID, e.Key, e.FirstOffset, e.LastOffset)
}

// Is reports whether target is ErrInvalidArgument.
func (e *KeyReuseError) Is(target error) bool { return target == ErrInvalidArgument }

// Collection is one row of the collections table.
type Collection struct {
	ID          string // UUID, assigned at creation
	Name        string // unique, 1..256 bytes
	Dimension   int    // embedding dimension; 0 until fixed by creation or the first write
	LogPosition int64  // offset of the last appended log record; 0 when none
	// CompactionOffset is the offset of the last compacted record. It
	// never decreases, except by a rollback (CommitRollback), which sets it
	// back to the restored version's.
	CompactionOffset int64
	SegmentVersion   int64  // 0 before the first committed compaction
	ManifestKey      string // blob key of the current version's manifest; "" at version 0
	RecordCount      int64  // records in the current segment version
	FailureCount     int    // consecutive non-transient compaction failures
	// RetryCount is the consecutive failures, transient ones included (the
	// backoff's count); RetryAfter is the time before which no scheduled
	// job of the collection is claimed (zero: none). See SetRetry.
	RetryCount int
	RetryAfter time.Time
	// Pause: the scheduler skips the collection while PausedAt is set
	// (one-off compactions still run). See SetCollectionPause.
	PausedAt    time.Time
	PauseReason string
	PausedBy    string
	// Settings overrides the scheduler's thresholds for the collection.
	Settings CollectionSettings
	// Policy is its priority class, compaction windows and freshness
	// objectives (UpdateCollectionPolicy).
	Policy CollectionPolicy
	// Index is the query distance and the vector index parameters, fixed
	// at creation.
	Index          IndexSettings
	DeadLetteredAt time.Time
	// OldestUncompactedAt is the append time of the first uncompacted log
	// record (offset CompactionOffset+1); zero when the backlog is empty.
	OldestUncompactedAt time.Time
	LastCompactedAt     time.Time // time of the last committed compaction; zero if none
	CreatedAt           time.Time
	UpdatedAt           time.Time
}

// Backlog is the number of uncompacted log records.
func (c Collection) Backlog() int64 { return c.LogPosition - c.CompactionOffset }

// Paused reports whether automatic compaction of the collection is paused.
func (c Collection) Paused() bool { return !c.PausedAt.IsZero() }

// DeadLettered reports whether the scheduler skips the collection.
func (c Collection) DeadLettered() bool { return !c.DeadLetteredAt.IsZero() }

// Version is one committed segment version of a collection.
type Version struct {
	CollectionID     string
	Version          int64
	ManifestKey      string
	CompactionOffset int64
	RecordCount      int64
	SegmentBytes     int64 // bytes of its blocks (0 for versions committed before this was recorded)
	BlockCount       int   // blocks its manifest lists (likewise)
	CreatedAt        time.Time
	// RetiredAt is when GC found the version outside the retained set
	// (beyond the newest versions kept, and not current); zero while it is
	// retained. Its blobs are deleted only once it has been retired for
	// longer than the GC grace period (see RetireVersions).
	RetiredAt time.Time
	// JobID is the job whose commit wrote the version (of a rollback, its
	// job of kind rollback); "" for versions committed before it was
	// recorded.
	JobID string
	// OffsetStart is the compaction offset the version was built from:
	// the version covers the log offsets (OffsetStart, CompactionOffset].
	// Of a rollback, the restored version's (its segment is that
	// version's). -1 when not known (a version committed before it was
	// recorded, whose older neighbour is gone, or a rollback to one).
	OffsetStart int64
	// RollbackOf is, for a version made by a rollback, the version whose
	// segment and compaction offset it restores; 0 otherwise.
	RollbackOf int64
	// Reason and CreatedBy are a rollback's: the operator's reason and who
	// asked for it, as the request named them ("" when not given).
	Reason    string
	CreatedBy string
	// Digest is the version's record digest as its compaction recorded it
	// (segment.Digest text, 32 hex digits); "" for a version committed
	// before digests, or without one.
	Digest string
	// VerifiedAt is when a verify job or the scrub last checked the
	// version (zero: never); VerifyError what that check found wrong ("":
	// it verified).
	VerifiedAt  time.Time
	VerifyError string
}

// Kept reports whether v is in the retained set (not retired by GC): the
// versions that reads by version and rollbacks may use, and whose log the
// catalog keeps (PurgeLog).
func (v Version) Kept() bool { return v.RetiredAt.IsZero() }

// Retention is the outcome of RetireVersions: every version row of the
// collection, split by what GC may do with its blobs. Both lists are newest
// first.
type Retention struct {
	// Retained: versions not retired, or retired for less than the grace
	// period. Their manifests and blocks must stay: a reader may still be
	// reading them.
	Retained []Version
	// Expired: versions retired for at least the grace period. No reader
	// that started before their retirement is still reading them (reads
	// are bounded by the grace period), so their manifests and the blocks
	// no retained version references may be deleted, then their rows.
	Expired []Version
	// Retired is how many versions this call marked retired.
	Retired int
}

// Rollback is what CommitRollback writes in one transaction: a new version
// (NewVersion = BaseVersion+1) whose segment is ToVersion's (ManifestKey is
// a copy of ToVersion's manifest, FromManifestKey, under the new version
// number) and whose compaction offset, record count and storage figures
// are ToVersion's.
type Rollback struct {
	CollectionID    string
	BaseVersion     int64 // compare-and-swap: must equal the current segment version
	NewVersion      int64 // must be BaseVersion+1
	ToVersion       int64 // the kept version restored
	FromManifestKey string
	ManifestKey     string
	Reason          string // the operator's, kept in the history
	By              string // who asked, as the request named them
	// JobID, when set, is the id of the job row of kind rollback that
	// records the rollback in the job history, written SUCCEEDED in the
	// same transaction (see CommitRollback); Node names the node on it.
	JobID string
	Node  string
}

// JobState is the lifecycle state of a compaction job (DESIGN.md §5).
type JobState string

// Job states: QUEUED → RUNNING → SUCCEEDED | FAILED | CANCELLED; QUEUED → CANCELLED.
const (
	JobQueued    JobState = "QUEUED"
	JobRunning   JobState = "RUNNING"
	JobSucceeded JobState = "SUCCEEDED"
	JobFailed    JobState = "FAILED"
	JobCancelled JobState = "CANCELLED"
)

// Finished reports whether s is a terminal state.
func (s JobState) Finished() bool {
	return s == JobSucceeded || s == JobFailed || s == JobCancelled
}

// JobKind is the kind of a job (jobtype.Kind).
type JobKind = jobtype.Kind

// Trigger says why a job exists.
type Trigger string

// Job triggers.
const (
	TriggerScheduled Trigger = "SCHEDULED"
	TriggerOneOff    Trigger = "ONE_OFF"
)

// Job is one row of the jobs table: a job of one collection, of one kind.
type Job struct {
	ID           string // UUID
	CollectionID string
	// Kind is what the job does (jobtype.Kind: compaction, index_rebuild,
	// verify); "" is read as compaction. The catalog stores any non-empty
	// kind; the manager fails a job of a kind no executor of its node runs.
	Kind JobKind
	// Params is what a job of a kind other than compaction is asked to
	// do, a JSON object of the kind's parameters ("" for none; an index
	// rebuild's is jobtype.IndexRebuildParams). Set at insertion.
	Params string
	// CollectionName is the collection's name as read with the job (a join,
	// not a column of the job row); "" once the collection is deleted.
	CollectionName string
	Trigger        Trigger
	State          JobState
	Reason         string // operator's text for one-offs; scheduler's reason otherwise
	Attempt        int    // 1 for a first try; n for the n-th consecutive try after failures
	CreatedAt      time.Time
	StartedAt      time.Time // zero until RUNNING
	FinishedAt     time.Time // zero until terminal
	// Log offsets covered: (OffsetStart, OffsetEnd]. Both zero until known.
	OffsetStart    int64
	OffsetEnd      int64
	RecordsRead    int64 // operation records read from the log
	RecordsWritten int64 // records in the blocks written
	BytesWritten   int64 // bytes of blocks and manifest written
	VersionBefore  int64
	VersionAfter   int64
	Error          string // error text of a FAILED job
	Note           string // e.g. "nothing to compact", "interrupted"
	Node           string // the node (host name) that ran it
	// Continues is the id of the job this one continues (that job read the
	// most records one job may and left a backlog); "" for other jobs. Set
	// at insertion, never updated.
	Continues string
	// TraceParent is the W3C traceparent of the request that queued the
	// job ("" for none): the job's trace links to that request's.
	TraceParent string
	// FailureClass of a FAILED job (where its error came from); "" in
	// other states and for jobs that failed before classes were recorded.
	FailureClass jobtype.FailureClass
	// Predicted is the prediction made when the job was claimed
	// (SetJobPrediction); nil when none was made. Actual is what the job
	// did in the prediction's units, written with its end; nil when
	// unknown.
	Predicted *jobtype.Prediction
	Actual    *jobtype.Actual
	// TriggeredBy is the principal who asked for the job (a one-off
	// compaction: its credential's name, "anonymous" without
	// authentication); "" for a job the scheduler queued. A continuation
	// job keeps its predecessor's.
	TriggeredBy string

	// Queue state (DESIGN.md §7a; see queue.go).

	// Expedited: a scheduled job that an operator asked to compact while it
	// was queued; it is claimed with the one-off jobs, before the others.
	Expedited bool
	// OldestAt is the append time of the collection's oldest uncompacted
	// record when the job was queued (claim order); zero when unknown.
	OldestAt time.Time
	// StartAfter and StartBefore bound when a scheduled job may be claimed
	// (its compaction window); zero: no bound. One-off and expedited jobs
	// ignore them.
	StartAfter, StartBefore time.Time
	// LeaseOwner holds the lease of a RUNNING job until LeaseExpiresAt; ""
	// otherwise.
	LeaseOwner     string
	LeaseExpiresAt time.Time
	// CancelRequested: an operator asked to cancel the RUNNING job; its
	// owner stops at its next lease renewal.
	CancelRequested bool
	// Progress of a RUNNING job as its owner last persisted it.
	Progress JobProgress
}

// JobFilter selects jobs for ListJobs. Zero fields do not filter.
type JobFilter struct {
	CollectionID string
	Kinds        []JobKind // only jobs of one of these kinds
	States       []JobState
	Trigger      Trigger
	// Before is a cursor: only jobs created strictly before it (by
	// (created_at, id) order) are returned. Zero: from the newest.
	Before JobCursor
	// FinishedSince: only jobs that finished at or after it. Zero: any.
	FinishedSince time.Time
	Limit         int // at most this many jobs; 0 or over 1000 means 1000
}

// JobCursor is a position in the (created_at desc, id desc) order of jobs.
type JobCursor struct {
	CreatedAt time.Time
	ID        string
}

// IsZero reports whether the cursor is unset.
func (c JobCursor) IsZero() bool { return c.ID == "" && c.CreatedAt.IsZero() }

// Commit is what CommitCompaction writes in one transaction.
type Commit struct {
	CollectionID     string
	BaseVersion      int64  // compare-and-swap: must equal the current segment version
	NewVersion       int64  // must be BaseVersion+1
	ManifestKey      string // blob key of the new version's manifest
	CompactionOffset int64  // new compaction offset: >= the current one, <= the log position
	RecordCount      int64  // records in the new version
	SegmentBytes     int64  // bytes of the new version's blocks
	BlockCount       int    // blocks the new version's manifest lists
	Digest           string // the new version's record digest ("" : none recorded)
	// Job, when non-nil, is written in the same transaction (typically in
	// state SUCCEEDED with its figures), so a committed compaction and its
	// finished job are never seen apart.
	Job *Job
	// LeaseOwner, when set with Job, fences the commit: it fails with
	// ErrLeaseLost, writing nothing, unless Job is RUNNING under this node's
	// unexpired lease (a node that lost its lease cannot commit).
	LeaseOwner string
	// Index, when set, becomes the collection's vector index parameters
	// (M and EfConstruction; the distance, EfSearch and Disabled are
	// kept) in the same transaction: an index rebuild with new parameters.
	Index *IndexSettings
}

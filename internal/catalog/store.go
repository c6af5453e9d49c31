package catalog

import (
	"context"
	"log/slog"
	"time"

	"github.com/compactorhq/compactor/internal/materialize"
)

// Config selects and tunes the catalog database.
type Config struct {
	// Driver is "sqlite" (default) or "postgres" (the shared deployment);
	// ParseLocation derives it from a --catalog value.
	Driver string
	// DSN: for sqlite, the database file path (e.g. "./data/catalog.db");
	// ":memory:" is not supported (several connections must share it), use a
	// temp dir in tests. For postgres, a pgx connection string, e.g.
	// "postgres://compactor@db:5432/compactor?sslmode=verify-full"; without
	// connect_timeout, connections give up after 10 seconds.
	DSN string
	// Exclusive makes Open of a SQLite catalog take an flock(2) on
	// "<database file>.lock" and hold it until Close, so that a second
	// `compactor serve` on the same file is refused: a *LockedError
	// (ErrLocked) naming the holder. A PostgreSQL catalog is shared by the
	// replicas (the job queue is its jobs table): Exclusive changes nothing
	// there.
	Exclusive bool
	// Holder describes this process to the one refused by the lock, e.g.
	// "node a, pid 12"; "" means "pid N on HOST".
	Holder string
	// Now is the clock used for append times and row timestamps; nil means
	// time.Now.
	Now func() time.Time
	// Logger receives the catalog's logs; nil discards them.
	Logger *slog.Logger
	// ReserveBytes, for SQLite, is the size of the space-reserve file kept
	// next to the database (<file>-reserve) and released when deleting a
	// collection finds the disk full, so that the delete can run (README
	// "Disk full"). 0: no reserve. Ignored by PostgreSQL.
	ReserveBytes int64
}

// AppendLimits bound AppendLog.
type AppendLimits struct {
	// MaxBacklog is the most uncompacted records a collection may hold; an
	// append that would exceed it fails with *BackpressureError. 0: no limit.
	MaxBacklog int64
	// Record limits passed to materialize.Validate (Dimension is ignored:
	// the collection's own is used).
	Record materialize.Limits
	// KeyWindow is how long an idempotency key of AppendLogKeyed is kept: a
	// retry within it is answered from the key, after it the key is
	// forgotten (and purged). 0: DefaultKeyWindow (24h).
	KeyWindow time.Duration
}

// Catalog is the SQL catalog. It is safe for concurrent use.
type Catalog struct {
	impl
}

// Open opens (creating if needed) the catalog database and applies pending
// migrations. Errors: ErrInvalidArgument for an unknown driver or empty DSN;
// *LockedError (ErrLocked) when Config.Exclusive and another process holds
// the catalog; ErrUnavailable wrapping the driver's error when the database
// cannot be reached; otherwise the wrapped driver or migration error.
func Open(ctx context.Context, cfg Config) (*Catalog, error) { return open(ctx, cfg) }

// Close closes the database connections.
func (c *Catalog) Close() error { return c.close() }

// Ping checks that the database answers (for /readyz). ErrUnavailable when not.
func (c *Catalog) Ping(ctx context.Context) error { return c.ping(ctx) }

// Writable reports whether the catalog can take writes (for /readyz). Once
// a write has failed for want of space, it returns an error matching
// ErrStorageFull until the space is back: on SQLite, until the space
// reserve is allocated again and the volume has 1 MiB available besides;
// on both dialects, until a small probe write (64 KiB) commits. Writable
// does that checking; it is cheap while no write has failed.
func (c *Catalog) Writable(ctx context.Context) error { return c.writable(ctx) }

// CreateCollection creates a collection with a new UUID. dimension 0 leaves
// the dimension to be fixed by the first write. Errors: ErrInvalidArgument
// (empty name, name over 256 bytes, negative dimension), ErrAlreadyExists
// (name taken).
func (c *Catalog) CreateCollection(ctx context.Context, name string, dimension int) (Collection, error) {
	return c.createCollection(ctx, name, dimension)
}

// GetCollection returns one collection. ErrNotFound when no such id.
func (c *Catalog) GetCollection(ctx context.Context, id string) (Collection, error) {
	return c.getCollection(ctx, id)
}

// ListCollections returns all collections ordered by name.
func (c *Catalog) ListCollections(ctx context.Context) ([]Collection, error) {
	return c.listCollections(ctx)
}

// DeleteCollection deletes a collection with its log rows, versions and jobs,
// and returns the row as it was (so the caller can delete its blobs).
// ErrNotFound when no such id.
func (c *Catalog) DeleteCollection(ctx context.Context, id string) (Collection, error) {
	return c.deleteCollection(ctx, id)
}

// AppendLog validates ops (materialize.Validate against the collection's
// dimension) and appends them to the collection's log in one transaction,
// assigning consecutive offsets. It fixes the collection's dimension on the
// first write that carries an embedding. It returns the first and last offset
// written. Errors: ErrNotFound (no such collection), an
// *materialize.InvalidRecordError (nothing appended), *BackpressureError
// (nothing appended), ErrInvalidArgument for an empty batch.
func (c *Catalog) AppendLog(ctx context.Context, collectionID string, ops []materialize.OperationRecord, lim AppendLimits) (first, last int64, err error) {
	first, last, _, err = c.appendLog(ctx, collectionID, "", ops, lim)
	return first, last, err
}

// AppendLogKeyed is AppendLog with an idempotency key (client-chosen, per
// collection; key "" is AppendLog). The key is looked up in the append's
// transaction, before the backlog and validation against the dimension:
// when the collection has the key from the last lim.KeyWindow with the same
// batch (same SHA-256 of the encoded records), nothing is written and the
// offsets first given are returned with replayed true; with a different
// batch it is a *KeyReuseError (matches ErrInvalidArgument). Otherwise the
// batch is appended and the key recorded with its offsets. Keys older than
// the window are purged by the next keyed append to the collection. Errors
// are AppendLog's, and ErrInvalidArgument for a key ValidatePushKey refuses.
func (c *Catalog) AppendLogKeyed(ctx context.Context, collectionID, key string, ops []materialize.OperationRecord, lim AppendLimits) (first, last int64, replayed bool, err error) {
	return c.appendLog(ctx, collectionID, key, ops, lim)
}

// ReadLog returns the log records of a collection with offsets in
// (after, upTo], ascending, at most limit of them (limit <= 0: no limit).
// Each returned record has its Offset set. Rows already purged by a commit
// are simply absent. ErrNotFound when the collection does not exist.
func (c *Catalog) ReadLog(ctx context.Context, collectionID string, after, upTo int64, limit int) ([]materialize.OperationRecord, error) {
	return c.readLog(ctx, collectionID, after, upTo, limit)
}

// ReadView returns, from one consistent read transaction, the collection row
// and its uncompacted log tail (offsets after CompactionOffset, ascending).
// It is the snapshot a read path needs. ErrNotFound when no such id.
func (c *Catalog) ReadView(ctx context.Context, collectionID string) (Collection, []materialize.OperationRecord, error) {
	return c.readView(ctx, collectionID)
}

// CommitCompaction commits a compaction in one transaction: compare-and-swap
// of the segment version (BaseVersion → NewVersion), advance of the
// compaction offset, a row in the versions table, the purge of the log rows at
// or below the new offset, the reset of the failure count and dead-letter
// mark, and cm.Job when set. Errors: *ConflictError when the current version
// is not BaseVersion (nothing written), ErrInvalidArgument when the offset
// would go backwards or past the log position or NewVersion != BaseVersion+1,
// ErrNotFound when the collection is gone.
func (c *Catalog) CommitCompaction(ctx context.Context, cm Commit) error {
	return c.commitCompaction(ctx, cm)
}

// ListVersions returns the committed versions of a collection, newest first.
// ErrNotFound when the collection does not exist.
func (c *Catalog) ListVersions(ctx context.Context, collectionID string) ([]Version, error) {
	return c.listVersions(ctx, collectionID)
}

// DeleteVersions removes version rows (never the current version: such a
// request is ErrInvalidArgument and deletes nothing).
func (c *Catalog) DeleteVersions(ctx context.Context, collectionID string, versions []int64) error {
	return c.deleteVersions(ctx, collectionID, versions)
}

// RetireVersions is GC's bookkeeping of retention, in catalog time and in
// one transaction: it marks retired, at the catalog clock's now, every
// version of the collection that is neither among the newest keep (>= 1)
// nor the current one and is not retired yet, and returns every version row
// split into Retained and Expired (retired at least grace ago; never the
// current version). The grace therefore counts from when a version stopped
// being retained, i.e. from the last moment a new read could have picked
// it, not from when its blobs were written. Errors: ErrNotFound (no such
// collection), ErrInvalidArgument (keep < 1, negative grace).
func (c *Catalog) RetireVersions(ctx context.Context, collectionID string, keep int, grace time.Duration) (Retention, error) {
	return c.retireVersions(ctx, collectionID, keep, grace)
}

// RecordFailure counts one non-transient compaction failure against a
// collection and dead-letters it when the consecutive count reaches
// deadLetterAfter (> 0). It returns the new count and whether the collection
// is dead-lettered.
func (c *Catalog) RecordFailure(ctx context.Context, collectionID string, deadLetterAfter int) (failures int, deadLettered bool, err error) {
	return c.recordFailure(ctx, collectionID, deadLetterAfter)
}

// RecordSuccess resets the failure count and the dead-letter mark (for a job
// that succeeded without a commit, e.g. with nothing to compact).
func (c *Catalog) RecordSuccess(ctx context.Context, collectionID string) error {
	return c.recordSuccess(ctx, collectionID)
}

// InsertJob inserts a new job row. ErrAlreadyExists for a duplicate id.
func (c *Catalog) InsertJob(ctx context.Context, j Job) error { return c.insertJob(ctx, j) }

// UpdateJob overwrites every mutable field of the job row with j's.
// ErrNotFound when no such id.
func (c *Catalog) UpdateJob(ctx context.Context, j Job) error { return c.updateJob(ctx, j) }

// GetJob returns one job. ErrNotFound when no such id.
func (c *Catalog) GetJob(ctx context.Context, id string) (Job, error) { return c.getJob(ctx, id) }

// ListJobs returns jobs matching f, newest first (created_at desc, id desc).
func (c *Catalog) ListJobs(ctx context.Context, f JobFilter) ([]Job, error) {
	return c.listJobs(ctx, f)
}

// MarkInterrupted marks every RUNNING job FAILED with the error
// "interrupted: the process stopped while the job ran" and finished time now
// (its duration so includes the outage); run at start, before any job runs.
// It returns the jobs it changed.
func (c *Catalog) MarkInterrupted(ctx context.Context) ([]Job, error) { return c.markInterrupted(ctx) }

// PruneJobs deletes finished jobs beyond the newest keep (keep <= 0: no count
// limit) and finished jobs that finished before olderThan (zero: no age
// limit). It returns the number deleted.
func (c *Catalog) PruneJobs(ctx context.Context, keep int, olderThan time.Time) (int, error) {
	return c.pruneJobs(ctx, keep, olderThan)
}

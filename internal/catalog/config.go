package catalog

import (
	"log/slog"
	"time"

	"github.com/compactorhq/compactor/internal/clock"
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
	// Clock is the process's clock: its wall time is what rows record
	// (append, creation, start and end times). nil: Now's, or else the
	// system's.
	Clock clock.Clock
	// Now, when Clock is nil, is a wall clock that never steps (a test's
	// fake clock), used as Clock; nil means the system's clock.
	Now func() time.Time
	// DatabaseClock stands in for the database's clock in tests. That clock
	// alone decides what several processes compare: job leases (claim,
	// renewal, the commit fence, expiry), the leader lease and node
	// heartbeats. nil: PostgreSQL's clock_timestamp(), read inside the
	// statements, so that no replica's clock enters them; on SQLite (one
	// process), the process's wall time at Open advanced by its monotonic
	// clock, which no step of the system time moves.
	DatabaseClock func() time.Time
	// Logger receives the catalog's logs; nil discards them.
	Logger *slog.Logger
	// ReserveBytes, for SQLite, is the size of the space-reserve file kept
	// next to the database (<file>-reserve) and released when deleting a
	// collection finds the disk full, so that the delete can run (docs/storage.md
	// "Disk full"). 0: no reserve. Ignored by PostgreSQL.
	ReserveBytes int64
	// PriorityAging is the aging step of the claim order (ClaimJob): a
	// queued job's priority rank improves by one per step it has waited.
	// 0: DefaultPriorityAging (5 min). Every replica must use the same.
	PriorityAging time.Duration
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

package catalog

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/compactorhq/compactor/internal/clock"
	"github.com/compactorhq/compactor/internal/materialize"
)

// Catalog is the SQL catalog. It is safe for concurrent use.
type Catalog struct {
	d *dialect
	w *sql.DB // write pool: a single connection for SQLite
	r *sql.DB // read pool; the same *sql.DB as w for PostgreSQL
	// tail is the pool of the log tail's reads by record id (pools.tail):
	// the same *sql.DB as w for PostgreSQL.
	tail *sql.DB
	now  func() time.Time // the process's wall clock (Config.Clock)
	// dbClock is the database's clock where the catalog supplies it
	// (SQLite, or Config.DatabaseClock); nil where the statements read the
	// server's (PostgreSQL). See dbNow.
	dbClock func() time.Time
	log     *slog.Logger
	// full is the error of the last write that failed for want of space;
	// nil once a write commits again (see storage.go).
	full atomic.Pointer[StorageFullError]
	// reserve is the space reserve of a SQLite catalog; nil when none.
	reserve *reserve
	// lock is the process lock of an exclusive catalog (Config.Exclusive),
	// nil otherwise.
	lock *procLock
	// writers counts the write transactions of writeTx, for the log purge
	// to yield to them (log.go).
	writers writerGate
	// aging is the claim order's aging step (Config.PriorityAging).
	aging time.Duration
	// stmts keeps the read pool's prepared statements (readQuery); nil
	// where the dialect does not prepare reads.
	stmts *stmtCache
	// tails remembers the rows of collections read with an empty log
	// tail (tail_rows.go); nil unless the catalog is exclusive.
	tails *tailRows
	// listedCollections is the length of the last ListCollections result,
	// the capacity the next one starts with.
	listedCollections atomic.Int64
	// lists remembers the results of listing reads under tails' counter
	// (list_cache.go); nil unless the catalog is exclusive.
	lists *listCache
}

// Open opens (creating if needed) the catalog database and applies pending
// migrations. Errors: ErrInvalidArgument for an unknown driver or empty DSN;
// *LockedError (ErrLocked) when Config.Exclusive and another process holds
// the catalog; ErrUnavailable wrapping the driver's error when the database
// cannot be reached; otherwise the wrapped driver or migration error.
func Open(ctx context.Context, cfg Config) (*Catalog, error) {
	d, err := dialectFor(cfg.Driver)
	if err != nil {
		return nil, fmt.Errorf("open catalog: %w", err)
	}
	return openDialect(ctx, cfg, d)
}

// openDialect opens the catalog with an explicit dialect (tests tune it).
func openDialect(ctx context.Context, cfg Config, d *dialect) (*Catalog, error) {
	if cfg.DSN == "" {
		return nil, fmt.Errorf("open catalog: empty DSN: %w", ErrInvalidArgument)
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	clk := cfg.Clock
	switch {
	case clk != nil:
	case cfg.Now != nil:
		clk = clock.Func(cfg.Now)
	default:
		clk = clock.System()
	}
	dbClock := cfg.DatabaseClock
	if dbClock == nil && d.processClock {
		dbClock = clock.StepFree(clk)
	}
	p, err := d.connect(ctx, cfg.DSN)
	if err != nil {
		return nil, fmt.Errorf("open %s catalog: %w", d.name, err)
	}
	if cfg.ReserveBytes < 0 {
		_ = p.close()
		return nil, fmt.Errorf("open catalog: negative space reserve %d: %w", cfg.ReserveBytes, ErrInvalidArgument)
	}
	aging := cfg.PriorityAging
	if aging <= 0 {
		aging = DefaultPriorityAging
	}
	c := &Catalog{d: d, w: p.w, r: p.r, tail: p.tail, now: clk.Now, dbClock: dbClock, log: logger, aging: aging}
	if d.prepareReads {
		c.stmts = newStmtCache(c.r)
	}
	if cfg.Exclusive {
		// Before the migrations: a second process is refused before it
		// touches the schema.
		if c.lock, err = takeLock(ctx, d, cfg, p.w, logger); err != nil {
			_ = c.Close()
			return nil, fmt.Errorf("open %s catalog: %w", d.name, c.classify(err))
		}
		if c.lock != nil {
			c.tails = &tailRows{}
			c.lists = newListCache(c.tails)
		}
	}
	if path := d.reservePath(cfg.DSN); path != "" && cfg.ReserveBytes > 0 {
		c.reserve = &reserve{path: path, size: cfg.ReserveBytes}
		if err := c.reserve.ensure(); err != nil {
			code, full := IsNoSpace(err)
			if !full {
				_ = c.Close()
				return nil, fmt.Errorf("open %s catalog: %w", d.name, err)
			}
			// Start anyway, reporting the state, so that an operator can
			// delete collections to free space.
			c.markFull(&StorageFullError{Store: StoreCatalog, Code: code, Err: err})
		}
	}
	if err := c.migrate(ctx); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("open %s catalog: %w", d.name, c.classify(err))
	}
	if err := d.check(ctx, p.w); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("open %s catalog: %w", d.name, c.classify(err))
	}
	d.opened(ctx, c)
	// Index the log rows appended before record_id existed (tail.go);
	// reads decode the rows left unfilled, so a failure only slows them.
	if n, err := c.backfillRecordIDs(ctx); err != nil {
		logger.WarnContext(ctx, "fill record ids of log rows; retried at the next start", "filled", n, "err", err)
	} else if n > 0 {
		logger.InfoContext(ctx, "record ids of log rows filled", "rows", n)
	}
	return c, nil
}

// takeLock takes the process lock of an exclusive catalog.
func takeLock(ctx context.Context, d *dialect, cfg Config, w *sql.DB, logger *slog.Logger) (*procLock, error) {
	holder := cfg.Holder
	if holder == "" {
		holder = defaultHolder()
	}
	return d.lock(cfg.DSN, holder)
}

// Close closes the database connections.
func (c *Catalog) Close() error {
	var errs []error
	if c.stmts != nil {
		errs = append(errs, c.stmts.close())
	}
	if c.lock != nil {
		errs = append(errs, c.lock.release())
		c.lock = nil
	}
	errs = append(errs, pools{w: c.w, r: c.r, tail: c.tail}.close())
	return errors.Join(errs...)
}

// Ping checks that the database answers (for /readyz). ErrUnavailable when not.
func (c *Catalog) Ping(ctx context.Context) error {
	var one int
	if err := c.r.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil {
		return fmt.Errorf("ping catalog: %w: %w", ErrUnavailable, err)
	}
	return nil
}

// writeTx runs fn in a write transaction (BEGIN IMMEDIATE on SQLite) and
// commits it when fn returns nil. fn's error is returned as is. It is
// counted, waiting and running, as a foreground write the log purge yields
// to.
func (c *Catalog) writeTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	c.writers.enter()
	defer c.writers.leave()
	return c.writeTxOn(ctx, c.w, fn)
}

// txBeginner is *sql.DB or *sql.Conn.
type txBeginner interface {
	BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error)
}

// writeTxOn is writeTx on a given writer pool or connection.
func (c *Catalog) writeTxOn(ctx context.Context, db txBeginner, fn func(tx *sql.Tx) error) error {
	if c.tails != nil {
		// Open until after the commit or the rollback: see tailRows.
		c.tails.began()
		defer c.tails.ended()
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// readTx runs fn in a read-only transaction that sees one consistent
// snapshot of the database.
func (c *Catalog) readTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	return c.readTxOn(ctx, c.r, fn)
}

// readTxOn is readTx on the pool db (c.r, or c.tail for the tail reads).
func (c *Catalog) readTxOn(ctx context.Context, db *sql.DB, fn func(tx *sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, c.d.readTx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	return fn(tx)
}

// dbNow is the argument of the dialect's clockMs expression: the
// database's clock in unix milliseconds where the catalog supplies it, NULL
// where the statement reads the server's own.
func (c *Catalog) dbNow() any {
	if c.dbClock == nil {
		return nil
	}
	return ms(c.dbClock())
}

// classify marks transient driver errors (busy, locked, connection lost)
// with ErrUnavailable and turns out-of-space errors into a
// *StorageFullError (recording the catalog's full state). Other errors are
// returned unchanged.
func (c *Catalog) classify(err error) error {
	if err == nil || errors.Is(err, ErrUnavailable) {
		return err
	}
	if full := c.storageFull(err); full != nil {
		c.markFull(full)
		if errors.Is(err, ErrStorageFull) {
			return err
		}
		// Keep what was attempted ("insert log rows: ...") for the log.
		return &StorageFullError{Store: full.Store, Code: full.Code, Err: err}
	}
	if c.d.kind(err) == kindUnavailable || errors.Is(err, driver.ErrBadConn) {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return err
}

// wrap prefixes err with what was attempted ("get collection %s") and marks
// transient errors with ErrUnavailable. The typed errors the API documents
// as returned unchanged (*ConflictError, *BackpressureError,
// *materialize.InvalidRecordError, *KeyReuseError) pass through as they are.
func (c *Catalog) wrap(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	var (
		conflict *ConflictError
		backlog  *BackpressureError
		invalid  *materialize.InvalidRecordError
		reused   *KeyReuseError
		version  *VersionNotFoundError
	)
	if errors.As(err, &conflict) || errors.As(err, &backlog) || errors.As(err, &invalid) || errors.As(err, &reused) || errors.As(err, &version) {
		return err
	}
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), c.classify(err))
}

// Times are stored as unix milliseconds in UTC. The zero time.Time is stored
// as NULL in the optional columns and read back as the zero time.Time.

// msOrNull is the column value of an optional time: NULL for the zero time.
func msOrNull(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixMilli()
}

// ms is the column value of a required time.
func ms(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// fromMs is the inverse of ms: 0 is the zero time.
func fromMs(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.UnixMilli(v).UTC()
}

// msTime scans a nullable INTEGER milliseconds column into a time.Time.
type msTime struct{ t *time.Time }

func (m msTime) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		*m.t = time.Time{}
	case int64:
		*m.t = fromMs(v)
	case int32:
		*m.t = fromMs(int64(v))
	default:
		return fmt.Errorf("time column holds %T, want integer milliseconds", src)
	}
	return nil
}

// scanner is *sql.Row or *sql.Rows.
type scanner interface {
	Scan(dest ...any) error
}

// placeholders returns "?, ?, ..." with n placeholders.
func placeholders(n int) string {
	if n <= 0 {
		return ""
	}
	b := make([]byte, 0, 3*n)
	for i := range n {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = append(b, '?')
	}
	return string(b)
}

// updateOne runs in tx an UPDATE (query, with ? placeholders) that must
// match one row: ErrNotFound when it matches none.
func (c *Catalog) updateOne(ctx context.Context, tx *sql.Tx, query string, args ...any) error {
	res, err := tx.ExecContext(ctx, c.d.q(query), args...)
	return oneRow(res, err, ErrNotFound)
}

// oneRow checks the outcome (res, err) of a statement that must change
// exactly one row: err as it is, else miss when it changed none (or, on
// a key that is not unique, several).
func oneRow(res sql.Result, err, miss error) error {
	if err != nil {
		return err
	}
	n, err := rowsAffected(res)
	if err != nil {
		return err
	}
	if n != 1 {
		return miss
	}
	return nil
}

// rowsAffected returns res.RowsAffected, as an error when the driver cannot
// tell.
func rowsAffected(res sql.Result) (int64, error) {
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("rows affected: %w", err)
	}
	return n, nil
}

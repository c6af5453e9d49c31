package catalog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// errKind classifies a driver error for the mapping to sentinel errors.
type errKind int

const (
	kindOther       errKind = iota
	kindUnique              // unique or primary-key violation
	kindForeignKey          // foreign-key violation
	kindUnavailable         // busy, locked, connection lost: transient
	kindFull                // out of disk space or resources: see fullCode
)

// dialect is everything that differs between the SQL databases the catalog
// runs on. The queries in the rest of the package are written once, with "?"
// placeholders, in SQL that both SQLite and PostgreSQL accept.
type dialect struct {
	name string
	// goose is the migration dialect; migrations is the directory of the
	// embedded SQL files (see migrations.go).
	goose        goose.Dialect
	migrations   string
	gooseOptions []goose.ProviderOption
	// numbered: placeholders are $1, $2, ... instead of ?.
	numbered bool
	// forUpdate is appended to a SELECT that reads a row the transaction is
	// about to change, to lock it ("" where the write transaction already
	// holds the database's only write lock).
	forUpdate string
	// skipLocked is appended to the SELECT of jobs (table alias j) that a
	// replica is about to claim or take over: rows another transaction
	// holds are skipped instead of waited for ("" on SQLite, whose write
	// transaction is the only one).
	skipLocked string
	// clockMs is the SQL expression of the database's clock in unix
	// milliseconds, with one placeholder whose argument is Catalog.dbNow:
	// the time the catalog supplies, or NULL for the server's own.
	clockMs string
	// processClock: the database has no clock of its own apart from the
	// one process that uses it (SQLite); the catalog supplies it.
	processClock bool
	// nextQueueSeq is the SQL expression of the next jobs.queue_seq.
	nextQueueSeq string
	// readTx are the options of a transaction that must read a consistent
	// snapshot.
	readTx *sql.TxOptions
	// connect opens the write and read pools for dsn (they may be the same
	// *sql.DB). The pools are configured but not necessarily connected.
	connect func(ctx context.Context, dsn string) (w, r *sql.DB, err error)
	// check runs after the migrations, to verify the session settings.
	check func(ctx context.Context, w *sql.DB) error
	// kind classifies a driver error.
	kind func(err error) errKind
	// reservePath returns the path of the space-reserve file of the
	// database dsn names; nil where the catalog keeps no reserve (a server
	// database).
	reservePath func(dsn string) string
	// purgeLater: DeleteCollection deletes the collection row in one small
	// transaction and its log rows afterwards in chunks (see
	// deleteCollection). Statements of that path may be SQLite's own.
	purgeLater bool
	// fullCode names the code of a kindFull error ("SQLITE_FULL",
	// "SQLSTATE 53100"), for StorageFullError.Code.
	fullCode func(err error) string
}

// q rewrites the "?" placeholders of query for the dialect.
func (d *dialect) q(query string) string {
	if !d.numbered {
		return query
	}
	return rebindNumbered(query)
}

// rebindNumbered replaces each "?" with $1, $2, ... in order. The package's
// queries never contain "?" inside string literals or identifiers.
func rebindNumbered(query string) string {
	n := strings.Count(query, "?")
	if n == 0 {
		return query
	}
	var b strings.Builder
	b.Grow(len(query) + 3*n)
	i := 0
	for {
		j := strings.IndexByte(query, '?')
		if j < 0 {
			b.WriteString(query)
			return b.String()
		}
		i++
		b.WriteString(query[:j])
		b.WriteByte('$')
		b.WriteString(strconv.Itoa(i))
		query = query[j+1:]
	}
}

// dialectFor returns the dialect of a Config.Driver value.
func dialectFor(driver string) (*dialect, error) {
	switch driver {
	case "", "sqlite":
		return sqliteDialect(defaultBusyTimeout), nil
	case "postgres":
		return postgresDialect(), nil
	}
	return nil, fmt.Errorf("unknown catalog driver %q (want sqlite or postgres): %w", driver, ErrInvalidArgument)
}

// defaultBusyTimeout is how long a SQLite connection waits for a lock held by
// another connection (another process, or a checkpoint) before failing with
// SQLITE_BUSY, which the package reports as ErrUnavailable.
const defaultBusyTimeout = 5 * time.Second

// sqliteDialect is modernc.org/sqlite (pure Go) in WAL mode: one writer
// connection whose transactions start with BEGIN IMMEDIATE (so a transaction
// that reads before it writes never fails to upgrade its lock), and a pool of
// read-only connections that see consistent snapshots without blocking the
// writer.
func sqliteDialect(busyTimeout time.Duration) *dialect {
	return &dialect{
		name:       "sqlite",
		goose:      goose.DialectSQLite3,
		migrations: "migrations/sqlite",
		readTx:     &sql.TxOptions{ReadOnly: true},
		// MAX + 1 is exact: the write transaction holds the database's only
		// write lock.
		nextQueueSeq: `(SELECT COALESCE(MAX(queue_seq), 0) + 1 FROM jobs)`,
		clockMs:      `CAST(? AS INTEGER)`,
		processClock: true,
		connect: func(ctx context.Context, dsn string) (*sql.DB, *sql.DB, error) {
			return sqliteConnect(dsn, busyTimeout)
		},
		check:       sqliteCheck,
		kind:        sqliteKind,
		fullCode:    sqliteFullCode,
		reservePath: func(dsn string) string { return sqliteFile(dsn) + "-reserve" },
		purgeLater:  true,
	}
}

// sqliteConnect builds the writer and reader DSNs from a file path (with an
// optional "file:" prefix and query parameters, which are kept) and opens the
// two pools, creating the parent directory of the file if needed.
func sqliteConnect(dsn string, busyTimeout time.Duration) (*sql.DB, *sql.DB, error) {
	path, userQuery, _ := strings.Cut(dsn, "?")
	file := sqliteFile(dsn)
	if file == "" || file == ":memory:" || strings.Contains(userQuery, "mode=memory") {
		return nil, nil, fmt.Errorf("sqlite DSN %q: an in-memory database cannot be shared by the catalog's connections; use a file: %w", dsn, ErrInvalidArgument)
	}
	if dir := filepath.Dir(file); dir != "" {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return nil, nil, fmt.Errorf("create catalog directory %s: %w", dir, err)
		}
	}
	common := url.Values{}
	common.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busyTimeout.Milliseconds()))
	common.Add("_pragma", "foreign_keys(1)")
	build := func(extra url.Values) string {
		v := url.Values{}
		for k, vs := range common {
			v[k] = append(v[k], vs...)
		}
		for k, vs := range extra {
			v[k] = append(v[k], vs...)
		}
		s := path + "?" + v.Encode()
		if userQuery != "" {
			s += "&" + userQuery
		}
		return s
	}
	// synchronous(FULL): in WAL mode every commit fsyncs the WAL, so a
	// commit that returned survives a power loss. NORMAL (the usual WAL
	// pairing) only fsyncs at checkpoints and can lose the last commits,
	// i.e. a compaction's commit, an acknowledged append or a job's end.
	// The cost is one fsync per write transaction (docs/semantics.md "Durability").
	// auto_vacuum(INCREMENTAL) takes effect for a database created by this
	// connection (before its first table), so that deleting a collection
	// can return the freed pages to the file system; on an existing
	// database without it, it changes nothing (docs/storage.md "Disk full").
	wdsn := build(url.Values{
		"_pragma": {"auto_vacuum(INCREMENTAL)", "journal_mode(WAL)", "synchronous(FULL)"},
		"_txlock": {"immediate"},
	})
	rdsn := build(url.Values{"_pragma": {"query_only(1)"}})

	w, err := sql.Open("sqlite", wdsn)
	if err != nil {
		return nil, nil, fmt.Errorf("open sqlite %s: %w", file, err)
	}
	// One writer: SQLite serializes writers anyway; queueing them in the pool
	// instead of in busy_timeout keeps them fair and cancellable.
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)

	r, err := sql.Open("sqlite", rdsn)
	if err != nil {
		_ = w.Close()
		return nil, nil, fmt.Errorf("open sqlite %s: %w", file, err)
	}
	n := max(4, runtime.GOMAXPROCS(0))
	r.SetMaxOpenConns(n)
	r.SetMaxIdleConns(n)
	r.SetConnMaxLifetime(0)
	r.SetConnMaxIdleTime(5 * time.Minute)
	return w, r, nil
}

// sqliteFile is the database file of a SQLite DSN (a path, with an optional
// "file:" prefix and query parameters).
func sqliteFile(dsn string) string {
	path, _, _ := strings.Cut(dsn, "?")
	return filepath.Clean(strings.TrimPrefix(path, "file:"))
}

// sqliteCheck verifies that the database really is in WAL mode (a file
// system that cannot hold the shared-memory file silently keeps the rollback
// journal, with which readers block the writer).
func sqliteCheck(ctx context.Context, w *sql.DB) error {
	var mode string
	if err := w.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return fmt.Errorf("read journal mode: %w", err)
	}
	if !strings.EqualFold(mode, "wal") {
		return fmt.Errorf("sqlite journal mode is %q, want wal", mode)
	}
	return nil
}

func sqliteKind(err error) errKind {
	var e *sqlite.Error
	if !errors.As(err, &e) {
		if _, full := IsNoSpace(err); full {
			return kindFull // a write of the VFS outside SQLite's own mapping
		}
		return kindOther
	}
	switch code := e.Code(); {
	case code&0xff == sqlite3.SQLITE_FULL:
		return kindFull
	case code == sqlite3.SQLITE_CONSTRAINT_UNIQUE, code == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
		return kindUnique
	case code == sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY:
		return kindForeignKey
	case code&0xff == sqlite3.SQLITE_BUSY, code&0xff == sqlite3.SQLITE_LOCKED:
		return kindUnavailable
	}
	return kindOther
}

// sqliteFullCode names the code of a kindFull SQLite error.
func sqliteFullCode(err error) string {
	if code, ok := IsNoSpace(err); ok {
		return code
	}
	return "SQLITE_FULL"
}

// postgresDialect is PostgreSQL through pgx's database/sql driver, for a
// catalog shared by several replicas. One pool serves reads and writes;
// rows a transaction is about to change are locked with SELECT ... FOR
// UPDATE, snapshot reads run in REPEATABLE READ, and migrations take a
// session advisory lock so that replicas starting together do not race.
func postgresDialect() *dialect {
	locker, err := lock.NewPostgresSessionLocker()
	var opts []goose.ProviderOption
	if err == nil { // only fails for invalid options, and none are given
		opts = append(opts, goose.WithSessionLocker(locker))
	}
	return &dialect{
		name:         "postgres",
		goose:        goose.DialectPostgres,
		migrations:   "migrations/postgres",
		gooseOptions: opts,
		numbered:     true,
		forUpdate:    " FOR UPDATE",
		skipLocked:   " FOR UPDATE OF j SKIP LOCKED",
		nextQueueSeq: `nextval('jobs_queue_seq')`,
		// clock_timestamp(), not now(): the time of the statement, not of
		// the start of its transaction, which may have waited for a lock.
		clockMs: `COALESCE(CAST(? AS BIGINT), CAST(FLOOR(EXTRACT(EPOCH FROM clock_timestamp()) * 1000) AS BIGINT))`,
		readTx:  &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true},
		connect: func(ctx context.Context, dsn string) (*sql.DB, *sql.DB, error) {
			db, err := sql.Open("pgx", withIdleTxTimeout(withConnectTimeout(dsn, defaultConnectTimeout), defaultIdleTxTimeout))
			if err != nil {
				return nil, nil, fmt.Errorf("open postgres: %w", err)
			}
			db.SetMaxOpenConns(16)
			db.SetMaxIdleConns(16)
			db.SetConnMaxIdleTime(5 * time.Minute)
			db.SetConnMaxLifetime(time.Hour)
			return db, db, nil
		},
		kind:     postgresKind,
		fullCode: postgresFullCode,
	}
}

// postgresFullCode names the SQLSTATE of a kindFull PostgreSQL error.
func postgresFullCode(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return "SQLSTATE " + pe.Code
	}
	return "SQLSTATE 53000"
}

// defaultConnectTimeout bounds each PostgreSQL connection attempt when the
// DSN sets no connect_timeout, so that an unreachable server fails Open
// instead of hanging it.
const defaultConnectTimeout = 10 * time.Second

// withConnectTimeout adds connect_timeout (whole seconds, as libpq reads it)
// to a URL or key=value DSN that has none.
func withConnectTimeout(dsn string, d time.Duration) string {
	secs := strconv.Itoa(int(d.Seconds()))
	if isPostgresURL(dsn) {
		u, err := url.Parse(dsn)
		if err != nil {
			return dsn // pgx reports the parse error
		}
		q := u.Query()
		if q.Has("connect_timeout") {
			return dsn
		}
		q.Set("connect_timeout", secs)
		u.RawQuery = q.Encode()
		return u.String()
	}
	if strings.Contains(dsn, "connect_timeout=") {
		return dsn
	}
	return strings.TrimSpace(dsn) + " connect_timeout=" + secs
}

// defaultIdleTxTimeout is the idle_in_transaction_session_timeout of the
// catalog's PostgreSQL sessions when the DSN sets none: a replica frozen
// inside a transaction (SIGSTOP, a VM pause) would otherwise hold its row
// locks for as long as its TCP connection lives, and since other replicas
// skip locked rows (FOR UPDATE SKIP LOCKED), its job could not be taken over
// when its lease expires. After this long idle in a transaction, the server
// ends the session and releases the locks. The catalog's transactions run
// their statements back to back, so a healthy replica never comes near it.
const defaultIdleTxTimeout = 10 * time.Second

// withIdleTxTimeout adds idle_in_transaction_session_timeout (milliseconds;
// pgx sends unknown URL parameters as session settings) to a URL or
// key=value DSN that has none.
func withIdleTxTimeout(dsn string, d time.Duration) string {
	const name = "idle_in_transaction_session_timeout"
	ms := strconv.FormatInt(d.Milliseconds(), 10)
	if isPostgresURL(dsn) {
		u, err := url.Parse(dsn)
		if err != nil {
			return dsn // pgx reports the parse error
		}
		q := u.Query()
		if q.Has(name) {
			return dsn
		}
		q.Set(name, ms)
		u.RawQuery = q.Encode()
		return u.String()
	}
	if strings.Contains(dsn, name+"=") {
		return dsn
	}
	return strings.TrimSpace(dsn) + " " + name + "=" + ms
}

func postgresKind(err error) errKind {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "23505": // unique_violation
			return kindUnique
		case "23503": // foreign_key_violation
			return kindForeignKey
		case "40001", // serialization_failure
			"40P01", // deadlock_detected
			"55P03", // lock_not_available
			"53300", // too_many_connections
			"57P01", // admin_shutdown
			"57P03": // cannot_connect_now
			return kindUnavailable
		}
		if strings.HasPrefix(pe.Code, "08") { // connection exceptions
			return kindUnavailable
		}
		// Class 53, insufficient resources: 53000, 53100 disk_full, 53200
		// out_of_memory, 53400 configuration_limit_exceeded (53300 is
		// above: transient).
		if strings.HasPrefix(pe.Code, "53") {
			return kindFull
		}
		return kindOther
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return kindOther // the caller gave up; not the database's state
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	if errors.As(err, &ce) || errors.As(err, &ne) || pgconn.SafeToRetry(err) {
		return kindUnavailable
	}
	return kindOther
}

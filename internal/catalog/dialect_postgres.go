package catalog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

// PostgreSQL's dialect: the catalog shared by several replicas. Every SKIP
// LOCKED of the package is here.

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
		name:             "postgres",
		goose:            goose.DialectPostgres,
		migrations:       "migrations/postgres",
		gooseOptions:     opts,
		numbered:         true,
		forUpdate:        " FOR UPDATE",
		skipLocked:       " FOR UPDATE OF j SKIP LOCKED",
		claimCollections: "collections c",
		nextQueueSeq:     `nextval('jobs_queue_seq')`,
		// clock_timestamp(), not now(): the time of the statement, not of
		// the start of its transaction, which may have waited for a lock.
		clockMs: `COALESCE(CAST(? AS BIGINT), CAST(FLOOR(EXTRACT(EPOCH FROM clock_timestamp()) * 1000) AS BIGINT))`,
		readTx:  &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true},
		engine:  postgresEngine{},
	}
}

// postgresEngine is PostgreSQL's behaviour: a server shared by replicas,
// with no reserve file and no process lock, and a collection's log rows
// deleted in the transaction that deletes it.
type postgresEngine struct{}

func (postgresEngine) connect(_ context.Context, dsn string) (pools, error) {
	db, err := sql.Open("pgx", withIdleTxTimeout(withConnectTimeout(dsn, defaultConnectTimeout), defaultIdleTxTimeout))
	if err != nil {
		return pools{}, fmt.Errorf("open postgres: %w", err)
	}
	db.SetMaxOpenConns(16)
	db.SetMaxIdleConns(16)
	db.SetConnMaxIdleTime(5 * time.Minute)
	db.SetConnMaxLifetime(time.Hour)
	return pools{w: db, r: db, tail: db}, nil
}

func (postgresEngine) check(context.Context, *sql.DB) error   { return nil }
func (postgresEngine) kind(err error) errKind                 { return postgresKind(err) }
func (postgresEngine) fullCode(err error) string              { return postgresFullCode(err) }
func (postgresEngine) reservePath(string) string              { return "" }
func (postgresEngine) lock(string, string) (*procLock, error) { return nil, nil }
func (postgresEngine) opened(context.Context, *Catalog)       {}
func (postgresEngine) deleted(context.Context, *Catalog)      {}

func (postgresEngine) deleteTx(ctx context.Context, c *Catalog, fn func(tx *sql.Tx) error) error {
	return c.writeTx(ctx, fn)
}

func (postgresEngine) deleteLog(ctx context.Context, c *Catalog, tx *sql.Tx, id string) error {
	if _, err := tx.ExecContext(ctx, c.d.q(`DELETE FROM log WHERE collection_id = ?`), id); err != nil {
		return fmt.Errorf("delete log rows: %w", err)
	}
	return nil
}

// postgresAppendLog is the log append of PostgreSQL: the whole batch in one
// statement, its records and record ids as two bytea arrays (pgx sends
// them in binary) unnested in order, the offsets numbered from the first.
// One round trip and one plan per append, where multi-row INSERTs of
// insertChunk rows took a round trip per chunk and a prepare per call.
const postgresAppendLog = `INSERT INTO log (collection_id, log_offset, appended_at, record, record_id)
	SELECT $1, $2::BIGINT + t.n - 1, $3, t.record, t.record_id
	FROM unnest($4::BYTEA[], $5::BYTEA[]) WITH ORDINALITY AS t (record, record_id, n)`

func (postgresEngine) appendLog(ctx context.Context, _ *Catalog, tx *sql.Tx, rows logRows) error {
	res, err := tx.ExecContext(ctx, postgresAppendLog, rows.collectionID, rows.first, rows.appendedAt, rows.records, rows.ids)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err == nil && n != int64(len(rows.records)) {
		return fmt.Errorf("inserted %d log rows of %d", n, len(rows.records))
	}
	return nil
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
// skip locked rows (FOR UPDATE ... SKIP LOCKED), its job could not be taken over
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

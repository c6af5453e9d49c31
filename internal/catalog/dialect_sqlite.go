package catalog

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/pressly/goose/v3"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// SQLite's dialect: modernc.org/sqlite, the embedded default. Every PRAGMA
// and rowid of the package is here.

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
		name:             "sqlite",
		claimCollections: "collections c INDEXED BY collections_claim",
		goose:            goose.DialectSQLite3,
		migrations:       "migrations/sqlite",
		readTx:           &sql.TxOptions{ReadOnly: true},
		// modernc.org/sqlite compiles a statement at every unprepared
		// call; a prepared one keeps its program (stmts.go).
		prepareReads: true,
		// MAX + 1 is exact: the write transaction holds the database's only
		// write lock.
		nextQueueSeq: `(SELECT COALESCE(MAX(queue_seq), 0) + 1 FROM jobs)`,
		clockMs:      `CAST(? AS INTEGER)`,
		processClock: true,
		engine:       sqliteEngine{busyTimeout: busyTimeout},
	}
}

// sqliteEngine is SQLite's behaviour: a file with a space reserve beside
// it and a process lock, and a collection's log rows purged in chunks after
// its delete (see deleteLog).
type sqliteEngine struct{ busyTimeout time.Duration }

func (e sqliteEngine) connect(_ context.Context, dsn string) (pools, error) {
	return sqliteConnect(dsn, e.busyTimeout)
}

func (sqliteEngine) check(ctx context.Context, w *sql.DB) error { return sqliteCheck(ctx, w) }
func (sqliteEngine) kind(err error) errKind                     { return sqliteKind(err) }
func (sqliteEngine) fullCode(err error) string                  { return sqliteFullCode(err) }
func (sqliteEngine) reservePath(dsn string) string              { return sqliteFile(dsn) + "-reserve" }
func (sqliteEngine) lock(dsn, holder string) (*procLock, error) { return sqliteLock(dsn, holder) }

// opened finishes the purges of collections deleted before a crash or
// while the disk was full.
func (sqliteEngine) opened(ctx context.Context, c *Catalog) {
	if err := c.purgeLogs(ctx); err != nil {
		c.log.WarnContext(ctx, "purge log rows of deleted collections; retried at the next delete or start", "err", err)
	}
}

// deleteTx runs fn with foreign keys off, so that deleting the collection
// row does not cascade to its log rows in the same transaction.
func (sqliteEngine) deleteTx(ctx context.Context, c *Catalog, fn func(tx *sql.Tx) error) error {
	return c.withoutForeignKeys(ctx, fn)
}

// deleteLog records the collection in log_purges: its rows go afterwards
// in chunks (purgeLogs), so that a delete needs no space for one large
// transaction on a full disk.
func (sqliteEngine) deleteLog(ctx context.Context, c *Catalog, tx *sql.Tx, id string) error {
	if _, err := tx.ExecContext(ctx, `INSERT INTO log_purges (collection_id, deleted_at) VALUES (?, ?)`, id, ms(c.now())); err != nil {
		return fmt.Errorf("record log purge: %w", err)
	}
	return nil
}

// deleted purges the log rows of the collection just deleted (gone for
// every reader already); rows left by a failure here are purged by the next
// delete or the next Open.
func (e sqliteEngine) deleted(ctx context.Context, c *Catalog) { e.opened(ctx, c) }

// appendLog inserts with multi-row INSERTs: SQLite has no array type, and
// its statements run in the process, with no round trip to save.
func (sqliteEngine) appendLog(ctx context.Context, c *Catalog, tx *sql.Tx, rows logRows) error {
	return c.insertLogRowsMulti(ctx, tx, rows)
}

// sqliteTailMmapBytes is the PRAGMA mmap_size of the tail-read
// connections (pools.tail): up to the first 256 MiB of the database file
// are read through a memory map, the rest with a read(2) per page as
// elsewhere. A tail read by record id visits one table page per row; the
// map halved the catalog's CPU of a paged GetRecords over a 63,436-record
// uncompacted log (BenchmarkGetRecordsPaged/tail: 0.94 → 0.50 s a read).
// The pages a tail connection maps count in the process's resident memory
// (file pages, which the kernel reclaims like its page cache), at most
// this much per connection.
const sqliteTailMmapBytes = 256 << 20

// sqliteConnect builds the writer and reader DSNs from a file path (with an
// optional "file:" prefix and query parameters, which are kept) and opens the
// three pools, creating the parent directory of the file if needed.
func sqliteConnect(dsn string, busyTimeout time.Duration) (pools, error) {
	path, userQuery, _ := strings.Cut(dsn, "?")
	file := sqliteFile(dsn)
	if file == "" || file == ":memory:" || strings.Contains(userQuery, "mode=memory") {
		return pools{}, fmt.Errorf("sqlite DSN %q: an in-memory database cannot be shared by the catalog's connections; use a file: %w", dsn, ErrInvalidArgument)
	}
	if dir := filepath.Dir(file); dir != "" {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return pools{}, fmt.Errorf("create catalog directory %s: %w", dir, err)
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
	tdsn := build(url.Values{"_pragma": {"query_only(1)", fmt.Sprintf("mmap_size(%d)", sqliteTailMmapBytes)}})

	w, err := sql.Open("sqlite", wdsn)
	if err != nil {
		return pools{}, fmt.Errorf("open sqlite %s: %w", file, err)
	}
	// One writer: SQLite serializes writers anyway; queueing them in the pool
	// instead of in busy_timeout keeps them fair and cancellable.
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)

	p := pools{w: w}
	n := max(4, runtime.GOMAXPROCS(0))
	for _, r := range []struct {
		db  **sql.DB
		dsn string
	}{{&p.r, rdsn}, {&p.tail, tdsn}} {
		db, err := sql.Open("sqlite", r.dsn)
		if err != nil {
			p.close()
			return pools{}, fmt.Errorf("open sqlite %s: %w", file, err)
		}
		db.SetMaxOpenConns(n)
		db.SetMaxIdleConns(n)
		db.SetConnMaxLifetime(0)
		db.SetConnMaxIdleTime(5 * time.Minute)
		*r.db = db
	}
	return p, nil
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

// withoutForeignKeys runs fn in a write transaction on the writer
// connection with SQLite's foreign keys off (so deleting a collection row
// does not cascade to its log rows), and turns them on again.
func (c *Catalog) withoutForeignKeys(ctx context.Context, fn func(tx *sql.Tx) error) error {
	conn, err := c.w.Conn(ctx)
	if err != nil {
		return fmt.Errorf("take the writer connection: %w", err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `PRAGMA foreign_keys = OFF`); err != nil {
		return fmt.Errorf("turn foreign keys off: %w", err)
	}
	defer func() {
		if _, err := conn.ExecContext(context.WithoutCancel(ctx), `PRAGMA foreign_keys = ON`); err != nil {
			c.log.ErrorContext(ctx, "turn foreign keys on again; dropping the connection", "err", err)
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		}
	}()
	return c.writeTxOn(ctx, conn, fn)
}

// purgeChunk is the most log rows one purge transaction deletes; halved
// down to 1 while a chunk does not fit in the free space.
const purgeChunk = 4096

// purgeLogs deletes the log rows of the collections in log_purges, in
// transactions of at most purgeChunk rows, each followed by a checkpoint
// that lets the next one reuse the write-ahead log's space, and removes a
// collection from log_purges once its rows are gone.
func (c *Catalog) purgeLogs(ctx context.Context) error {
	var ids []string
	err := c.readTx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT collection_id FROM log_purges ORDER BY deleted_at`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				return err
			}
			ids = append(ids, id)
		}
		return rows.Err()
	})
	if err != nil {
		return c.wrap(err, "list log purges")
	}
	for _, id := range ids {
		chunk := purgeChunk
		for {
			var n int64
			err := c.writeTx(ctx, func(tx *sql.Tx) error {
				res, err := tx.ExecContext(ctx, `DELETE FROM log WHERE rowid IN (SELECT rowid FROM log WHERE collection_id = ? LIMIT ?)`, id, chunk)
				if err != nil {
					return err
				}
				n, err = rowsAffected(res)
				return err
			})
			if c.storageFull(err) != nil {
				// Spend the reserve first, then try smaller chunks.
				if c.releaseReserve(ctx, "purge the log of a deleted collection", id) {
					continue
				}
				if chunk > 1 {
					chunk /= 2
					continue
				}
			}
			if err != nil {
				return c.wrap(err, "purge log rows of deleted collection %s", id)
			}
			// A passive checkpoint: when no reader holds an older
			// snapshot, the next transaction writes the log from its start.
			if _, err := c.w.ExecContext(ctx, `PRAGMA wal_checkpoint(PASSIVE)`); err != nil {
				c.log.WarnContext(ctx, "checkpoint while purging log rows", "err", err)
			}
			if n < int64(chunk) {
				break
			}
		}
		err := c.writeTx(ctx, func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `DELETE FROM log_purges WHERE collection_id = ?`, id)
			return err
		})
		if err != nil {
			return c.wrap(err, "finish log purge of deleted collection %s", id)
		}
	}
	if len(ids) > 0 {
		return c.shrink(ctx)
	}
	return nil
}

// vacuumChunk is the most free pages one incremental vacuum returns.
const vacuumChunk = 1024

// shrink returns the database's free pages to the file system (SQLite
// databases created with auto_vacuum = INCREMENTAL; a no-op for others), in
// steps of vacuumChunk pages, each followed by a checkpoint, which
// truncates the file: deleting a collection then frees space on the volume
// for the blob store and the space reserve as well.
func (c *Catalog) shrink(ctx context.Context) error {
	var mode int
	if err := c.w.QueryRowContext(ctx, `PRAGMA auto_vacuum`).Scan(&mode); err != nil {
		return c.wrap(err, "read auto_vacuum")
	}
	if mode != 2 { // INCREMENTAL
		return nil
	}
	for {
		var free int64
		if err := c.w.QueryRowContext(ctx, `PRAGMA freelist_count`).Scan(&free); err != nil {
			return c.wrap(err, "read freelist_count")
		}
		if free == 0 {
			return nil
		}
		// incremental_vacuum returns no row; Exec runs it to the end.
		if _, err := c.w.ExecContext(ctx, fmt.Sprintf(`PRAGMA incremental_vacuum(%d)`, vacuumChunk)); err != nil {
			return c.wrap(err, "return free pages to the file system")
		}
		if _, err := c.w.ExecContext(ctx, `PRAGMA wal_checkpoint(PASSIVE)`); err != nil {
			return c.wrap(err, "checkpoint after incremental vacuum")
		}
		var after int64
		if err := c.w.QueryRowContext(ctx, `PRAGMA freelist_count`).Scan(&after); err != nil {
			return c.wrap(err, "read freelist_count")
		}
		if after >= free {
			return nil // no progress (e.g. the vacuum failed silently): stop
		}
	}
}

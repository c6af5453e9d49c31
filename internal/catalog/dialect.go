package catalog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/pressly/goose/v3"
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
// runs on: the SQL fragments below, and the behaviour only one database has
// (the methods of engine). Each database's dialect is in a file of its own,
// dialect_sqlite.go and dialect_postgres.go; the queries in the rest of the
// package are written once, with "?" placeholders, in SQL that both accept.
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
	// holds are passed over instead of waited for ("" on SQLite, whose
	// write transaction is the only one).
	skipLocked string
	// claimCollections names the collections table (alias c) in the
	// claim's ordering query: on SQLite with the covering index of the
	// columns the order reads (collections_claim), which its planner
	// passes over for the unique index on id and a row fetch per queued
	// job.
	claimCollections string
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
	// prepareReads: readQuery keeps the read pool's statements prepared
	// (stmtCache), where the driver does not cache them itself.
	prepareReads bool
	engine
}

// pools are a catalog's connection pools. They may be one *sql.DB.
type pools struct {
	w *sql.DB // writes: a single connection for SQLite
	r *sql.DB // reads, the sequential scans of the log among them
	// tail reads the uncompacted log tail by record id for GetRecords and
	// QueryRecords (readTail): rows in id order, which are in no order in
	// the log table, so one page of a few hundred bytes is read per row.
	// SQLite's tail connections map the file (PRAGMA mmap_size) so that
	// such a read costs a memory access, not a system call; the scans of
	// the compaction stay on r, whose reads of file pages do not count in
	// the process's resident memory.
	tail *sql.DB
}

// close closes each distinct pool that is open.
func (p pools) close() error {
	var errs []error
	seen := map[*sql.DB]bool{nil: true}
	for _, db := range []*sql.DB{p.w, p.r, p.tail} {
		if !seen[db] {
			seen[db] = true
			errs = append(errs, db.Close())
		}
	}
	return errors.Join(errs...)
}

// engine is the behaviour of one database, implemented by sqliteEngine
// (dialect_sqlite.go) and postgresEngine (dialect_postgres.go).
type engine interface {
	// connect opens the pools for dsn (they may be the same *sql.DB). The
	// pools are configured but not necessarily connected.
	connect(ctx context.Context, dsn string) (pools, error)
	// check runs after the migrations, to verify the session settings.
	check(ctx context.Context, w *sql.DB) error
	// kind classifies a driver error.
	kind(err error) errKind
	// fullCode names the code of a kindFull error ("SQLITE_FULL",
	// "SQLSTATE 53100"), for StorageFullError.Code.
	fullCode(err error) string
	// reservePath returns the path of the space-reserve file of the
	// database dsn names; "" where the catalog keeps no reserve (a server
	// database).
	reservePath(dsn string) string
	// lock takes the process lock of an exclusive catalog for holder; nil
	// where replicas share the database (its job queue is in the catalog).
	lock(dsn, holder string) (*procLock, error)
	// opened runs at the end of Open: work a crash or a full disk left.
	opened(ctx context.Context, c *Catalog)
	// deleteTx runs the transaction fn of DeleteCollection.
	deleteTx(ctx context.Context, c *Catalog, fn func(tx *sql.Tx) error) error
	// deleteLog deletes, or schedules the deletion of, the log rows of the
	// collection id that DeleteCollection deletes in tx.
	deleteLog(ctx context.Context, c *Catalog, tx *sql.Tx, id string) error
	// deleted runs after DeleteCollection committed.
	deleted(ctx context.Context, c *Catalog)
	// appendLog inserts the log rows of one append in tx (the append's
	// transaction, which holds the collection's row).
	appendLog(ctx context.Context, c *Catalog, tx *sql.Tx, rows logRows) error
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

package catalog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/gofrs/flock"
)

// ErrLocked: the catalog is held by another process that opened it with
// Config.Exclusive (another `compactor serve`).
var ErrLocked = errors.New("catalog in use by another process")

// LockedError is returned by an exclusive Open when another process holds
// the catalog, and sent on LockLost when a PostgreSQL catalog's lock was
// taken over. It matches ErrLocked.
type LockedError struct {
	// Catalog names the catalog: the SQLite file, or the PostgreSQL
	// database and schema.
	Catalog string
	// Holder is what the holder says about itself (its Config.Holder and
	// start time from the lock file; the application name, client address
	// and backend start from pg_stat_activity); "" when it cannot be read.
	Holder string
}

func (e *LockedError) Error() string {
	holder := e.Holder
	if holder == "" {
		holder = "a process that could not be identified"
	}
	return fmt.Sprintf("catalog %s is in use by another compactor serve (%s); two processes on one catalog would each run their own job queue against it", e.Catalog, holder)
}

// Is reports whether target is ErrLocked.
func (e *LockedError) Is(target error) bool { return target == ErrLocked }

// defaultLockCheckInterval is how often an exclusive PostgreSQL catalog
// checks its lock connection when Config.LockCheckInterval is 0.
const defaultLockCheckInterval = 10 * time.Second

// procLock is the process lock of an exclusive catalog.
type procLock struct {
	release func() error
	// lost receives one error when the lock was lost for good; nil
	// channel for locks that cannot be lost (a lock file).
	lost chan error
}

// defaultHolder describes this process when Config.Holder is empty.
func defaultHolder() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("pid %d on %s", os.Getpid(), host)
}

// sqliteLock takes an exclusive flock(2) on "<database file>.lock", beside
// the database, and writes the holder into it. The lock is the open file
// description's: it ends with the process, however it ends, so a crash never
// leaves a stale lock. Deleting the lock file while a process holds it
// defeats it; it is left in place at Close.
func sqliteLock(dsn, holder string) (*procLock, error) {
	file := sqliteFile(dsn)
	path := file + ".lock"
	fl := flock.New(path, flock.SetPermissions(0o640))
	ok, err := fl.TryLock()
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if !ok {
		b, _ := os.ReadFile(path)
		return nil, &LockedError{Catalog: file, Holder: strings.TrimSpace(string(b))}
	}
	note := fmt.Sprintf("%s, since %s\n", holder, time.Now().UTC().Format(time.RFC3339))
	if err := os.WriteFile(path, []byte(note), 0o640); err != nil {
		_ = fl.Unlock()
		return nil, fmt.Errorf("write lock file %s: %w", path, err)
	}
	return &procLock{release: fl.Unlock}, nil
}

// sqliteFile is the database file of a SQLite DSN (without "file:" and the
// query).
func sqliteFile(dsn string) string {
	path, _, _ := strings.Cut(dsn, "?")
	return filepath.Clean(strings.TrimPrefix(path, "file:"))
}

// pgLock is a session advisory lock held on one connection of the pool,
// keyed by the database and schema the catalog uses, so that catalogs in
// different schemas of one database do not exclude each other.
type pgLock struct {
	db       *sql.DB
	key      int64
	name     string // database.schema, for messages
	holder   string
	interval time.Duration
	log      *slog.Logger

	mu   sync.Mutex // guards conn
	conn *sql.Conn  // nil after the connection was lost, until re-taken

	lost chan error
	stop chan struct{}
	done chan struct{}
}

// postgresLock takes the catalog's advisory lock (pg_try_advisory_lock,
// which never waits) and starts a keeper that checks the lock's connection
// every interval: after a reconnection it takes the lock again, and when
// another process took it meanwhile it sends a *LockedError on lost and
// stops. The first connection to the server is made here, so an
// unreachable server is reported by Open.
func postgresLock(ctx context.Context, db *sql.DB, holder string, interval time.Duration, logger *slog.Logger) (*procLock, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	var database, schema string
	if err := conn.QueryRowContext(ctx, `SELECT current_database(), coalesce(current_schema(), '')`).Scan(&database, &schema); err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("read database and schema: %w", err)
	}
	if schema == "" {
		_ = conn.Close()
		return nil, fmt.Errorf("database %s: no schema of the search_path exists; create it or set search_path in the URL: %w", database, ErrInvalidArgument)
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte("compactor serve catalog lock\x00" + database + "\x00" + schema))
	l := &pgLock{
		db: db, key: int64(h.Sum64()), name: database + "." + schema, holder: holder,
		interval: interval, log: logger,
		lost: make(chan error, 1), stop: make(chan struct{}), done: make(chan struct{}),
	}
	if err := l.take(ctx, conn); err != nil {
		_ = conn.Close()
		return nil, err
	}
	l.conn = conn
	go l.keep()
	return &procLock{release: l.release, lost: l.lost}, nil
}

// take tries the lock on conn and names this process on the connection
// (application_name, which pg_stat_activity shows to the next process).
func (l *pgLock) take(ctx context.Context, conn *sql.Conn) error {
	var ok bool
	if err := conn.QueryRowContext(ctx, `SELECT pg_try_advisory_lock($1)`, l.key).Scan(&ok); err != nil {
		return fmt.Errorf("take advisory lock: %w", err)
	}
	if !ok {
		return &LockedError{Catalog: l.name, Holder: l.lockHolder(ctx, conn)}
	}
	// application_name is at most 63 bytes; PostgreSQL would truncate it.
	app := truncate("compactor serve: "+l.holder, 63)
	if _, err := conn.ExecContext(ctx, `SELECT set_config('application_name', $1, false)`, app); err != nil {
		l.log.Warn("set application_name of the catalog lock connection", "err", err)
	}
	return nil
}

// lockHolder describes the session holding the lock, from pg_locks and
// pg_stat_activity ("" when it cannot be read, e.g. without the privilege
// to see other roles' sessions).
func (l *pgLock) lockHolder(ctx context.Context, conn *sql.Conn) string {
	hi, lo := int64(uint64(l.key)>>32), int64(uint32(l.key))
	var (
		pid     int64
		app     string
		client  string
		started sql.NullTime
	)
	err := conn.QueryRowContext(ctx, `
		SELECT l.pid, coalesce(a.application_name, ''), coalesce(host(a.client_addr), ''), a.backend_start
		FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid
		WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
		  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
		  AND l.classid::bigint = $1 AND l.objid::bigint = $2
		LIMIT 1`, hi, lo).Scan(&pid, &app, &client, &started)
	if err != nil {
		return ""
	}
	var parts []string
	if app != "" {
		parts = append(parts, app)
	}
	parts = append(parts, fmt.Sprintf("PostgreSQL backend pid %d", pid))
	if client != "" {
		parts = append(parts, "client "+client)
	}
	if started.Valid {
		parts = append(parts, "connected since "+started.Time.UTC().Format(time.RFC3339))
	}
	return strings.Join(parts, ", ")
}

func (l *pgLock) keep() {
	defer close(l.done)
	t := time.NewTicker(l.interval)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
		}
		if err := l.check(); err != nil {
			var locked *LockedError
			if errors.As(err, &locked) {
				l.log.Error("catalog lock lost to another process", "catalog", l.name, "holder", locked.Holder)
				l.lost <- err
				return
			}
			l.log.Warn("check catalog lock", "catalog", l.name, "err", err)
		}
	}
}

// check pings the lock's connection and, when it was lost (the server
// restarted, the connection was cut), takes the lock again on a new one.
// A *LockedError means another process holds the lock now.
func (l *pgLock) check() error {
	ctx, cancel := context.WithTimeout(context.Background(), max(l.interval, 5*time.Second))
	defer cancel()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conn != nil {
		err := l.conn.PingContext(ctx)
		if err == nil {
			return nil
		}
		l.log.Warn("catalog lock connection lost; taking the lock again", "catalog", l.name, "err", err)
		_ = l.conn.Close()
		l.conn = nil
	}
	conn, err := l.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	if err := l.take(ctx, conn); err != nil {
		_ = conn.Close()
		return err
	}
	l.conn = conn
	l.log.Info("catalog lock taken again", "catalog", l.name)
	return nil
}

// release stops the keeper and unlocks. Closing the pool afterwards ends
// the session, which releases the lock even if the unlock failed.
func (l *pgLock) release() error {
	close(l.stop)
	<-l.done
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conn == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := l.conn.ExecContext(ctx, `SELECT pg_advisory_unlock($1)`, l.key)
	err = errors.Join(err, l.conn.Close())
	l.conn = nil
	if err != nil {
		return fmt.Errorf("release catalog lock: %w", err)
	}
	return nil
}

// truncate cuts s to at most n bytes, on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

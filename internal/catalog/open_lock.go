package catalog

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gofrs/flock"
)

// ErrLocked: the SQLite catalog is held by another process that opened it
// with Config.Exclusive (another `compactor serve`).
var ErrLocked = errors.New("catalog in use by another process")

// LockedError is returned by an exclusive Open of a SQLite catalog that
// another process holds. It matches ErrLocked.
type LockedError struct {
	// Catalog is the SQLite database file.
	Catalog string
	// Holder is what the holder says about itself (its Config.Holder and
	// start time, from the lock file); "" when it cannot be read.
	Holder string
}

func (e *LockedError) Error() string {
	holder := e.Holder
	if holder == "" {
		holder = "a process that could not be identified"
	}
	return fmt.Sprintf("catalog %s is in use by another compactor serve (%s); a SQLite catalog serves one process: run several replicas on a PostgreSQL catalog", e.Catalog, holder)
}

// Is reports whether target is ErrLocked.
func (e *LockedError) Is(target error) bool { return target == ErrLocked }

// procLock is the process lock of an exclusive SQLite catalog.
type procLock struct {
	release func() error
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

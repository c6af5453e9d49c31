// Package catalogtest opens throw-away catalogs for tests of other packages.
package catalogtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver, for the test schema

	"github.com/compactorhq/compactor/internal/catalog"
)

// Open opens a new SQLite catalog in a temporary directory of t, with the
// real clock, and closes it when the test ends.
func Open(t testing.TB) *catalog.Catalog {
	t.Helper()
	return OpenConfig(t, catalog.Config{})
}

// OpenConfig is Open with cfg (e.g. a fake clock in cfg.Now). An empty
// cfg.DSN means a new SQLite file in a temporary directory of t.
func OpenConfig(t testing.TB, cfg catalog.Config) *catalog.Catalog {
	t.Helper()
	if cfg.DSN == "" {
		cfg.DSN = filepath.Join(t.TempDir(), "catalog.db")
	}
	c, err := catalog.Open(context.Background(), cfg)
	if err != nil {
		t.Fatalf("open test catalog: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("close test catalog: %v", err)
		}
	})
	return c
}

// SmallDisk returns the directory of a new tmpfs file system of size bytes,
// unmounted when the test ends, for tests of what happens when a disk is
// full. Mounting needs root on Linux: elsewhere the test is skipped, saying
// so.
func SmallDisk(t testing.TB, size int64) string {
	t.Helper()
	if runtime.GOOS != "linux" || os.Geteuid() != 0 {
		t.Skipf("a full disk is simulated with a %d-byte tmpfs, which needs root on Linux (running as uid %d on %s)", size, os.Geteuid(), runtime.GOOS)
	}
	dir := t.TempDir()
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d,mode=0700", size), "tmpfs", dir).CombinedOutput()
	if err != nil {
		t.Skipf("mount a %d-byte tmpfs on %s (to simulate a full disk): %v: %s", size, dir, err, strings.TrimSpace(string(out)))
	}
	// Registered after TempDir's own cleanup, so it runs first.
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("unmount tmpfs %s: %v: %s", dir, err, strings.TrimSpace(string(out)))
		}
	})
	return dir
}

// FillDisk writes the file path until the file system holding it has no
// space left (the write fails with ENOSPC), and returns the bytes written.
// Removing the file frees them again.
func FillDisk(t testing.TB, path string) int64 {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatalf("create filler %s: %v", path, err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	var n int64
	for {
		k, err := f.Write(buf)
		n += int64(k)
		if err == nil {
			continue
		}
		if _, full := catalog.IsNoSpace(err); !full {
			t.Fatalf("fill disk through %s: %v", path, err)
		}
		return n
	}
}

// PostgresEnv names the environment variable with the DSN of a PostgreSQL
// server that tests run against as well, e.g.
// postgres://postgres@127.0.0.1:5432/test?sslmode=disable
// (scripts/test.sh sets it when one answers locally).
const PostgresEnv = "COMPACTOR_TEST_POSTGRES_DSN"

// PostgresBase returns the DSN of PostgresEnv; "" when unset.
func PostgresBase() string { return os.Getenv(PostgresEnv) }

// PostgresSchema creates a schema of its own for the test on the server of
// base and returns a DSN that uses it (search_path); the schema is dropped,
// with everything in it, when the test ends.
func PostgresSchema(t testing.TB, base string) string {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "test_" + hex.EncodeToString(b[:])
	admin, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatalf("open postgres: %v", err)
	}
	t.Cleanup(func() {
		if _, err := admin.Exec(`DROP SCHEMA ` + schema + ` CASCADE`); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
		_ = admin.Close()
	})
	if _, err := admin.Exec(`CREATE SCHEMA ` + schema); err != nil {
		t.Fatalf("create schema %s: %v", schema, err)
	}
	sep := "?"
	if strings.Contains(base, "?") {
		sep = "&"
	}
	return base + sep + "search_path=" + schema
}

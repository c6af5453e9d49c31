package catalog

import (
	"context"
	"path/filepath"
	"testing"
)

// TestSQLiteCommitsAreDurable: the writer connection runs with
// synchronous=FULL in WAL mode, so every commit is fsynced before it
// returns (NORMAL could lose the last commits at a power loss).
func TestSQLiteCommitsAreDurable(t *testing.T) {
	ctx := context.Background()
	c, err := Open(ctx, Config{DSN: filepath.Join(t.TempDir(), "catalog.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var mode string
	var level int
	if err := c.w.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		t.Fatal(err)
	}
	if err := c.w.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&level); err != nil {
		t.Fatal(err)
	}
	if mode != "wal" || level != 2 {
		t.Fatalf("journal_mode %s, synchronous %d; want wal and 2 (FULL)", mode, level)
	}
}

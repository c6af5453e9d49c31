// Package catalogtest opens throw-away catalogs for tests of other packages.
package catalogtest

import (
	"context"
	"path/filepath"
	"testing"

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

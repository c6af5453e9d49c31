package catalog_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/catalog/catalogtest"
)

// fillCatalog appends batches to collection id until the catalog is full,
// and returns the error of the append that failed.
func fillCatalog(t *testing.T, c *catalog.Catalog, id string) error {
	t.Helper()
	for i := 0; ; i++ {
		if i > 100_000 {
			t.Fatal("the catalog never filled the disk")
		}
		if _, _, err := c.AppendLog(ctx, id, adds(fmt.Sprintf("fill-%d", i), 2000, 64), catalog.AppendLimits{}); err != nil {
			return err
		}
	}
}

func wantStorageFull(t *testing.T, what string, err error) {
	t.Helper()
	var full *catalog.StorageFullError
	if !errors.As(err, &full) || !errors.Is(err, catalog.ErrStorageFull) || full.Store != catalog.StoreCatalog {
		t.Fatalf("%s: error %v (%T), want a *StorageFullError of the catalog database", what, err, err)
	}
	if msg := err.Error(); !strings.Contains(msg, "catalog database is out of space") || strings.Contains(msg, "/") {
		t.Fatalf("%s: message %q should name the catalog database and no server path", what, msg)
	}
}

// TestDiskFullSQLite fills a small disk holding a SQLite catalog: writes
// fail with a *StorageFullError, Writable reports it, deleting a collection
// still works (through the space reserve), and once space is freed the
// catalog reports itself writable and takes writes again.
func TestDiskFullSQLite(t *testing.T) {
	dir := catalogtest.SmallDisk(t, 8<<20)
	const reserve = 1 << 20
	c := catalogtest.OpenConfig(t, catalog.Config{DSN: filepath.Join(dir, "catalog.db"), ReserveBytes: reserve})
	if st, err := os.Stat(filepath.Join(dir, "catalog.db-reserve")); err != nil || st.Size() != reserve {
		t.Fatalf("space reserve: %v, %v; want a file of %d bytes", st, err, reserve)
	}
	if err := c.Writable(ctx); err != nil {
		t.Fatalf("Writable on an empty disk: %v", err)
	}
	// The blob store shares the volume (the default): the collection's
	// blocks take half of it, its log most of the rest.
	blocks := filepath.Join(dir, "blocks-of-big")
	if err := os.WriteFile(blocks, make([]byte, 4<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	big := mustCreate(t, c, "big", 64)
	start := time.Now()
	wantStorageFull(t, "append to a full catalog", fillCatalog(t, c, big.ID))
	t.Logf("filled in %s", time.Since(start))
	// Whatever else uses the volume takes the rest: not even the slack the
	// failed append left in the write-ahead log remains.
	filler := filepath.Join(dir, "filler")
	catalogtest.FillDisk(t, filler)

	wantStorageFull(t, "Writable while full", c.Writable(ctx))
	_, _, err := c.AppendLog(ctx, big.ID, adds("more", 1000, 64), catalog.AppendLimits{})
	wantStorageFull(t, "append while full", err)

	// Deleting frees space: it runs on the reserve.
	start = time.Now()
	if _, err := c.DeleteCollection(ctx, big.ID); err != nil {
		t.Fatalf("DeleteCollection on a full disk: %v", err)
	}
	t.Logf("deleted in %s", time.Since(start))
	if _, err := c.GetCollection(ctx, big.ID); !errors.Is(err, catalog.ErrNotFound) {
		t.Fatalf("the deleted collection is still there: %v", err)
	}
	// The catalog's freed pages take new rows, but the reserve is gone
	// and the disk is still full: the catalog reports it.
	wantStorageFull(t, "Writable without the reserve", c.Writable(ctx))

	// Deleting the collection's blocks frees space on the volume (the
	// server deletes them right after the catalog rows).
	if err := os.Remove(blocks); err != nil {
		t.Fatal(err)
	}
	if err := c.Writable(ctx); err != nil {
		t.Fatalf("Writable once space is free: %v", err)
	}
	if st, err := os.Stat(filepath.Join(dir, "catalog.db-reserve")); err != nil || st.Size() != reserve {
		t.Fatalf("space reserve after recovery: %v, %v; want it restored", st, err)
	}
	col := mustCreate(t, c, "after", 4)
	mustAppend(t, c, col.ID, adds("a", 10, 4))
}

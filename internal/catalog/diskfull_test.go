package catalog_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
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
// still works and gives its space back to the volume, after which the
// catalog reports itself writable and takes writes again.
func TestDiskFullSQLite(t *testing.T) {
	dir := catalogtest.SmallDisk(t, 16<<20)
	const reserve = 6 << 20
	c := catalogtest.OpenConfig(t, catalog.Config{DSN: filepath.Join(dir, "catalog.db"), ReserveBytes: reserve})
	if st, err := os.Stat(filepath.Join(dir, "catalog.db-reserve")); err != nil || st.Size() != reserve {
		t.Fatalf("space reserve: %v, %v; want a file of %d bytes", st, err, reserve)
	}
	if err := c.Writable(ctx); err != nil {
		t.Fatalf("Writable on an empty disk: %v", err)
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
	// The freed pages went back to the volume (the database shrank), so
	// the reserve is allocated again and the catalog writable.
	if free := freeBytes(t, dir); free < 2<<20 {
		t.Fatalf("%d bytes free on the volume after the delete, want the collection's space back", free)
	}
	if err := c.Writable(ctx); err != nil {
		t.Fatalf("Writable after the delete: %v", err)
	}
	if st, err := os.Stat(filepath.Join(dir, "catalog.db-reserve")); err != nil || st.Size() != reserve {
		t.Fatalf("space reserve after recovery: %v, %v; want it restored", st, err)
	}
	col := mustCreate(t, c, "after", 4)
	mustAppend(t, c, col.ID, adds("a", 10, 4))
}

func freeBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * st.Bsize
}

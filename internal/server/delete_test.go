package server_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"connectrpc.com/connect"

	compactorv1 "github.com/compactorhq/compactor/gen/compactor/v1"
	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/compaction"
	"github.com/compactorhq/compactor/internal/materialize"
	"github.com/compactorhq/compactor/internal/server"
)

// TestDeleteCollectionLeavesNoDirectories: on the default file:// blob
// store, deleting a compacted collection removes its blocks/ and
// manifests/ directories and its own, and nothing of another collection.
func TestDeleteCollectionLeavesNoDirectories(t *testing.T) {
	cfg := server.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Manager.Interval = time.Hour
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	app, err := server.Open(ctx, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	compacted := func(name string) string {
		c, err := app.Catalog.CreateCollection(ctx, name, 0)
		if err != nil {
			t.Fatal(err)
		}
		ops := []materialize.OperationRecord{{Op: materialize.OpAdd, ID: "x", Embedding: []float32{1, 2}}}
		if _, _, err := app.Catalog.AppendLog(ctx, c.ID, ops, catalog.AppendLimits{}); err != nil {
			t.Fatal(err)
		}
		if _, err := app.Compactor.Compact(ctx, c.ID, compaction.Options{}); err != nil {
			t.Fatal(err)
		}
		return c.ID
	}
	gone, kept := compacted("deleted"), compacted("kept")
	dir := func(id string) string { return filepath.Join(cfg.DataDir, "blobs", "collections", id) }
	for _, sub := range []string{"blocks", "manifests"} {
		if _, err := os.Stat(filepath.Join(dir(gone), sub)); err != nil {
			t.Fatalf("before the deletion: %v", err)
		}
	}
	if _, err := app.Service.DeleteCollection(ctx, connect.NewRequest(&compactorv1.DeleteCollectionRequest{Id: gone})); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir(gone)); !os.IsNotExist(err) {
		entries, _ := os.ReadDir(dir(gone))
		t.Fatalf("directory of the deleted collection: %v (entries %v), want it removed", err, entries)
	}
	for _, sub := range []string{"blocks", "manifests"} {
		if _, err := os.Stat(filepath.Join(dir(kept), sub)); err != nil {
			t.Fatalf("the other collection lost its %s directory: %v", sub, err)
		}
	}
}

// testDeadline is when a wait of a server test gives up: a minute before
// the test binary's deadline (go test -timeout), or 10 minutes from now
// without one. Waits end on their event; this only turns a hang into a
// failure that names it, and is never short on a busy machine.
func testDeadline(t *testing.T) time.Time {
	d, ok := t.Deadline()
	if !ok {
		return time.Now().Add(10 * time.Minute)
	}
	if time.Until(d) > 2*time.Minute {
		return d.Add(-time.Minute)
	}
	return d.Add(-time.Until(d) / 2)
}

// nearTestDeadline fires at testDeadline.
func nearTestDeadline(t *testing.T) <-chan time.Time {
	return time.After(time.Until(testDeadline(t)))
}

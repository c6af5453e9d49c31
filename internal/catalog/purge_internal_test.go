package catalog

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/compactorhq/compactor/internal/materialize"
)

// TestLogPurgeYieldsToACompactionCommittingBehindIt: a large compaction's
// log purge (5 chunks) and a small compaction of another collection whose
// commit arrives while the purge runs. The purge starts no chunk while the
// small commit waits or runs: between the commit's "enter" and "leave" the
// trace holds no "chunk", and the purge then finishes.
func TestLogPurgeYieldsToACompactionCommittingBehindIt(t *testing.T) {
	ctx := context.Background()
	c, err := Open(ctx, Config{Driver: "sqlite", DSN: filepath.Join(t.TempDir(), "catalog.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ops := func(prefix string, n int) []materialize.OperationRecord {
		out := make([]materialize.OperationRecord, n)
		for i := range out {
			out[i] = materialize.OperationRecord{Op: materialize.OpAdd, ID: fmt.Sprintf("%s-%05d", prefix, i), Embedding: []float32{1, 2}}
		}
		return out
	}
	large, err := c.CreateCollection(ctx, "large", 2)
	if err != nil {
		t.Fatal(err)
	}
	small, err := c.CreateCollection(ctx, "small", 2)
	if err != nil {
		t.Fatal(err)
	}
	const rows = 5 * logPurgeChunk
	if _, _, err := c.AppendLog(ctx, large.ID, ops("l", rows), AppendLimits{}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.AppendLog(ctx, small.ID, ops("s", 3), AppendLimits{}); err != nil {
		t.Fatal(err)
	}
	if err := c.CommitCompaction(ctx, Commit{CollectionID: large.ID, NewVersion: 1, ManifestKey: "collections/l/v1.json",
		CompactionOffset: rows, RecordCount: rows, BlockCount: 1}); err != nil {
		t.Fatal(err)
	}

	var (
		mu     sync.Mutex
		events []string
	)
	smallDone := make(chan error, 1)
	entered := make(chan struct{})
	chunks := 0
	c.writers.mu.Lock()
	c.writers.trace = func(ev string) { // under c.writers.mu
		mu.Lock()
		events = append(events, ev)
		mu.Unlock()
		switch ev {
		case "enter":
			close(entered)
		case "chunk":
			if chunks++; chunks == 1 {
				// The small compaction commits as the first chunk is about
				// to start: its commit waits for the writer that chunk
				// takes, or runs before it.
				go func() {
					smallDone <- c.CommitCompaction(ctx, Commit{CollectionID: small.ID, NewVersion: 1, ManifestKey: "collections/s/v1.json",
						CompactionOffset: 3, RecordCount: 3, BlockCount: 1})
				}()
			}
		}
	}
	c.writers.mu.Unlock()
	purged := make(chan error, 1)
	var n int64
	go func() {
		var err error
		n, err = c.PurgeLog(ctx, large.ID)
		purged <- err
	}()
	<-entered
	if err := <-smallDone; err != nil {
		t.Fatalf("small commit: %v", err)
	}
	if err := <-purged; err != nil || n != rows {
		t.Fatalf("purge: %d rows, %v; want %d", n, err, rows)
	}
	mu.Lock()
	defer mu.Unlock()
	enter, leave := slices.Index(events, "enter"), slices.Index(events, "leave")
	if enter < 0 || leave < enter {
		t.Fatalf("trace %v: no enter and leave of the small commit", events)
	}
	if i := slices.Index(events[enter:leave], "chunk"); i >= 0 {
		t.Errorf("trace %v: a purge chunk started while the small commit waited or ran", events)
	}
	if got := countOf(events, "chunk"); got != 5 {
		t.Errorf("trace %v: %d chunks, want 5", events, got)
	}
}

func countOf(s []string, v string) int {
	n := 0
	for _, x := range s {
		if x == v {
			n++
		}
	}
	return n
}

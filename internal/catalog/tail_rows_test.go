package catalog_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/catalog/catalogtest"
	"github.com/compactorhq/compactor/internal/materialize"
)

// TestExclusiveTailReadsSeeEveryWrite reads, on an exclusive SQLite
// catalog (which remembers the rows of collections read with an empty
// tail), the tail of a collection after each kind of write that changes
// what a tail read returns: an append, a compaction commit, a rename. Each
// read must see the write before it.
func TestExclusiveTailReadsSeeEveryWrite(t *testing.T) {
	c := catalogtest.OpenConfig(t, catalog.Config{DSN: filepath.Join(t.TempDir(), "catalog.db"), Exclusive: true, Holder: "test"})
	col := mustCreate(t, c, "rows", 2)
	read := func(what string) catalog.Tail {
		t.Helper()
		byRange, err := c.ReadTailRange(ctx, col.ID, catalog.TailRange{Unbounded: true})
		if err != nil {
			t.Fatalf("%s: ReadTailRange: %v", what, err)
		}
		byID, err := c.ReadTailIDs(ctx, col.ID, []string{"a", "b"})
		if err != nil {
			t.Fatalf("%s: ReadTailIDs: %v", what, err)
		}
		equal(t, what+": the row of both reads", byID.Collection, byRange.Collection)
		equal(t, what+": the tail of both reads", idOffsets(byID.Ops), idOffsets(byRange.Ops))
		return byRange
	}
	// Empty, twice: the second is answered from the remembered row.
	for range 2 {
		tail := read("new collection")
		equal(t, "new collection: tail", idOffsets(tail.Ops), []idOffset{})
		equal(t, "new collection: row", tail.Collection, mustGet(t, c, col.ID))
	}
	mustAppend(t, c, col.ID, []materialize.OperationRecord{{Op: materialize.OpAdd, ID: "a", Embedding: embedding(1, 2)}})
	tail := read("after an append")
	equal(t, "after an append: tail", idOffsets(tail.Ops), []idOffset{{"a", 1}})
	equal(t, "after an append: log position", tail.Collection.LogPosition, int64(1))
	if err := c.CommitCompaction(ctx, catalog.Commit{CollectionID: col.ID, BaseVersion: 0, NewVersion: 1, ManifestKey: "m1", CompactionOffset: 1}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		tail = read("after a commit")
		equal(t, "after a commit: tail", idOffsets(tail.Ops), []idOffset{})
		equal(t, "after a commit: version", tail.Collection.SegmentVersion, int64(1))
		equal(t, "after a commit: manifest", tail.Collection.ManifestKey, "m1")
	}
	mustAppend(t, c, col.ID, []materialize.OperationRecord{{Op: materialize.OpDelete, ID: "a"}, {Op: materialize.OpAdd, ID: "b", Embedding: embedding(2, 2)}})
	tail = read("after a second append")
	equal(t, "after a second append: tail", idOffsets(tail.Ops), []idOffset{{"a", 2}, {"b", 3}})
	if err := c.CommitCompaction(ctx, catalog.Commit{CollectionID: col.ID, BaseVersion: 1, NewVersion: 2, ManifestKey: "m2", CompactionOffset: 3}); err != nil {
		t.Fatal(err)
	}
	read("after a second commit")
	windows := []string{"Mon-Fri 01:00-05:00 UTC"}
	if _, err := c.UpdateCollectionPolicy(ctx, col.ID, catalog.PolicyUpdate{Windows: &windows}); err != nil {
		t.Fatal(err)
	}
	tail = read("after a policy update")
	equal(t, "after a policy update: windows", tail.Collection.Policy.Windows, windows)
	// A reader that changes what it was given changes no other read.
	tail.Collection.Policy.Windows[0] = "changed"
	equal(t, "after a change by a reader: windows", read("after a change by a reader").Collection.Policy.Windows, windows)
	if _, err := c.DeleteCollection(ctx, col.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ReadTailRange(ctx, col.ID, catalog.TailRange{Unbounded: true}); !errors.Is(err, catalog.ErrNotFound) {
		t.Fatalf("ReadTailRange after the delete: %v, want ErrNotFound", err)
	}
	if _, err := c.ReadTailIDs(ctx, col.ID, []string{"a"}); !errors.Is(err, catalog.ErrNotFound) {
		t.Fatalf("ReadTailIDs after the delete: %v, want ErrNotFound", err)
	}
}

// TestExclusiveTailReadsReadTheirWrites appends from several goroutines
// while others keep reading (and so remembering) the collection's row, and
// commits compactions that empty the tail: a read made after an append
// returned sees the append, whatever was remembered meanwhile. Run it with
// -race.
func TestExclusiveTailReadsReadTheirWrites(t *testing.T) {
	c := catalogtest.OpenConfig(t, catalog.Config{DSN: filepath.Join(t.TempDir(), "catalog.db"), Exclusive: true, Holder: "test"})
	col := mustCreate(t, c, "concurrent", 2)
	const writers, appends = 3, 40
	stop := make(chan struct{})
	var readers sync.WaitGroup
	for range 2 {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := c.ReadTailRange(ctx, col.ID, catalog.TailRange{Unbounded: true}); err != nil {
					t.Errorf("ReadTailRange: %v", err)
					return
				}
			}
		}()
	}
	var mu sync.Mutex // serializes the commits' base versions
	version := int64(0)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range appends {
				id := fmt.Sprintf("w%d-%03d", w, i)
				_, last, err := c.AppendLog(ctx, col.ID, []materialize.OperationRecord{{Op: materialize.OpAdd, ID: id, Embedding: embedding(i, 2)}}, catalog.AppendLimits{})
				if err != nil {
					t.Errorf("AppendLog: %v", err)
					return
				}
				tail, err := c.ReadTailIDs(ctx, col.ID, []string{id})
				if err != nil {
					t.Errorf("ReadTailIDs: %v", err)
					return
				}
				if tail.Collection.LogPosition < last {
					t.Errorf("read after the append of %s at offset %d: log position %d", id, last, tail.Collection.LogPosition)
					return
				}
				found := tail.Collection.CompactionOffset >= last
				for _, op := range tail.Ops {
					found = found || op.Offset == last
				}
				if !found {
					t.Errorf("read after the append of %s at offset %d: neither in the tail %v nor compacted (offset %d)", id, last, idOffsets(tail.Ops), tail.Collection.CompactionOffset)
					return
				}
				if i%5 == 4 {
					// Compact everything appended so far: the tail
					// empties and reads remember the row again.
					// (t.Fatal, as mustGet calls it, is for the test's
					// goroutine only.)
					mu.Lock()
					cur, err := c.GetCollection(ctx, col.ID)
					if err == nil {
						err = c.CommitCompaction(ctx, catalog.Commit{CollectionID: col.ID, BaseVersion: version, NewVersion: version + 1, ManifestKey: fmt.Sprintf("m%d", version+1), CompactionOffset: cur.LogPosition})
					}
					if err == nil {
						version++
					}
					mu.Unlock()
					if err != nil {
						t.Errorf("commit a compaction: %v", err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	readers.Wait()
	final, err := c.ReadTailRange(ctx, col.ID, catalog.TailRange{Unbounded: true})
	if err != nil {
		t.Fatal(err)
	}
	equal(t, "log position at the end", final.Collection.LogPosition, int64(writers*appends))
}

package catalog

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
)

func TestTailRowsHoldUntilTheNextWrite(t *testing.T) {
	var nilRows *tailRows
	nilRows.put(nilRows.begin(), Collection{ID: "a"})
	if _, ok := nilRows.get("a"); ok {
		t.Fatal("a shared catalog (nil tailRows) remembered a row")
	}

	var r tailRows
	gen := r.begin()
	r.put(gen, Collection{ID: "a", LogPosition: 7})
	if got, ok := r.get("a"); !ok || got.LogPosition != 7 {
		t.Fatalf("get(a) = %+v, %v; want the row put", got, ok)
	}
	// While a write transaction is open (its commit may already be seen by
	// other reads) nothing is served.
	r.began()
	if _, ok := r.get("a"); ok {
		t.Fatal("a row was served while a write transaction was open")
	}
	r.ended()
	if _, ok := r.get("a"); ok {
		t.Fatal("a row read before a write ended was served after it")
	}
	// A read that began before a write ended is not remembered.
	r.put(gen, Collection{ID: "b"})
	if _, ok := r.get("b"); ok {
		t.Fatal("a row read while a write ended was remembered")
	}

	// The bound: rows of older reads go first, then all.
	gen = r.begin()
	for i := range maxTailRows + 10 {
		r.put(gen, Collection{ID: fmt.Sprint(i)})
		if len(r.rows) > maxTailRows {
			t.Fatalf("%d rows remembered after %d puts, more than %d", len(r.rows), i+1, maxTailRows)
		}
	}
	last := fmt.Sprint(maxTailRows + 9)
	if _, ok := r.get(last); !ok {
		t.Fatalf("the last row put (%s) is not remembered", last)
	}
}

// TestExclusiveCatalogRemembersEmptyTails checks the wiring: an exclusive
// SQLite catalog remembers the row of a tail read that found the tail
// empty and forgets it at the next write; a catalog opened without
// Exclusive remembers nothing.
func TestExclusiveCatalogRemembersEmptyTails(t *testing.T) {
	ctx := context.Background()
	for _, exclusive := range []bool{true, false} {
		c, err := Open(ctx, Config{DSN: filepath.Join(t.TempDir(), "catalog.db"), Exclusive: exclusive, Holder: "test"})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		col, err := c.CreateCollection(ctx, "rows", 2)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.ReadTailRange(ctx, col.ID, TailRange{Unbounded: true}); err != nil {
			t.Fatal(err)
		}
		if _, ok := c.tails.get(col.ID); ok != exclusive {
			t.Fatalf("exclusive %v: row remembered after an empty-tail read: %v", exclusive, ok)
		}
		if _, err := c.CreateCollection(ctx, "another", 2); err != nil {
			t.Fatal(err)
		}
		if _, ok := c.tails.get(col.ID); ok {
			t.Fatalf("exclusive %v: row still remembered after a write", exclusive)
		}
	}
}

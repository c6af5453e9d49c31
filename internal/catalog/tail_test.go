package catalog_test

import (
	"database/sql"
	"fmt"
	"testing"

	"github.com/google/uuid"

	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/materialize"
)

// tailOf is what a read of the tail should return: (id, offset) pairs.
type idOffset struct {
	ID     string
	Offset int64
}

func idOffsets(ops []materialize.OperationRecord) []idOffset {
	out := []idOffset{}
	for _, op := range ops {
		out = append(out, idOffset{op.ID, op.Offset})
	}
	return out
}

// appendTailFixture appends, to a new collection, three rounds over the ids
// a, b, c, d (offsets 1-4, 5-8, 9-12, with DELETE of b in the second round)
// and compacts up to offset 2, so that the tail is offsets 3..12.
func appendTailFixture(t *testing.T, c *catalog.Catalog) catalog.Collection {
	t.Helper()
	col := mustCreate(t, c, "tail", 2)
	for round := range 3 {
		var ops []materialize.OperationRecord
		for _, id := range []string{"d", "b", "a", "c"} {
			op := materialize.OperationRecord{Op: materialize.OpUpsert, ID: id, Embedding: embedding(round, 2)}
			if round == 1 && id == "b" {
				op = materialize.OperationRecord{Op: materialize.OpDelete, ID: id}
			}
			ops = append(ops, op)
		}
		mustAppend(t, c, col.ID, ops)
	}
	if err := c.CommitCompaction(ctx, catalog.Commit{CollectionID: col.ID, BaseVersion: 0, NewVersion: 1, ManifestKey: "m1", CompactionOffset: 2}); err != nil {
		t.Fatal(err)
	}
	return mustGet(t, c, col.ID)
}

func TestReadTailIDsReadsTheTailRowsOfThoseIDsOnly(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		c := e.open(t)
		col := appendTailFixture(t, c)
		tail, err := c.ReadTailIDs(ctx, col.ID, []string{"c", "a", "c", "zz"})
		if err != nil {
			t.Fatal(err)
		}
		equal(t, "collection", tail.Collection, col)
		// a is at offsets 3, 7, 11; c at 4, 8, 12; offsets 1 and 2 are compacted.
		equal(t, "rows", idOffsets(tail.Ops), []idOffset{{"a", 3}, {"a", 7}, {"a", 11}, {"c", 4}, {"c", 8}, {"c", 12}})
		if tail.Ops[2].Op != materialize.OpUpsert || len(tail.Ops[2].Embedding) != 2 {
			t.Fatalf("row a@11 decodes to %+v", tail.Ops[2])
		}
		tail, err = c.ReadTailIDs(ctx, col.ID, []string{"d", "b"})
		if err != nil {
			t.Fatal(err)
		}
		equal(t, "rows of b and d", idOffsets(tail.Ops), []idOffset{{"b", 6}, {"b", 10}, {"d", 5}, {"d", 9}})
		equal(t, "b deleted in round 2", tail.Ops[0].Op, materialize.OpDelete)

		tail, err = c.ReadTailIDs(ctx, col.ID, nil)
		if err != nil || len(tail.Ops) != 0 || tail.Collection.ID != col.ID {
			t.Fatalf("no ids: %+v, %v", tail, err)
		}
		_, err = c.ReadTailIDs(ctx, uuid.NewString(), []string{"a"})
		wantErr(t, "ReadTailIDs of an unknown collection", err, catalog.ErrNotFound)
	})
}

// More ids than one query binds are read in chunks, in id order.
func TestReadTailIDsOfManyIDs(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		c := e.open(t)
		col := mustCreate(t, c, "many", 2)
		mustAppend(t, c, col.ID, adds("r", 1200, 2))
		var ids []string
		for i := 1199; i >= 0; i -= 2 {
			ids = append(ids, fmt.Sprintf("r-%d", i))
		}
		tail, err := c.ReadTailIDs(ctx, col.ID, ids)
		if err != nil {
			t.Fatal(err)
		}
		if len(tail.Ops) != 600 {
			t.Fatalf("%d rows, want 600", len(tail.Ops))
		}
		for i := 1; i < len(tail.Ops); i++ {
			if tail.Ops[i-1].ID >= tail.Ops[i].ID {
				t.Fatalf("rows out of id order at %d: %s then %s", i, tail.Ops[i-1].ID, tail.Ops[i].ID)
			}
		}
	})
}

func TestReadTailRange(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		c := e.open(t)
		col := appendTailFixture(t, c)
		for _, tc := range []struct {
			name     string
			r        catalog.TailRange
			want     []idOffset
			wantMore bool
		}{
			{"every id", catalog.TailRange{Unbounded: true},
				[]idOffset{{"a", 3}, {"a", 7}, {"a", 11}, {"b", 6}, {"b", 10}, {"c", 4}, {"c", 8}, {"c", 12}, {"d", 5}, {"d", 9}}, false},
			{"after a, up to c (inclusive)", catalog.TailRange{After: "a", UpTo: "c"},
				[]idOffset{{"b", 6}, {"b", 10}, {"c", 4}, {"c", 8}, {"c", 12}}, false},
			{"between ids", catalog.TailRange{After: "a0", UpTo: "bz"},
				[]idOffset{{"b", 6}, {"b", 10}}, false},
			{"nothing in range", catalog.TailRange{After: "d", Unbounded: true}, []idOffset{}, false},
			{"up to offset 8", catalog.TailRange{Unbounded: true, UpToOffset: 8},
				[]idOffset{{"a", 3}, {"a", 7}, {"b", 6}, {"c", 4}, {"c", 8}, {"d", 5}}, false},
			// The fourth row is b@6: b@10 comes too, c does not.
			{"cut at 4 rows completes the last id", catalog.TailRange{Unbounded: true, MaxRows: 4},
				[]idOffset{{"a", 3}, {"a", 7}, {"a", 11}, {"b", 6}, {"b", 10}}, true},
			{"cut at 1 row", catalog.TailRange{After: "b", Unbounded: true, MaxRows: 1},
				[]idOffset{{"c", 4}, {"c", 8}, {"c", 12}}, true},
			{"exactly the rows of the range", catalog.TailRange{After: "c", UpTo: "d", MaxRows: 2},
				[]idOffset{{"d", 5}, {"d", 9}}, true},
		} {
			tail, err := c.ReadTailRange(ctx, col.ID, tc.r)
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			equal(t, tc.name+": rows", idOffsets(tail.Ops), tc.want)
			equal(t, tc.name+": more", tail.More, tc.wantMore)
			equal(t, tc.name+": collection", tail.Collection, col)
		}
		_, err := c.ReadTailRange(ctx, col.ID, catalog.TailRange{After: "c", UpTo: "c"})
		wantErr(t, "an empty range", err, catalog.ErrInvalidArgument)
		_, err = c.ReadTailRange(ctx, col.ID, catalog.TailRange{Unbounded: true, MaxRows: -1})
		wantErr(t, "a negative bound", err, catalog.ErrInvalidArgument)
		_, err = c.ReadTailRange(ctx, uuid.NewString(), catalog.TailRange{Unbounded: true})
		wantErr(t, "ReadTailRange of an unknown collection", err, catalog.ErrNotFound)
	})
}

// Ids order by their bytes, as in segments: "B" < "a" < "ab" < "b" < "é".
func TestReadTailRangeOrdersIDsByBytes(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		c := e.open(t)
		col := mustCreate(t, c, "bytes", 2)
		var ops []materialize.OperationRecord
		for _, id := range []string{"é", "b", "ab", "a", "B"} {
			ops = append(ops, materialize.OperationRecord{Op: materialize.OpAdd, ID: id, Embedding: embedding(1, 2)})
		}
		mustAppend(t, c, col.ID, ops)
		tail, err := c.ReadTailRange(ctx, col.ID, catalog.TailRange{After: "B", Unbounded: true})
		if err != nil {
			t.Fatal(err)
		}
		equal(t, "rows", idOffsets(tail.Ops), []idOffset{{"a", 4}, {"ab", 3}, {"b", 2}, {"é", 1}})
	})
}

// rawDB opens the test's database directly, as an older process or an
// operator would.
func rawDB(t *testing.T, e *env) *sql.DB { return rawDBTB(t, e) }

func rawDBTB(t testing.TB, e *env) *sql.DB {
	t.Helper()
	driver := "sqlite"
	if e.driver == "postgres" {
		driver = "pgx"
	}
	db, err := sql.Open(driver, e.dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func countUnindexed(t *testing.T, db *sql.DB) int {
	t.Helper()
	var n int
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM log WHERE record_id IS NULL`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A catalog migrated from before record_id has log rows without it: reads
// still see them (decoding them), and the next Open fills them, except a row
// that does not decode, which stays as it is without stopping Open.
func TestLogRowsFromBeforeRecordIDAreReadAndFilledAtOpen(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		c := e.open(t)
		col := appendTailFixture(t, c)
		other := mustCreate(t, c, "other", 2)
		mustAppend(t, c, other.ID, adds("o", 5, 2))
		wantIDs, err := c.ReadTailIDs(ctx, col.ID, []string{"a", "c", "d"})
		if err != nil {
			t.Fatal(err)
		}
		wantRange, err := c.ReadTailRange(ctx, col.ID, catalog.TailRange{After: "a", Unbounded: true, MaxRows: 3})
		if err != nil {
			t.Fatal(err)
		}

		db := rawDB(t, e)
		if _, err := db.ExecContext(ctx, `UPDATE log SET record_id = NULL`); err != nil {
			t.Fatal(err)
		}
		gotIDs, err := c.ReadTailIDs(ctx, col.ID, []string{"a", "c", "d"})
		if err != nil {
			t.Fatal(err)
		}
		equal(t, "rows by id without record_id", idOffsets(gotIDs.Ops), idOffsets(wantIDs.Ops))
		gotRange, err := c.ReadTailRange(ctx, col.ID, catalog.TailRange{After: "a", Unbounded: true, MaxRows: 3})
		if err != nil {
			t.Fatal(err)
		}
		// Without the index the read is not cut: it returns at least the
		// rows the indexed read does, in the same order.
		equal(t, "rows of a range without record_id", idOffsets(gotRange.Ops)[:len(wantRange.Ops)], idOffsets(wantRange.Ops))

		// A row that no longer decodes, left without record_id.
		if _, err := db.ExecContext(ctx, `UPDATE log SET record = `+map[string]string{"sqlite": "X'010901'", "postgres": `'\x010901'::bytea`}[e.driver]+
			` WHERE collection_id = '`+other.ID+`' AND log_offset = 5`); err != nil {
			t.Fatal(err)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		c = e.open(t)
		if n := countUnindexed(t, db); n != 1 {
			t.Fatalf("%d log rows without record_id after Open, want 1 (the corrupt one)", n)
		}
		gotIDs, err = c.ReadTailIDs(ctx, col.ID, []string{"a", "c", "d"})
		if err != nil {
			t.Fatal(err)
		}
		equal(t, "rows by id after Open", idOffsets(gotIDs.Ops), idOffsets(wantIDs.Ops))
		gotRange, err = c.ReadTailRange(ctx, col.ID, catalog.TailRange{After: "a", Unbounded: true, MaxRows: 3})
		if err != nil {
			t.Fatal(err)
		}
		equal(t, "rows of a range after Open", idOffsets(gotRange.Ops), idOffsets(wantRange.Ops))
		_, err = c.ReadTailIDs(ctx, other.ID, []string{"o-1"})
		wantErr(t, "read of a collection with a corrupt unindexed row", err, materialize.ErrCorruptRecord)

		// Open again: nothing left to fill but the corrupt row.
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		e.open(t)
		if n := countUnindexed(t, db); n != 1 {
			t.Fatalf("%d log rows without record_id after a second Open, want 1", n)
		}
	})
}

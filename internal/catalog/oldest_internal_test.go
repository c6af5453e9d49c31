package catalog

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/compactorhq/compactor/internal/clock"
	"github.com/compactorhq/compactor/internal/materialize"
)

// TestOldestUncompactedSurvivesWritesOfABuildThatDoesNotKeepIt: an earlier
// build, serving the same catalog during a rolling upgrade or after a
// downgrade, moves the compaction offset and appends without writing
// oldest_uncompacted_at (simulated here with its statements). Reads then
// take the time from the log row instead of a stale or missing one, and
// the next append of this build writes it afresh.
func TestOldestUncompactedSurvivesWritesOfABuildThatDoesNotKeepIt(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC))
	c, err := Open(ctx, Config{Driver: "sqlite", DSN: filepath.Join(t.TempDir(), "catalog.db"), Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	col, err := c.CreateCollection(ctx, "mixed", 2)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	appendAt := func(k int) time.Time { // this build's append of k records
		t.Helper()
		at := clk.Advance(time.Minute).Truncate(time.Millisecond)
		ops := make([]materialize.OperationRecord, k)
		for i := range ops {
			n++
			ops[i] = materialize.OperationRecord{Op: materialize.OpAdd, ID: "r" + string(rune('a'+n%26)) + time.Duration(n).String(), Embedding: []float32{1, 2}}
		}
		if _, _, err := c.AppendLog(ctx, col.ID, ops, AppendLimits{}); err != nil {
			t.Fatal(err)
		}
		return at
	}
	oldAppendAt := func() time.Time { // the earlier build's append of one record
		t.Helper()
		at := clk.Advance(time.Minute).Truncate(time.Millisecond)
		n++
		rec, err := (&materialize.OperationRecord{Op: materialize.OpAdd, ID: "old" + time.Duration(n).String(), Embedding: []float32{1, 2}}).MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.w.ExecContext(ctx, `INSERT INTO log (collection_id, log_offset, appended_at, record, record_id)
			SELECT id, log_position + 1, ?, ?, ? FROM collections WHERE id = ?`, ms(at), rec, "old"+time.Duration(n).String(), col.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := c.w.ExecContext(ctx, `UPDATE collections SET log_position = log_position + 1 WHERE id = ?`, col.ID); err != nil {
			t.Fatal(err)
		}
		return at
	}
	oldCommit := func(offset int64) { // the earlier build's commit
		t.Helper()
		if _, err := c.w.ExecContext(ctx, `UPDATE collections SET compaction_offset = ?, segment_version = segment_version + 1 WHERE id = ?`, offset, col.ID); err != nil {
			t.Fatal(err)
		}
	}
	check := func(what string, want time.Time) {
		t.Helper()
		got, err := c.GetCollection(ctx, col.ID)
		if err != nil {
			t.Fatal(err)
		}
		listed, err := c.ListCollections(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !got.OldestUncompactedAt.Equal(want) || !listed[0].OldestUncompactedAt.Equal(want) {
			t.Fatalf("%s: oldest uncompacted at %v (listed %v), want %v", what, got.OldestUncompactedAt, listed[0].OldestUncompactedAt, want)
		}
	}
	t1 := appendAt(3) // offsets 1..3
	check("this build's append", t1)
	oldCommit(3)
	check("the earlier build compacted everything", time.Time{})
	t2 := oldAppendAt() // offset 4, the backlog was empty
	check("the earlier build's append to an empty backlog", t2)
	appendAt(2) // offsets 5..6
	check("this build's append behind it", t2)
	oldCommit(4)
	check("the earlier build compacted part of it", t1.Add(2*time.Minute))
	var kept int64
	if err := c.w.QueryRowContext(ctx, `SELECT oldest_offset FROM collections WHERE id = ?`, col.ID).Scan(&kept); err != nil || kept != 3 {
		t.Fatalf("oldest_offset %d (%v): want 3, written by this build's last append", kept, err)
	}
	appendAt(1)
	if err := c.w.QueryRowContext(ctx, `SELECT oldest_offset FROM collections WHERE id = ?`, col.ID).Scan(&kept); err != nil || kept != 4 {
		t.Fatalf("oldest_offset %d (%v) after an append: want 4, written afresh", kept, err)
	}
	check("this build's next append", t1.Add(2*time.Minute))
	if err := c.CommitCompaction(ctx, Commit{CollectionID: col.ID, BaseVersion: 2, NewVersion: 3, ManifestKey: "m3", CompactionOffset: 7}); err != nil {
		t.Fatal(err)
	}
	check("this build compacted everything", time.Time{})
}

package catalog_test

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/jobtype"
)

// commitAt commits version v of collection id at compaction offset off, with
// manifest key "m<v>" and v records.
func commitAt(t *testing.T, c *catalog.Catalog, id string, v, off int64) {
	t.Helper()
	if err := c.CommitCompaction(ctx, catalog.Commit{CollectionID: id, BaseVersion: v - 1, NewVersion: v, ManifestKey: fmt.Sprintf("m%d", v),
		CompactionOffset: off, RecordCount: v, SegmentBytes: 100 * v, BlockCount: int(v)}); err != nil {
		t.Fatalf("commit version %d: %v", v, err)
	}
}

// TestPurgeLogStopsAtTheOldestKeptVersion: the log rows a kept version
// needs for a rollback stay until GC retires that version; with one version
// kept, the purge goes up to the current compaction offset as before.
func TestPurgeLogStopsAtTheOldestKeptVersion(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		c := e.open(t)
		col := mustCreate(t, c, "kept-log", 2)
		mustAppend(t, c, col.ID, adds("a", 12, 2))
		commitAt(t, c, col.ID, 1, 3)
		commitAt(t, c, col.ID, 2, 6)
		commitAt(t, c, col.ID, 3, 9)
		purge := func(want int64) {
			t.Helper()
			if n, err := c.PurgeLog(ctx, col.ID); err != nil || n != want {
				t.Fatalf("PurgeLog: %d rows, %v; want %d", n, err, want)
			}
		}
		// Versions 1..3 are kept: rows after version 1's offset 3 stay.
		purge(3)
		if _, err := c.RetireVersions(ctx, col.ID, 2, time.Hour); err != nil {
			t.Fatal(err)
		}
		// Version 1 retired: the oldest kept is 2, at offset 6.
		purge(3)
		equal(t, "rows after the purge", offsets(mustReadLog(t, c, col.ID, 0, math.MaxInt64, 0)), span(10, 12))
		var left int
		if err := rawDB(t, e).QueryRowContext(ctx, `SELECT COUNT(*) FROM log WHERE collection_id = $1`, col.ID).Scan(&left); err != nil {
			t.Fatal(err)
		}
		equal(t, "rows in the table (7..12)", left, 6)
		if _, err := c.RetireVersions(ctx, col.ID, 1, time.Hour); err != nil {
			t.Fatal(err)
		}
		purge(3)
		_, err := c.PurgeLog(ctx, uuid.NewString())
		wantErr(t, "PurgeLog of an unknown collection", err, catalog.ErrNotFound)
	})
}

func TestGetVersion(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		c := e.open(t)
		col := mustCreate(t, c, "get-version", 2)
		_, err := c.GetVersion(ctx, col.ID, 1)
		var nf *catalog.VersionNotFoundError
		if !errors.As(err, &nf) || !errors.Is(err, catalog.ErrNotFound) || !strings.Contains(err.Error(), "no committed version yet") {
			t.Fatalf("version 1 of a collection never compacted: %v", err)
		}
		mustAppend(t, c, col.ID, adds("a", 9, 2))
		for v := int64(1); v <= 3; v++ {
			commitAt(t, c, col.ID, v, 3*v)
		}
		if _, err := c.RetireVersions(ctx, col.ID, 2, time.Hour); err != nil {
			t.Fatal(err)
		}
		got, err := c.GetVersion(ctx, col.ID, 2)
		if err != nil {
			t.Fatal(err)
		}
		equal(t, "version 2", []any{got.Version, got.ManifestKey, got.CompactionOffset, got.OffsetStart, got.RecordCount, got.Kept()},
			[]any{int64(2), "m2", int64(6), int64(3), int64(2), true})

		tests := []struct {
			name    string
			id      string
			version int64
			want    error
			message string
		}{
			{"a retired version names the oldest kept", col.ID, 1, catalog.ErrNotFound,
				"no longer keeps version 1: the oldest kept version is 2 (kept: 2 to 3"},
			{"a version never committed names the newest", col.ID, 7, catalog.ErrNotFound, "has no version 7: the newest is 3 (kept: 2 to 3)"},
			{"version 0 is refused", col.ID, 0, catalog.ErrInvalidArgument, "versions start at 1"},
			{"an unknown collection", uuid.NewString(), 1, catalog.ErrNotFound, "not found"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				_, err := c.GetVersion(ctx, tt.id, tt.version)
				wantErr(t, "GetVersion", err, tt.want)
				if !strings.Contains(err.Error(), tt.message) {
					t.Errorf("error %q does not say %q", err, tt.message)
				}
			})
		}
	})
}

// TestCommitRollback: a rollback is a new version with the old version's
// manifest copy, offset, count and figures; the compaction offset moves back
// so that the log after it is read again; the history names it.
func TestCommitRollback(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		c := e.open(t)
		col := mustCreate(t, c, "rollback", 2)
		mustAppend(t, c, col.ID, adds("a", 10, 2))
		commitAt(t, c, col.ID, 1, 4)
		commitAt(t, c, col.ID, 2, 8)
		if _, err := c.PurgeLog(ctx, col.ID); err != nil {
			t.Fatal(err)
		}
		now := ms(e.clock.Advance(time.Second))
		rb := catalog.Rollback{CollectionID: col.ID, BaseVersion: 2, NewVersion: 3, ToVersion: 1, FromManifestKey: "m1", ManifestKey: "m3",
			Reason: "bad compaction", By: "alice@host", JobID: uuid.NewString(), Node: "n1"}
		if err := c.CommitRollback(ctx, rb); err != nil {
			t.Fatalf("CommitRollback: %v", err)
		}
		got := mustGet(t, c, col.ID)
		equal(t, "collection after the rollback", []any{got.SegmentVersion, got.CompactionOffset, got.ManifestKey, got.RecordCount, got.Backlog(), got.LogPosition},
			[]any{int64(3), int64(4), "m3", int64(1), int64(6), int64(10)})
		equal(t, "oldest uncompacted is the first row after version 1", got.OldestUncompactedAt.IsZero(), false)
		equal(t, "the log after version 1 is read again", offsets(mustReadLog(t, c, col.ID, 0, math.MaxInt64, 0)), span(5, 10))
		// A purge now (the rollback's offset is the lowest) deletes nothing
		// the backlog needs.
		if n, err := c.PurgeLog(ctx, col.ID); err != nil || n != 0 {
			t.Fatalf("PurgeLog after the rollback: %d rows, %v; want 0", n, err)
		}
		equal(t, "the log after the purge", offsets(mustReadLog(t, c, col.ID, 0, math.MaxInt64, 0)), span(5, 10))
		vs, err := c.ListVersions(ctx, col.ID)
		if err != nil {
			t.Fatal(err)
		}
		equal(t, "rollback version row", vs[0], catalog.Version{CollectionID: col.ID, Version: 3, ManifestKey: "m3", CompactionOffset: 4, RecordCount: 1,
			SegmentBytes: 100, BlockCount: 1, CreatedAt: now, OffsetStart: 0, RollbackOf: 1, Reason: "bad compaction", CreatedBy: "alice@host", JobID: rb.JobID})
		// The job history has it: a finished job of kind rollback.
		j, err := c.GetJob(ctx, rb.JobID)
		if err != nil {
			t.Fatalf("the rollback's job: %v", err)
		}
		equal(t, "rollback job", []any{j.Kind, j.State, j.Trigger, j.Reason, j.OffsetStart, j.OffsetEnd, j.VersionBefore, j.VersionAfter, j.Node, j.FinishedAt, j.CollectionName},
			[]any{jobtype.KindRollback, catalog.JobSucceeded, catalog.TriggerOneOff, "bad compaction", int64(4), int64(8), int64(2), int64(3), "n1", now, col.Name})
		if !strings.Contains(j.Note, "rolled back to version 1") || !strings.Contains(j.Note, "(4, 8] are compacted again") || !strings.Contains(j.Note, "asked by alice@host") {
			t.Errorf("rollback job note %q", j.Note)
		}
		// A compaction continues from the rollback: offset 4 onwards.
		if err := c.CommitCompaction(ctx, catalog.Commit{CollectionID: col.ID, BaseVersion: 3, NewVersion: 4, ManifestKey: "m4", CompactionOffset: 10}); err != nil {
			t.Fatalf("compaction after the rollback: %v", err)
		}
		if vs, err = c.ListVersions(ctx, col.ID); err != nil {
			t.Fatal(err)
		}
		equal(t, "the compaction after the rollback covers (4, 10]", []int64{vs[0].OffsetStart, vs[0].CompactionOffset}, []int64{4, 10})
	})
}

func TestCommitRollbackRefusesAndWritesNothing(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		c := e.open(t)
		col := mustCreate(t, c, "refused", 2)
		mustAppend(t, c, col.ID, adds("a", 12, 2))
		for v := int64(1); v <= 4; v++ {
			commitAt(t, c, col.ID, v, 3*v)
		}
		if _, err := c.RetireVersions(ctx, col.ID, 3, time.Hour); err != nil {
			t.Fatal(err)
		}
		rb := func(base, to int64) catalog.Rollback {
			return catalog.Rollback{CollectionID: col.ID, BaseVersion: base, NewVersion: base + 1, ToVersion: to, FromManifestKey: fmt.Sprintf("m%d", to), ManifestKey: "new"}
		}
		// Version 2's later log rows gone, as a release that purged up to
		// the newest version's offset left them.
		if _, err := rawDB(t, e).ExecContext(ctx, `DELETE FROM log WHERE collection_id = $1 AND log_offset <= 9`, col.ID); err != nil {
			t.Fatal(err)
		}
		running := catalog.Job{ID: uuid.NewString(), CollectionID: col.ID, Trigger: catalog.TriggerScheduled, State: catalog.JobRunning,
			Attempt: 1, CreatedAt: e.clock.Now(), StartedAt: e.clock.Now()}
		before := mustGet(t, c, col.ID)
		tests := []struct {
			name    string
			rb      catalog.Rollback
			job     bool
			want    error
			message string
		}{
			{"a stale base version loses", rb(3, 3), false, catalog.ErrConflict, "segment version is 4"},
			{"a retired version is not found", rb(4, 1), false, catalog.ErrNotFound, "the oldest kept version is 2"},
			{"a version never committed is not found", rb(4, 9), false, catalog.ErrNotFound, "has no version 9"},
			{"the current version", rb(4, 4), false, catalog.ErrInvalidArgument, "already the current version"},
			{"another manifest", catalog.Rollback{CollectionID: col.ID, BaseVersion: 4, NewVersion: 5, ToVersion: 3, FromManifestKey: "m2", ManifestKey: "new"},
				false, catalog.ErrInvalidArgument, "is not version 3's"},
			{"a version number that does not follow", catalog.Rollback{CollectionID: col.ID, BaseVersion: 4, NewVersion: 6, ToVersion: 3, FromManifestKey: "m3"},
				false, catalog.ErrInvalidArgument, "does not follow"},
			{"a purged log", rb(4, 2), false, catalog.ErrFailedPrecondition, "after version 2's compaction offset 6 were purged"},
			{"a running job", rb(4, 3), true, catalog.ErrFailedPrecondition, "job " + running.ID + " of the collection is running"},
			{"an unknown collection", catalog.Rollback{CollectionID: uuid.NewString(), BaseVersion: 1, NewVersion: 2, ToVersion: 1}, false, catalog.ErrNotFound, "not found"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				if tt.job {
					if err := c.InsertJob(ctx, running); err != nil {
						t.Fatal(err)
					}
					defer func() {
						done := running
						done.State, done.FinishedAt = catalog.JobFailed, e.clock.Now()
						if err := c.UpdateJob(ctx, done); err != nil {
							t.Fatal(err)
						}
					}()
				}
				err := c.CommitRollback(ctx, tt.rb)
				wantErr(t, "CommitRollback", err, tt.want)
				if err != nil && !strings.Contains(err.Error(), tt.message) {
					t.Errorf("error %q does not say %q", err, tt.message)
				}
				equal(t, "collection unchanged", mustGet(t, c, col.ID), before)
				vs, err := c.ListVersions(ctx, col.ID)
				if err != nil {
					t.Fatal(err)
				}
				equal(t, "newest version", vs[0].Version, int64(4))
			})
		}
		// Once the job has ended, the rollback to version 3 goes through.
		if err := c.CommitRollback(ctx, rb(4, 3)); err != nil {
			t.Fatalf("rollback once nothing runs: %v", err)
		}
	})
}

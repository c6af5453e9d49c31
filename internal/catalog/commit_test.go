package catalog_test

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/jobtype"
	"github.com/compactorhq/compactor/internal/materialize"
)

func TestCommitCompactionCommitsEverythingAtOnce(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		c := e.open(t)
		col := mustCreate(t, c, "compacted", 4)
		mustAppend(t, c, col.ID, adds("a", 10, 4))
		for range 2 {
			if _, _, err := c.RecordFailure(ctx, col.ID, 2); err != nil {
				t.Fatal(err)
			}
		}
		if !mustGet(t, c, col.ID).DeadLettered() {
			t.Fatal("setup: collection not dead-lettered")
		}
		started := ms(e.clock.Advance(time.Second))
		job := catalog.Job{ID: uuid.NewString(), CollectionID: col.ID, Kind: jobtype.KindCompaction, Trigger: catalog.TriggerOneOff, State: catalog.JobRunning,
			Attempt: 1, CreatedAt: started, StartedAt: started, Node: "n1"}
		if err := c.InsertJob(ctx, job); err != nil {
			t.Fatal(err)
		}

		now := ms(e.clock.Advance(time.Second))
		done := job
		done.State, done.FinishedAt = catalog.JobSucceeded, now
		done.OffsetStart, done.OffsetEnd, done.RecordsRead, done.RecordsWritten, done.BytesWritten = 0, 6, 6, 5, 4096
		done.VersionBefore, done.VersionAfter, done.Note = 0, 1, "compacted"
		cm := catalog.Commit{CollectionID: col.ID, BaseVersion: 0, NewVersion: 1, ManifestKey: "collections/x/v1.json",
			CompactionOffset: 6, RecordCount: 5, SegmentBytes: 8192, BlockCount: 2, Digest: "0123456789abcdef0123456789abcdef", Job: &done}
		if err := c.CommitCompaction(ctx, cm); err != nil {
			t.Fatalf("CommitCompaction: %v", err)
		}

		got := mustGet(t, c, col.ID)
		want := col
		want.Dimension, want.LogPosition, want.CompactionOffset, want.SegmentVersion = 4, 10, 6, 1
		want.ManifestKey, want.RecordCount, want.LastCompactedAt, want.UpdatedAt = cm.ManifestKey, 5, now, now
		want.OldestUncompactedAt = got.OldestUncompactedAt
		equal(t, "collection", got, want)
		if got.OldestUncompactedAt.IsZero() {
			t.Error("oldest uncompacted time lost with records 7..10 left")
		}
		equal(t, "log after commit", offsets(mustReadLog(t, c, col.ID, 0, math.MaxInt64, 0)), span(7, 10))
		// The commit left rows 1..6 in the table, unread; the purge removes
		// them, and only them, once.
		if n, err := c.PurgeLog(ctx, col.ID); err != nil || n != 6 {
			t.Fatalf("PurgeLog: %d rows, %v; want 6", n, err)
		}
		if n, err := c.PurgeLog(ctx, col.ID); err != nil || n != 0 {
			t.Fatalf("second PurgeLog: %d rows, %v; want 0", n, err)
		}
		equal(t, "log after purge", offsets(mustReadLog(t, c, col.ID, 0, math.MaxInt64, 0)), span(7, 10))
		versions, err := c.ListVersions(ctx, col.ID)
		if err != nil {
			t.Fatal(err)
		}
		equal(t, "versions", versions, []catalog.Version{{CollectionID: col.ID, Version: 1, ManifestKey: cm.ManifestKey, CompactionOffset: 6, RecordCount: 5, SegmentBytes: 8192, BlockCount: 2, CreatedAt: now,
			Digest: cm.Digest, JobID: job.ID}})
		// A verification's outcome is kept on the version row, at the
		// catalog's time; the latest one wins.
		verifiedAt := ms(e.clock.Advance(time.Second))
		if err := c.RecordVerification(ctx, col.ID, 1, "verification failed: block b: digest"); err != nil {
			t.Fatal(err)
		}
		if err := c.RecordVerification(ctx, col.ID, 9, ""); !errors.Is(err, catalog.ErrNotFound) {
			t.Errorf("verification of version 9: %v, want not found", err)
		}
		if versions, err = c.ListVersions(ctx, col.ID); err != nil || versions[0].VerifyError != "verification failed: block b: digest" || !versions[0].VerifiedAt.Equal(verifiedAt) {
			t.Errorf("after a failed verification: %+v %v", versions, err)
		}
		// The scrub's next versions: never verified ones by their commit
		// time, the others by their last verification.
		if vs, err := c.VersionsToScrub(ctx, verifiedAt.Add(time.Millisecond), 10); err != nil || len(vs) != 1 || vs[0].Version != 1 || !vs[0].VerifiedAt.Equal(verifiedAt) {
			t.Errorf("versions to scrub: %+v %v", vs, err)
		}
		if vs, err := c.VersionsToScrub(ctx, verifiedAt, 10); err != nil || len(vs) != 0 {
			t.Errorf("versions to scrub before the verification: %+v %v", vs, err)
		}
		if err := c.RecordVerification(ctx, col.ID, 1, ""); err != nil {
			t.Fatal(err)
		}
		if versions, err = c.ListVersions(ctx, col.ID); err != nil || versions[0].VerifyError != "" {
			t.Errorf("after a passed verification: %+v %v", versions, err)
		}
		stored, err := c.GetJob(ctx, job.ID)
		if err != nil {
			t.Fatal(err)
		}
		done.CollectionName = col.Name     // read with the job
		done.Kind = jobtype.KindCompaction // a job written without a kind reads as a compaction
		equal(t, "job", stored, done)

		// Committing with nothing new (same offset) and no job is allowed.
		if err := c.CommitCompaction(ctx, catalog.Commit{CollectionID: col.ID, BaseVersion: 1, NewVersion: 2, ManifestKey: "v2", CompactionOffset: 6, RecordCount: 5}); err != nil {
			t.Fatalf("commit at the same offset: %v", err)
		}
		// Up to the log position exactly.
		if err := c.CommitCompaction(ctx, catalog.Commit{CollectionID: col.ID, BaseVersion: 2, NewVersion: 3, ManifestKey: "v3", CompactionOffset: 10, RecordCount: 7}); err != nil {
			t.Fatalf("commit up to the log position: %v", err)
		}
		if got := mustReadLog(t, c, col.ID, 0, math.MaxInt64, 0); len(got) != 0 {
			t.Fatalf("log after full compaction: %v, want empty", offsets(got))
		}
		if got := mustGet(t, c, col.ID); got.Backlog() != 0 || !got.OldestUncompactedAt.IsZero() {
			t.Fatalf("after full compaction: backlog %d, oldest %v", got.Backlog(), got.OldestUncompactedAt)
		}
	})
}

func TestCommitCompactionRejectsAndWritesNothing(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		c := e.open(t)
		col := mustCreate(t, c, "guarded", 2)
		other := mustCreate(t, c, "other", 2)
		mustAppend(t, c, col.ID, adds("a", 10, 2))
		if err := c.CommitCompaction(ctx, catalog.Commit{CollectionID: col.ID, BaseVersion: 0, NewVersion: 1, ManifestKey: "v1", CompactionOffset: 2, RecordCount: 2}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := c.RecordFailure(ctx, col.ID, 5); err != nil {
			t.Fatal(err)
		}
		job := catalog.Job{ID: uuid.NewString(), CollectionID: col.ID, Trigger: catalog.TriggerScheduled, State: catalog.JobRunning, Attempt: 2}
		if err := c.InsertJob(ctx, job); err != nil {
			t.Fatal(err)
		}
		finished := job
		finished.State, finished.VersionAfter = catalog.JobSucceeded, 2

		type snapshot struct {
			col      catalog.Collection
			log      []materialize.OperationRecord
			versions []catalog.Version
			job      catalog.Job
		}
		take := func() snapshot {
			t.Helper()
			vs, err := c.ListVersions(ctx, col.ID)
			if err != nil {
				t.Fatal(err)
			}
			j, err := c.GetJob(ctx, job.ID)
			if err != nil {
				t.Fatal(err)
			}
			return snapshot{mustGet(t, c, col.ID), mustReadLog(t, c, col.ID, 0, math.MaxInt64, 0), vs, j}
		}
		before := take()

		valid := catalog.Commit{CollectionID: col.ID, BaseVersion: 1, NewVersion: 2, ManifestKey: "v2", CompactionOffset: 6, RecordCount: 4, Job: &finished}
		with := func(f func(*catalog.Commit)) catalog.Commit {
			cm := valid
			f(&cm)
			return cm
		}
		jobWith := func(f func(*catalog.Job)) *catalog.Job {
			j := finished
			f(&j)
			return &j
		}
		tests := []struct {
			name     string
			cm       catalog.Commit
			want     error
			conflict *catalog.ConflictError
		}{
			{name: "a base version already superseded", cm: with(func(cm *catalog.Commit) { cm.BaseVersion, cm.NewVersion = 0, 1 }),
				want: catalog.ErrConflict, conflict: &catalog.ConflictError{CollectionID: col.ID, Expected: 0, Actual: 1}},
			{name: "a base version from the future", cm: with(func(cm *catalog.Commit) { cm.BaseVersion, cm.NewVersion = 4, 5 }),
				want: catalog.ErrConflict, conflict: &catalog.ConflictError{CollectionID: col.ID, Expected: 4, Actual: 1}},
			{name: "a new version that skips one", cm: with(func(cm *catalog.Commit) { cm.NewVersion = 3 }), want: catalog.ErrInvalidArgument},
			{name: "an offset that goes backwards", cm: with(func(cm *catalog.Commit) { cm.CompactionOffset = 1 }), want: catalog.ErrInvalidArgument},
			{name: "an offset past the log position", cm: with(func(cm *catalog.Commit) { cm.CompactionOffset = 11 }), want: catalog.ErrInvalidArgument},
			{name: "a negative record count", cm: with(func(cm *catalog.Commit) { cm.RecordCount = -1 }), want: catalog.ErrInvalidArgument},
			{name: "an unknown collection", cm: with(func(cm *catalog.Commit) { cm.CollectionID, cm.Job = uuid.NewString(), nil }), want: catalog.ErrNotFound},
			{name: "a job of another collection", cm: with(func(cm *catalog.Commit) { cm.Job = jobWith(func(j *catalog.Job) { j.CollectionID = other.ID }) }),
				want: catalog.ErrInvalidArgument},
			{name: "a job with an unknown state", cm: with(func(cm *catalog.Commit) { cm.Job = jobWith(func(j *catalog.Job) { j.State = "DONE" }) }),
				want: catalog.ErrInvalidArgument},
			{name: "a job that does not exist rolls the commit back", cm: with(func(cm *catalog.Commit) { cm.Job = jobWith(func(j *catalog.Job) { j.ID = uuid.NewString() }) }),
				want: catalog.ErrNotFound},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				e.clock.Advance(time.Minute)
				err := c.CommitCompaction(ctx, tt.cm)
				wantErr(t, "CommitCompaction", err, tt.want)
				if tt.conflict != nil {
					ce, ok := err.(*catalog.ConflictError)
					if !ok {
						t.Fatalf("error %T, want an unwrapped *ConflictError", err)
					}
					equal(t, "conflict", ce, tt.conflict)
				}
				equal(t, "state after a rejected commit", take(), before)
			})
		}
		if err := c.CommitCompaction(ctx, valid); err != nil {
			t.Fatalf("the valid commit after the rejected ones: %v", err)
		}
		if got := mustGet(t, c, col.ID); got.SegmentVersion != 2 || got.CompactionOffset != 6 || got.FailureCount != 0 {
			t.Fatalf("after the valid commit: %+v", got)
		}
	})
}

func TestCommitCompactionDuplicateLosesCleanly(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		c := e.open(t)
		col := mustCreate(t, c, "raced", 2)
		mustAppend(t, c, col.ID, adds("a", 10, 2))
		const racers = 6
		errs := make([]error, racers)
		var wg sync.WaitGroup
		for i := range racers {
			wg.Go(func() {
				errs[i] = c.CommitCompaction(ctx, catalog.Commit{CollectionID: col.ID, BaseVersion: 0, NewVersion: 1, ManifestKey: "v1", CompactionOffset: int64(i + 1)})
			})
		}
		wg.Wait()
		winners := 0
		for i, err := range errs {
			var ce *catalog.ConflictError
			switch {
			case err == nil:
				winners++
				if got := mustGet(t, c, col.ID).CompactionOffset; got != int64(i+1) {
					t.Errorf("winner %d committed offset %d, collection has %d", i, i+1, got)
				}
			case errors.As(err, &ce) && ce.Expected == 0 && ce.Actual == 1:
			default:
				t.Errorf("racer %d: %v, want success or a conflict", i, err)
			}
		}
		if winners != 1 {
			t.Fatalf("%d commits won, want exactly 1", winners)
		}
		if vs, err := c.ListVersions(ctx, col.ID); err != nil || len(vs) != 1 {
			t.Fatalf("versions: %v, %v; want one", vs, err)
		}
	})
}

func TestListAndDeleteVersions(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		c := e.open(t)
		col := mustCreate(t, c, "versioned", 2)
		vs, err := c.ListVersions(ctx, col.ID)
		if err != nil || vs == nil || len(vs) != 0 {
			t.Fatalf("no versions yet: %#v, %v; want an empty slice", vs, err)
		}
		mustAppend(t, c, col.ID, adds("a", 4, 2))
		for v := int64(1); v <= 4; v++ {
			if err := c.CommitCompaction(ctx, catalog.Commit{CollectionID: col.ID, BaseVersion: v - 1, NewVersion: v, ManifestKey: "m", CompactionOffset: v}); err != nil {
				t.Fatal(err)
			}
		}
		list := func() []int64 {
			t.Helper()
			vs, err := c.ListVersions(ctx, col.ID)
			if err != nil {
				t.Fatal(err)
			}
			var out []int64
			for _, v := range vs {
				out = append(out, v.Version)
			}
			return out
		}
		equal(t, "versions newest first", list(), []int64{4, 3, 2, 1})

		tests := []struct {
			name     string
			id       string
			versions []int64
			want     error
			left     []int64
		}{
			{"the current version is refused with the others", col.ID, []int64{1, 4}, catalog.ErrInvalidArgument, []int64{4, 3, 2, 1}},
			{"old versions are deleted", col.ID, []int64{1, 2}, nil, []int64{4, 3}},
			{"absent versions are ignored", col.ID, []int64{1, 2, 99}, nil, []int64{4, 3}},
			{"nothing to delete", col.ID, nil, nil, []int64{4, 3}},
			{"an unknown collection", uuid.NewString(), []int64{3}, catalog.ErrNotFound, []int64{4, 3}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				wantErr(t, "DeleteVersions", c.DeleteVersions(ctx, tt.id, tt.versions), tt.want)
				equal(t, "versions left", list(), tt.left)
			})
		}
		_, err = c.ListVersions(ctx, uuid.NewString())
		wantErr(t, "ListVersions of an unknown collection", err, catalog.ErrNotFound)
	})
}

// TestRetireVersions: versions leave the retained set with a retirement
// time in catalog time, and expire only once retired for the grace period,
// however old they are.
func TestRetireVersions(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		c := e.open(t)
		col := mustCreate(t, c, "retiring", 2)
		mustAppend(t, c, col.ID, adds("a", 8, 2))
		commit := func(v int64) {
			t.Helper()
			if err := c.CommitCompaction(ctx, catalog.Commit{CollectionID: col.ID, BaseVersion: v - 1, NewVersion: v, ManifestKey: fmt.Sprintf("m%d", v), CompactionOffset: v}); err != nil {
				t.Fatal(err)
			}
		}
		numbers := func(vs []catalog.Version) []int64 {
			out := []int64{}
			for _, v := range vs {
				out = append(out, v.Version)
			}
			return out
		}
		const grace = time.Minute
		for v := int64(1); v <= 3; v++ {
			commit(v)
		}
		// Versions written long ago are retired now, not expired.
		e.clock.Advance(10 * grace)
		r, err := c.RetireVersions(ctx, col.ID, 1, grace)
		if err != nil {
			t.Fatal(err)
		}
		equal(t, "retained right after retirement", numbers(r.Retained), []int64{3, 2, 1})
		equal(t, "expired right after retirement", numbers(r.Expired), []int64{})
		equal(t, "versions retired", r.Retired, 2)
		retiredAt := ms(e.clock.Now())
		vs, err := c.ListVersions(ctx, col.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range vs {
			want := retiredAt
			if v.Version == 3 {
				want = time.Time{}
			}
			equal(t, fmt.Sprintf("retired_at of version %d", v.Version), v.RetiredAt, want)
		}

		// A newer version retires version 3; 1 and 2 keep their time.
		commit(4)
		e.clock.Advance(grace - time.Millisecond)
		r, err = c.RetireVersions(ctx, col.ID, 1, grace)
		if err != nil {
			t.Fatal(err)
		}
		equal(t, "retained just before the grace ends", numbers(r.Retained), []int64{4, 3, 2, 1})
		equal(t, "versions retired", r.Retired, 1)
		e.clock.Advance(time.Millisecond)
		r, err = c.RetireVersions(ctx, col.ID, 1, grace)
		if err != nil {
			t.Fatal(err)
		}
		equal(t, "retained when the grace ends", numbers(r.Retained), []int64{4, 3})
		equal(t, "expired when the grace ends", numbers(r.Expired), []int64{2, 1})
		equal(t, "versions retired", r.Retired, 0)

		// A larger keep does not bring a retired version back.
		if r, err = c.RetireVersions(ctx, col.ID, 10, grace); err != nil {
			t.Fatal(err)
		}
		equal(t, "expired with a larger keep", numbers(r.Expired), []int64{2, 1})

		_, err = c.RetireVersions(ctx, col.ID, 0, grace)
		wantErr(t, "keep 0", err, catalog.ErrInvalidArgument)
		_, err = c.RetireVersions(ctx, col.ID, 1, -time.Second)
		wantErr(t, "negative grace", err, catalog.ErrInvalidArgument)
		_, err = c.RetireVersions(ctx, uuid.NewString(), 1, grace)
		wantErr(t, "unknown collection", err, catalog.ErrNotFound)
	})
}

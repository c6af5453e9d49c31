package catalog_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/vindex"
)

func TestCreateCollection(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		c := e.open(t)
		tests := []struct {
			name      string
			collName  string
			dimension int
			want      error
		}{
			{"a plain name without a dimension is accepted", "docs", 0, nil},
			{"a dimension is kept", "vectors", 64, nil},
			{"the largest dimension is accepted", "wide", 65536, nil},
			{"a 256-byte name is accepted", strings.Repeat("n", 256), 0, nil},
			{"a unicode name is accepted", "débian-仕様", 3, nil},
			{"an empty name is rejected", "", 0, catalog.ErrInvalidArgument},
			{"a blank name is rejected", " \t\n", 0, catalog.ErrInvalidArgument},
			{"a 257-byte name is rejected", strings.Repeat("n", 257), 0, catalog.ErrInvalidArgument},
			{"a name that is not UTF-8 is rejected", "bad\xffname", 0, catalog.ErrInvalidArgument},
			{"a name with a NUL byte is rejected", "nul\x00name", 0, catalog.ErrInvalidArgument},
			{"a name with a newline is rejected", "two\nlines", 0, catalog.ErrInvalidArgument},
			{"a name with a right-to-left override is rejected", "abc\u202edef", 0, catalog.ErrInvalidArgument},
			{"a name in another script is accepted", "débian-🦀-日本", 0, nil},
			{"a negative dimension is rejected", "negative", -1, catalog.ErrInvalidArgument},
			{"a dimension over 65536 is rejected", "too-wide", 65537, catalog.ErrInvalidArgument},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				now := e.clock.Advance(time.Second)
				col, err := c.CreateCollection(ctx, tt.collName, tt.dimension)
				wantErr(t, "CreateCollection", err, tt.want)
				if tt.want != nil {
					if _, err := c.CreateCollection(ctx, "after-"+tt.name, 0); err != nil {
						t.Fatalf("the catalog still works: %v", err)
					}
					return
				}
				if _, err := uuid.Parse(col.ID); err != nil {
					t.Errorf("ID %q is not a UUID: %v", col.ID, err)
				}
				want := catalog.Collection{ID: col.ID, Name: tt.collName, Dimension: tt.dimension, CreatedAt: ms(now), UpdatedAt: ms(now),
					Index: catalog.IndexSettings{Distance: vindex.DistanceCosine, M: 16, EfConstruction: 200, EfSearch: 100}}
				equal(t, "created collection", col, want)
				equal(t, "stored collection", mustGet(t, c, col.ID), want)
			})
		}
	})
}

func TestCreateCollectionRejectsDuplicateName(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		c := e.open(t)
		first := mustCreate(t, c, "debian", 64)
		_, err := c.CreateCollection(ctx, "debian", 64)
		if !errors.Is(err, catalog.ErrAlreadyExists) {
			t.Fatalf("second CreateCollection: error %v, want ErrAlreadyExists", err)
		}
		if !strings.Contains(err.Error(), `"debian"`) {
			t.Errorf("error %q does not name the collection", err)
		}
		other := mustCreate(t, c, "Debian", 0) // names are case-sensitive
		cols, err := c.ListCollections(ctx)
		if err != nil {
			t.Fatal(err)
		}
		equal(t, "collections", []string{cols[0].ID, cols[1].ID}, []string{other.ID, first.ID})
	})
}

func TestGetCollectionNotFound(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		c := e.open(t)
		mustCreate(t, c, "present", 0)
		for _, id := range []string{uuid.NewString(), "", "not-a-uuid"} {
			_, err := c.GetCollection(ctx, id)
			if !errors.Is(err, catalog.ErrNotFound) {
				t.Fatalf("GetCollection(%q): error %v, want ErrNotFound", id, err)
			}
			if !strings.Contains(err.Error(), id) {
				t.Errorf("error %q does not name the id %q", err, id)
			}
		}
	})
}

func TestListCollectionsOrdersByName(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		c := e.open(t)
		cols, err := c.ListCollections(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if cols == nil || len(cols) != 0 {
			t.Fatalf("empty catalog: got %#v, want an empty slice", cols)
		}
		byName := map[string]catalog.Collection{}
		for _, name := range []string{"b", "c", "a", "B", "a-1"} {
			byName[name] = mustCreate(t, c, name, 0)
		}
		mustAppend(t, c, byName["c"].ID, adds("c", 3, 2))
		cols, err = c.ListCollections(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, col := range cols {
			names = append(names, col.Name)
			equal(t, "listed "+col.Name, col, mustGet(t, c, col.ID))
		}
		equal(t, "names", names, []string{"B", "a", "a-1", "b", "c"})
		if got := cols[4]; got.LogPosition != 3 || got.OldestUncompactedAt.IsZero() {
			t.Errorf("collection c: log position %d, oldest uncompacted %v; want 3 and a time", got.LogPosition, got.OldestUncompactedAt)
		}
	})
}

func TestDeleteCollection(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		c := e.open(t)
		col := mustCreate(t, c, "doomed", 4)
		keep := mustCreate(t, c, "kept", 4)
		mustAppend(t, c, col.ID, adds("x", 5, 4))
		mustAppend(t, c, keep.ID, adds("y", 2, 4))
		job := catalog.Job{ID: uuid.NewString(), CollectionID: col.ID, Trigger: catalog.TriggerOneOff, State: catalog.JobRunning}
		if err := c.InsertJob(ctx, job); err != nil {
			t.Fatal(err)
		}
		if err := c.CommitCompaction(ctx, catalog.Commit{CollectionID: col.ID, BaseVersion: 0, NewVersion: 1, ManifestKey: "m/1", CompactionOffset: 3, RecordCount: 3}); err != nil {
			t.Fatal(err)
		}
		before := mustGet(t, c, col.ID)

		deleted, err := c.DeleteCollection(ctx, col.ID)
		if err != nil {
			t.Fatalf("DeleteCollection: %v", err)
		}
		equal(t, "returned row", deleted, before)
		if deleted.SegmentVersion != 1 || deleted.ManifestKey != "m/1" || deleted.LogPosition != 5 {
			t.Errorf("returned row %+v lacks the state the caller needs to delete blobs", deleted)
		}

		checks := map[string]error{}
		_, checks["GetCollection"] = c.GetCollection(ctx, col.ID)
		_, checks["ReadLog"] = c.ReadLog(ctx, col.ID, 0, 100, 0)
		_, _, checks["ReadView"] = c.ReadView(ctx, col.ID)
		_, checks["ListVersions"] = c.ListVersions(ctx, col.ID)
		_, checks["GetJob"] = c.GetJob(ctx, job.ID)
		_, checks["DeleteCollection again"] = c.DeleteCollection(ctx, col.ID)
		_, _, checks["AppendLog"] = c.AppendLog(ctx, col.ID, adds("z", 1, 4), catalog.AppendLimits{})
		for what, err := range checks {
			if !errors.Is(err, catalog.ErrNotFound) {
				t.Errorf("%s after delete: error %v, want ErrNotFound", what, err)
			}
		}
		jobs, err := c.ListJobs(ctx, catalog.JobFilter{CollectionID: col.ID})
		if err != nil || len(jobs) != 0 {
			t.Errorf("jobs of the deleted collection: %v, %v; want none", jobs, err)
		}
		if got := mustReadLog(t, c, keep.ID, 0, 100, 0); len(got) != 2 {
			t.Errorf("the other collection lost log rows: %d left, want 2", len(got))
		}
		mustCreate(t, c, "doomed", 8) // the name is free again
	})
}

func TestRecordFailureDeadLettersAndSuccessClears(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		c := e.open(t)
		col := mustCreate(t, c, "flaky", 0)
		var deadAt time.Time
		steps := []struct {
			failures int
			dead     bool
		}{{1, false}, {2, false}, {3, true}, {4, true}}
		for _, s := range steps {
			now := e.clock.Advance(time.Minute)
			n, dead, err := c.RecordFailure(ctx, col.ID, 3)
			if err != nil {
				t.Fatal(err)
			}
			if n != s.failures || dead != s.dead {
				t.Fatalf("RecordFailure: (%d, %v), want (%d, %v)", n, dead, s.failures, s.dead)
			}
			if dead && deadAt.IsZero() {
				deadAt = ms(now)
			}
			got := mustGet(t, c, col.ID)
			if got.FailureCount != s.failures || got.DeadLettered() != s.dead || !got.DeadLetteredAt.Equal(deadAt) {
				t.Fatalf("collection after %d failures: count %d, dead-lettered at %v; want %d, %v", s.failures, got.FailureCount, got.DeadLetteredAt, s.failures, deadAt)
			}
		}
		if err := c.RecordSuccess(ctx, col.ID); err != nil {
			t.Fatal(err)
		}
		if got := mustGet(t, c, col.ID); got.FailureCount != 0 || got.DeadLettered() {
			t.Fatalf("after RecordSuccess: count %d, dead-lettered at %v; want 0 and none", got.FailureCount, got.DeadLetteredAt)
		}
		if n, dead, err := c.RecordFailure(ctx, col.ID, 1); err != nil || n != 1 || !dead {
			t.Fatalf("RecordFailure with threshold 1: (%d, %v, %v), want (1, true, nil)", n, dead, err)
		}

		_, _, err := c.RecordFailure(ctx, col.ID, 0)
		wantErr(t, "RecordFailure with threshold 0", err, catalog.ErrInvalidArgument)
		_, _, err = c.RecordFailure(ctx, uuid.NewString(), 3)
		wantErr(t, "RecordFailure of an unknown collection", err, catalog.ErrNotFound)
		wantErr(t, "RecordSuccess of an unknown collection", c.RecordSuccess(ctx, uuid.NewString()), catalog.ErrNotFound)
	})
}

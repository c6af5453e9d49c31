package catalog_test

import (
	"cmp"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/jobtype"
)

func fullJob(collectionID string, at time.Time) catalog.Job {
	return catalog.Job{
		ID: uuid.NewString(), CollectionID: collectionID, Kind: jobtype.KindIndexRebuild, Params: `{"m":32}`,
		Trigger: catalog.TriggerOneOff, State: catalog.JobSucceeded, Reason: "operator: <b>reindex</b>", Attempt: 3,
		CreatedAt: at, StartedAt: at.Add(time.Second), FinishedAt: at.Add(3 * time.Second),
		OffsetStart: 10, OffsetEnd: 20, RecordsRead: 10, RecordsWritten: 7, BytesWritten: 1 << 40,
		VersionBefore: 4, VersionAfter: 5, Error: "", Note: "ok", Node: "host-1", Continues: uuid.NewString(),
	}
}

func TestInsertAndGetJob(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		c := e.open(t)
		col := mustCreate(t, c, "jobs", 0)
		full := fullJob(col.ID, ms(e.clock.Now()))
		queued := catalog.Job{ID: uuid.NewString(), CollectionID: col.ID, Kind: jobtype.KindCompaction, Trigger: catalog.TriggerScheduled, State: catalog.JobQueued}
		queuedWant := queued
		queuedWant.CreatedAt = ms(e.clock.Now()) // a zero creation time is set to now
		subMs := fullJob(col.ID, e.clock.Now().Add(123456*time.Nanosecond))
		subMsWant := subMs
		subMsWant.CreatedAt, subMsWant.StartedAt, subMsWant.FinishedAt = ms(subMs.CreatedAt), ms(subMs.StartedAt), ms(subMs.FinishedAt)

		tests := []struct {
			name string
			job  catalog.Job
			want error
			get  catalog.Job // what GetJob returns after a successful insert
		}{
			{name: "every field round-trips", job: full, get: full},
			{name: "zero times stay zero", job: queued, get: queuedWant},
			{name: "times are kept to the millisecond", job: subMs, get: subMsWant},
			{name: "a duplicate id", job: full, want: catalog.ErrAlreadyExists},
			{name: "an unknown collection", job: fullJob(uuid.NewString(), full.CreatedAt), want: catalog.ErrNotFound},
			{name: "an empty id", job: func() catalog.Job { j := full; j.ID = ""; return j }(), want: catalog.ErrInvalidArgument},
			{name: "an unknown state", job: func() catalog.Job { j := fullJob(col.ID, full.CreatedAt); j.State = "PAUSED"; return j }(), want: catalog.ErrInvalidArgument},
			{name: "an unknown trigger", job: func() catalog.Job { j := fullJob(col.ID, full.CreatedAt); j.Trigger = ""; return j }(), want: catalog.ErrInvalidArgument},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				err := c.InsertJob(ctx, tt.job)
				wantErr(t, "InsertJob", err, tt.want)
				if tt.want != nil {
					return
				}
				got, err := c.GetJob(ctx, tt.job.ID)
				if err != nil {
					t.Fatal(err)
				}
				want := tt.get
				want.CollectionName = col.Name // read with the job
				equal(t, "stored job", got, want)
			})
		}
		_, err := c.GetJob(ctx, uuid.NewString())
		wantErr(t, "GetJob of an unknown id", err, catalog.ErrNotFound)
	})
}

func TestUpdateJob(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		c := e.open(t)
		col := mustCreate(t, c, "jobs", 0)
		other := mustCreate(t, c, "other", 0)
		created := ms(e.clock.Now())
		j := catalog.Job{ID: uuid.NewString(), CollectionID: col.ID, Kind: jobtype.KindCompaction, Trigger: catalog.TriggerScheduled, State: catalog.JobQueued, Attempt: 1, CreatedAt: created}
		if err := c.InsertJob(ctx, j); err != nil {
			t.Fatal(err)
		}
		running := j
		running.State, running.StartedAt, running.Node, running.OffsetStart, running.OffsetEnd = catalog.JobRunning, created.Add(time.Second), "n2", 5, 9
		failed := fullJob(col.ID, created)
		failed.ID, failed.State, failed.Error, failed.Note = j.ID, catalog.JobFailed, "blob store: timeout", ""
		failed.Continues = ""                         // set at insertion only: see "continues is kept"
		failed.Kind, failed.Params = j.Kind, j.Params // likewise
		reverted := failed                            // optional times and text can be cleared again
		reverted.StartedAt, reverted.FinishedAt, reverted.Error, reverted.Reason = time.Time{}, time.Time{}, "", ""
		moved := reverted // identity fields are not mutable
		moved.CollectionID, moved.CreatedAt, moved.Continues = other.ID, created.Add(time.Hour), uuid.NewString()

		tests := []struct {
			name   string
			update catalog.Job
			want   error
			get    catalog.Job
		}{
			{name: "to running", update: running, get: running},
			{name: "every mutable field", update: failed, get: failed},
			{name: "back to zero values", update: reverted, get: reverted},
			{name: "collection, creation time and continues are kept", update: moved, get: reverted},
			{name: "an unknown id", update: func() catalog.Job { u := running; u.ID = uuid.NewString(); return u }(), want: catalog.ErrNotFound, get: reverted},
			{name: "an unknown state", update: func() catalog.Job { u := running; u.State = "?"; return u }(), want: catalog.ErrInvalidArgument, get: reverted},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				wantErr(t, "UpdateJob", c.UpdateJob(ctx, tt.update), tt.want)
				got, err := c.GetJob(ctx, j.ID)
				if err != nil {
					t.Fatal(err)
				}
				want := tt.get
				want.CollectionName = col.Name // read with the job
				equal(t, "stored job", got, want)
			})
		}
	})
}

func TestListJobsFiltersAndPages(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		c := e.open(t)
		a := mustCreate(t, c, "a", 0)
		b := mustCreate(t, c, "b", 0)
		states := []catalog.JobState{catalog.JobQueued, catalog.JobRunning, catalog.JobSucceeded, catalog.JobFailed, catalog.JobCancelled}
		base := ms(e.clock.Now())
		var all []catalog.Job
		for i := range 23 {
			collection := []catalog.Collection{a, b}[i%2]
			if s := states[i%len(states)]; !s.Finished() {
				// At most one QUEUED and one RUNNING job per collection.
				collection = mustCreate(t, c, fmt.Sprint("active-", i), 0)
			}
			j := catalog.Job{
				ID:             uuid.NewString(),
				Kind:           jobtype.KindCompaction,
				CollectionID:   collection.ID,
				CollectionName: collection.Name,
				Trigger:        []catalog.Trigger{catalog.TriggerScheduled, catalog.TriggerOneOff}[i%3/2],
				State:          states[i%len(states)],
				CreatedAt:      base.Add(time.Duration(i/3) * time.Second), // three jobs per instant: ties broken by id
				Reason:         fmt.Sprint(i),
			}
			if err := c.InsertJob(ctx, j); err != nil {
				t.Fatal(err)
			}
			all = append(all, j)
		}
		newestFirst := func(x, y catalog.Job) int {
			return cmp.Or(y.CreatedAt.Compare(x.CreatedAt), cmp.Compare(y.ID, x.ID))
		}
		slices.SortFunc(all, newestFirst)
		model := func(f catalog.JobFilter) []catalog.Job {
			out := []catalog.Job{}
			for _, j := range all {
				if (f.CollectionID == "" || j.CollectionID == f.CollectionID) &&
					(len(f.States) == 0 || slices.Contains(f.States, j.State)) &&
					(f.Trigger == "" || j.Trigger == f.Trigger) &&
					(f.Before.IsZero() || j.CreatedAt.Before(f.Before.CreatedAt) || (j.CreatedAt.Equal(f.Before.CreatedAt) && j.ID < f.Before.ID)) {
					out = append(out, j)
				}
			}
			if limit := cmp.Or(f.Limit, 1000); len(out) > limit {
				out = out[:limit]
			}
			return out
		}
		mid := all[10]
		filters := []struct {
			name string
			f    catalog.JobFilter
		}{
			{"no filter", catalog.JobFilter{}},
			{"by collection", catalog.JobFilter{CollectionID: b.ID}},
			{"by one state", catalog.JobFilter{States: []catalog.JobState{catalog.JobRunning}}},
			{"by finished states", catalog.JobFilter{States: []catalog.JobState{catalog.JobSucceeded, catalog.JobFailed, catalog.JobCancelled}}},
			{"by trigger", catalog.JobFilter{Trigger: catalog.TriggerOneOff}},
			{"all filters", catalog.JobFilter{CollectionID: a.ID, States: []catalog.JobState{catalog.JobQueued, catalog.JobFailed}, Trigger: catalog.TriggerScheduled}},
			{"before a cursor", catalog.JobFilter{Before: catalog.JobCursor{CreatedAt: mid.CreatedAt, ID: mid.ID}}},
			{"before a cursor with a filter", catalog.JobFilter{CollectionID: a.ID, Before: catalog.JobCursor{CreatedAt: mid.CreatedAt, ID: mid.ID}}},
			{"a limit", catalog.JobFilter{Limit: 4}},
			{"a collection with no jobs", catalog.JobFilter{CollectionID: uuid.NewString()}},
		}
		for _, tt := range filters {
			t.Run(tt.name, func(t *testing.T) {
				got, err := c.ListJobs(ctx, tt.f)
				if err != nil {
					t.Fatal(err)
				}
				want := model(tt.f)
				equal(t, "jobs", got, want)

				// Paging with the cursor of each page's last job yields the same jobs.
				paged := []catalog.Job{}
				f := tt.f
				f.Limit = 3
				for range 20 {
					page, err := c.ListJobs(ctx, f)
					if err != nil {
						t.Fatal(err)
					}
					paged = append(paged, page...)
					if len(page) < f.Limit {
						break
					}
					last := page[len(page)-1]
					f.Before = catalog.JobCursor{CreatedAt: last.CreatedAt, ID: last.ID}
				}
				if tt.f.Limit == 0 {
					equal(t, "paged jobs", paged, want)
				}
			})
		}
	})
}

func TestListJobsLimitIsCappedAt1000(t *testing.T) {
	if testing.Short() {
		t.Skip("inserts 1001 jobs")
	}
	forEachBackend(t, func(t *testing.T, e *env) {
		c := e.open(t)
		col := mustCreate(t, c, "many", 0)
		for range 1001 {
			if err := c.InsertJob(ctx, catalog.Job{ID: uuid.NewString(), CollectionID: col.ID, Trigger: catalog.TriggerScheduled, State: catalog.JobSucceeded}); err != nil {
				t.Fatal(err)
			}
		}
		for _, limit := range []int{0, 1001, 5000} {
			got, err := c.ListJobs(ctx, catalog.JobFilter{Limit: limit})
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1000 {
				t.Errorf("limit %d: %d jobs, want 1000", limit, len(got))
			}
		}
	})
}

func TestPruneJobs(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		base := ms(e.clock.Now())
		tests := []struct {
			name      string
			keep      int
			olderThan time.Time
			wantLeft  []string // names of the jobs left
		}{
			{"no limits prune nothing", 0, time.Time{}, []string{"q", "r", "f0", "f1", "f2", "f3", "f4", "f5"}},
			{"keep the newest 2 finished", 2, time.Time{}, []string{"q", "r", "f4", "f5"}},
			{"keep more than there are", 100, time.Time{}, []string{"q", "r", "f0", "f1", "f2", "f3", "f4", "f5"}},
			{"finished before a time", 0, base.Add(3 * time.Hour), []string{"q", "r", "f3", "f4", "f5"}},
			{"both limits", 4, base.Add(3 * time.Hour), []string{"q", "r", "f3", "f4", "f5"}},
			{"both limits, count the stricter", 1, base.Add(3 * time.Hour), []string{"q", "r", "f5"}},
			{"a negative keep is no count limit", -1, time.Time{}, []string{"q", "r", "f0", "f1", "f2", "f3", "f4", "f5"}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				c := (&env{backend: e.backend, driver: e.driver, dsn: freshDSN(t, e), clock: e.clock}).open(t)
				col := mustCreate(t, c, "history", 0)
				names := map[string]string{}
				insert := func(name string, j catalog.Job) {
					j.ID, j.CollectionID, j.Trigger = uuid.NewString(), col.ID, catalog.TriggerScheduled
					if err := c.InsertJob(ctx, j); err != nil {
						t.Fatal(err)
					}
					names[j.ID] = name
				}
				// Queued and running jobs are older than every finished one.
				insert("q", catalog.Job{State: catalog.JobQueued, CreatedAt: base.Add(-time.Hour)})
				insert("r", catalog.Job{State: catalog.JobRunning, CreatedAt: base.Add(-time.Hour), StartedAt: base})
				for i := range 6 {
					at := base.Add(time.Duration(i) * time.Hour)
					insert(fmt.Sprintf("f%d", i), catalog.Job{State: []catalog.JobState{catalog.JobSucceeded, catalog.JobFailed, catalog.JobCancelled}[i%3],
						CreatedAt: at, FinishedAt: at.Add(time.Minute)})
				}
				n, err := c.PruneJobs(ctx, tt.keep, tt.olderThan)
				if err != nil {
					t.Fatal(err)
				}
				left, err := c.ListJobs(ctx, catalog.JobFilter{})
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, j := range left {
					got = append(got, names[j.ID])
				}
				slices.Sort(got)
				slices.Sort(tt.wantLeft)
				if n != 8-len(left) {
					t.Errorf("PruneJobs returned %d, but %d jobs are gone", n, 8-len(left))
				}
				equal(t, "jobs left", got, tt.wantLeft)
			})
		}
	})
}

// freshDSN returns a new database for a subtest on e's backend.
func freshDSN(t *testing.T, e *env) string {
	if e.driver == "sqlite" {
		return t.TempDir() + "/catalog.db"
	}
	return postgresSchema(t, postgresBase())
}

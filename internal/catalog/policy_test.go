package catalog_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/compactorhq/compactor/internal/catalog"
)

func ptr[T any](v T) *T { return &v }

func TestUpdateCollectionPolicyStoresChangesAndClears(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		c := e.open(t)
		col := mustCreate(t, c, "policy", 0)
		if got := mustGet(t, c, col.ID).Policy; got.Priority != catalog.PriorityNormal || got.Windows != nil || got.HasObjective() {
			t.Fatalf("a new collection's policy is %+v; want normal, no windows, no objective", got)
		}
		got, err := c.UpdateCollectionPolicy(ctx, col.ID, catalog.PolicyUpdate{
			Priority: ptr(catalog.PriorityLow), Windows: &[]string{"Mon-Fri 01:00-05:00 Europe/Berlin", "Sat 00:00-24:00"},
			ObjectiveMaxAge: ptr(10 * time.Minute), ObjectiveMaxBacklog: ptr(int64(50_000)), ThroughputShare: ptr(0.25),
		})
		if err != nil {
			t.Fatal(err)
		}
		want := catalog.CollectionPolicy{Priority: catalog.PriorityLow, Windows: []string{"Mon-Fri 01:00-05:00 Europe/Berlin", "Sat 00:00-24:00"},
			ObjectiveMaxAge: 10 * time.Minute, ObjectiveMaxBacklog: 50_000, ThroughputShare: 0.25}
		for what, p := range map[string]catalog.CollectionPolicy{"returned": got.Policy, "read back": mustGet(t, c, col.ID).Policy} {
			if p.Priority != want.Priority || !slices.Equal(p.Windows, want.Windows) || p.ObjectiveMaxAge != want.ObjectiveMaxAge || p.ObjectiveMaxBacklog != want.ObjectiveMaxBacklog || p.ThroughputShare != want.ThroughputShare {
				t.Errorf("%s policy %+v; want %+v", what, p, want)
			}
		}
		// Only the fields given change; zero values clear.
		got, err = c.UpdateCollectionPolicy(ctx, col.ID, catalog.PolicyUpdate{Windows: &[]string{}, ObjectiveMaxAge: ptr(time.Duration(0)), ThroughputShare: ptr(0.0)})
		if err != nil {
			t.Fatal(err)
		}
		if p := got.Policy; p.Priority != catalog.PriorityLow || p.Windows != nil || p.ObjectiveMaxAge != 0 || p.ObjectiveMaxBacklog != 50_000 || p.ThroughputShare != 0 {
			t.Errorf("after clearing windows and the age objective: %+v", p)
		}
		for name, bad := range map[string]catalog.PolicyUpdate{
			"unknown class":       {Priority: ptr(catalog.PriorityClass(7))},
			"negative backlog":    {ObjectiveMaxBacklog: ptr(int64(-1))},
			"age under a second":  {ObjectiveMaxAge: ptr(time.Millisecond)},
			"window with newline": {Windows: &[]string{"01:00-02:00\n03:00-04:00"}},
			"too many windows":    {Windows: ptr(slices.Repeat([]string{"01:00-02:00"}, 17))},
			"share over one":      {ThroughputShare: ptr(1.5)},
			"negative share":      {ThroughputShare: ptr(-0.1)},
		} {
			_, err := c.UpdateCollectionPolicy(ctx, col.ID, bad)
			wantErr(t, name, err, catalog.ErrInvalidArgument)
		}
		_, err = c.UpdateCollectionPolicy(ctx, "no-such-collection", catalog.PolicyUpdate{Priority: ptr(catalog.PriorityLow)})
		wantErr(t, "unknown collection", err, catalog.ErrNotFound)
	})
}

func TestClaimOrderIsOneOffsThenPriorityThenFreshnessDebt(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		c := e.open(t)
		now := ms(e.clock.Now())
		mk := func(name string, p catalog.PriorityClass, u catalog.PolicyUpdate) catalog.Collection {
			col := mustCreate(t, c, name, 0)
			u.Priority = &p
			if _, err := c.UpdateCollectionPolicy(ctx, col.ID, u); err != nil {
				t.Fatal(err)
			}
			return col
		}
		low := mk("low", catalog.PriorityLow, catalog.PolicyUpdate{})
		lowOneOff := mk("low-one-off", catalog.PriorityLow, catalog.PolicyUpdate{})
		normalOld := mk("normal-old", catalog.PriorityNormal, catalog.PolicyUpdate{})
		// 3 of 4 records of its backlog objective: a debt of 0.75.
		normalAtRisk := mk("normal-at-risk", catalog.PriorityNormal, catalog.PolicyUpdate{ObjectiveMaxBacklog: ptr(int64(4))})
		mustAppend(t, c, normalAtRisk.ID, adds("r", 3, 2))
		// Its oldest record is 9 of the 10 minutes of its objective old.
		normalAged := mk("normal-aged", catalog.PriorityNormal, catalog.PolicyUpdate{ObjectiveMaxAge: ptr(10 * time.Minute)})
		critical := mk("critical", catalog.PriorityCritical, catalog.PolicyUpdate{})

		sched := func(col catalog.Collection, oldest time.Time) catalog.Job {
			j, _ := mustEnqueue(t, c, catalog.JobRequest{CollectionID: col.ID, Trigger: catalog.TriggerScheduled, OldestAt: oldest})
			return j
		}
		jLow := sched(low, now.Add(-time.Hour))
		jNormalOld := sched(normalOld, now.Add(-30*time.Minute))
		jAtRisk := sched(normalAtRisk, now.Add(-time.Minute))
		jAged := sched(normalAged, now.Add(-9*time.Minute))
		jCritical := sched(critical, now)
		jOneOff, _ := mustEnqueue(t, c, catalog.JobRequest{CollectionID: lowOneOff.ID, Trigger: catalog.TriggerOneOff})

		want := []string{jOneOff.ID, jCritical.ID, jAged.ID, jAtRisk.ID, jNormalOld.ID, jLow.ID}
		names := map[string]string{jOneOff.ID: "one-off", jCritical.ID: "critical", jAged.ID: "normal, debt 0.9",
			jAtRisk.ID: "normal, debt 0.75", jNormalOld.ID: "normal, oldest", jLow.ID: "low"}
		nameAll := func(jobs []catalog.Job) []string {
			var out []string
			for _, j := range jobs {
				out = append(out, names[j.ID])
			}
			return out
		}
		queue, err := c.ListQueue(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		wantNames := nameAll(func() []catalog.Job {
			var js []catalog.Job
			for _, id := range want {
				js = append(js, catalog.Job{ID: id})
			}
			return js
		}())
		if got := nameAll(queue); !slices.Equal(got, wantNames) {
			t.Errorf("ListQueue order %q; want %q", got, wantNames)
		}
		var claimed []catalog.Job
		for range want {
			claimed = append(claimed, mustClaim(t, c, "n1"))
		}
		if got := nameAll(claimed); !slices.Equal(got, wantNames) {
			t.Errorf("claim order %q; want %q", got, wantNames)
		}
	})
}

func TestClaimHonoursTheStartBoundsOfScheduledJobsOnly(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		c := e.open(t)
		now := ms(e.clock.Now())
		col := mustCreate(t, c, "windowed", 0)
		j, _ := mustEnqueue(t, c, catalog.JobRequest{CollectionID: col.ID, Trigger: catalog.TriggerScheduled,
			StartAfter: now.Add(time.Hour), StartBefore: now.Add(2 * time.Hour)})
		if !j.StartAfter.Equal(now.Add(time.Hour)) || !j.StartBefore.Equal(now.Add(2*time.Hour)) {
			t.Fatalf("job bounds %v..%v", j.StartAfter, j.StartBefore)
		}
		_, err := c.ClaimJob(ctx, "n1", lease)
		wantErr(t, "ClaimJob before the window", err, catalog.ErrNoJob)
		e.clock.Advance(2 * time.Hour)
		_, err = c.ClaimJob(ctx, "n1", lease)
		wantErr(t, "ClaimJob after the window", err, catalog.ErrNoJob)

		// The scheduler moves it to the next window.
		if ok, err := c.RescheduleJob(ctx, j.ID, now.Add(3*time.Hour), now.Add(4*time.Hour)); err != nil || !ok {
			t.Fatalf("RescheduleJob: %v, %v", ok, err)
		}
		e.clock.Advance(time.Hour)
		if got := mustClaim(t, c, "n1"); got.ID != j.ID {
			t.Fatalf("claimed %s in the next window; want %s", got.ID, j.ID)
		}
		if ok, err := c.RescheduleJob(ctx, j.ID, time.Time{}, time.Time{}); err != nil || ok {
			t.Errorf("RescheduleJob of a running job: %v, %v; want false", ok, err)
		}

		// An operator's request runs whatever the window.
		other := mustCreate(t, c, "windowed-one-off", 0)
		mustEnqueue(t, c, catalog.JobRequest{CollectionID: other.ID, Trigger: catalog.TriggerScheduled, StartAfter: now.Add(10 * time.Hour)})
		expedited, _ := mustEnqueue(t, c, catalog.JobRequest{CollectionID: other.ID, Trigger: catalog.TriggerOneOff})
		if got := mustClaim(t, c, "n1"); got.ID != expedited.ID {
			t.Errorf("claimed %s; want the expedited job %s outside its window", got.ID, expedited.ID)
		}
	})
}

// TestLowPriorityWaitsAtMostTheAgingBound runs the queue on a fake clock
// under constant higher-priority load: three critical collections whose
// next job is queued as soon as the previous one ends, one worker, jobs of
// one minute. The low collection's job is claimed within the documented
// bound, 3·aging + ⌈(Q−1)/W⌉·D; without aging it starves.
func TestLowPriorityWaitsAtMostTheAgingBound(t *testing.T) {
	const (
		aging    = 5 * time.Minute
		duration = time.Minute // D, every job
		workers  = 1           // W
		critical = 3           // the other collections with a queued job
	)
	bound := 3*aging + time.Duration((critical+workers-1)/workers)*duration
	run := func(t *testing.T, e *env, steps int) (waited time.Duration, claimed bool) {
		c := e.open(t)
		var crit []catalog.Collection
		for i := range critical {
			col := mustCreate(t, c, fmt.Sprint("critical-", i), 0)
			if _, err := c.UpdateCollectionPolicy(ctx, col.ID, catalog.PolicyUpdate{Priority: ptr(catalog.PriorityCritical)}); err != nil {
				t.Fatal(err)
			}
			crit = append(crit, col)
		}
		low := mustCreate(t, c, "low", 0)
		if _, err := c.UpdateCollectionPolicy(ctx, low.ID, catalog.PolicyUpdate{Priority: ptr(catalog.PriorityLow)}); err != nil {
			t.Fatal(err)
		}
		t0 := ms(e.clock.Now())
		for _, col := range crit {
			mustEnqueue(t, c, catalog.JobRequest{CollectionID: col.ID, Trigger: catalog.TriggerScheduled, OldestAt: t0})
		}
		mustEnqueue(t, c, catalog.JobRequest{CollectionID: low.ID, Trigger: catalog.TriggerScheduled, OldestAt: t0})
		for range steps {
			j, err := c.ClaimJob(ctx, "n1", time.Hour) // outlives the job
			if err != nil {
				t.Fatal(err)
			}
			if j.CollectionID == low.ID {
				return j.StartedAt.Sub(t0), true
			}
			e.clock.Advance(duration)
			j.State, j.FinishedAt = catalog.JobSucceeded, ms(e.clock.Now())
			if err := c.FinishJob(ctx, "n1", j); err != nil {
				t.Fatal(err)
			}
			// Constant load: the collection has records again at once.
			mustEnqueue(t, c, catalog.JobRequest{CollectionID: j.CollectionID, Trigger: catalog.TriggerScheduled, OldestAt: ms(e.clock.Now())})
		}
		return 0, false
	}
	t.Run("with aging", func(t *testing.T) {
		forEachBackend(t, func(t *testing.T, e *env) {
			e.aging = aging
			waited, claimed := run(t, e, 100)
			if !claimed || waited > bound {
				t.Fatalf("the low job was claimed %v after %s; want within %s", claimed, waited, bound)
			}
			t.Logf("the low job waited %s (bound %s)", waited, bound)
		})
	})
	t.Run("without aging it starves", func(t *testing.T) {
		forEachBackend(t, func(t *testing.T, e *env) {
			e.aging = 1000 * time.Hour
			if waited, claimed := run(t, e, 100); claimed {
				t.Fatalf("the low job was claimed after %s under constant critical load with no aging", waited)
			}
		})
	})
}

package manager_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/clock"
	"github.com/compactorhq/compactor/internal/manager"
	"github.com/compactorhq/compactor/internal/window"
)

// openClockedCatalog opens a SQLite catalog on clk.
func openClockedCatalog(t *testing.T, clk clock.Clock) *catalog.Catalog {
	t.Helper()
	c, err := catalog.Open(t.Context(), catalog.Config{DSN: filepath.Join(t.TempDir(), "catalog.db"), Exclusive: true, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func at(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func planEntry(t *testing.T, m *manager.Manager, id string) manager.PlanEntry {
	t.Helper()
	p, err := m.Plan(t.Context(), false)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range p.Entries {
		if e.Collection.ID == id {
			return e
		}
	}
	t.Fatalf("collection %s is not in the plan", id)
	return manager.PlanEntry{}
}

// TestScheduledJobsStartOnlyInsideTheirWindow moves a fake clock through
// the server's window 01:00-05:00 UTC: outside it the plan says when the
// next window opens and nothing is queued; inside it the job is queued
// bounded by the window's end; a job still queued when the window closes is
// moved to the next window, so the catalog's claim refuses it until then;
// a one-off runs whatever the window.
func TestScheduledJobsStartOnlyInsideTheirWindow(t *testing.T) {
	clk := clock.NewFake(at(t, "2026-12-01T06:00:00Z"))
	c := openClockedCatalog(t, clk)
	id := collectionWithBacklog(t, c, "windowed", 20)
	cfg := manager.DefaultConfig()
	cfg.Node, cfg.Clock, cfg.Windows = "n1", clk, []string{"01:00-05:00"}
	m, err := manager.New(c, newCommitExec(c), cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()

	e := planEntry(t, m, id)
	if e.Decision != manager.DecideOutsideWindow || !e.Window.NextStart.Equal(at(t, "2026-12-02T01:00:00Z")) ||
		!e.Window.NextEnd.Equal(at(t, "2026-12-02T05:00:00Z")) || e.Window.Own || !strings.Contains(e.Reason, "outside its compaction windows") {
		t.Fatalf("at 06:00: %s %q, window %+v; want outside the window, next 01:00-05:00", e.Decision, e.Reason, e.Window)
	}
	if err := m.Schedule(ctx); err != nil {
		t.Fatal(err)
	}
	if q, _ := c.ListQueue(ctx, 0); len(q) != 0 {
		t.Fatalf("queued %d jobs outside the window", len(q))
	}

	clk.Advance(20 * time.Hour) // 02:00 the next day
	if err := m.Schedule(ctx); err != nil {
		t.Fatal(err)
	}
	q, _ := c.ListQueue(ctx, 0)
	if len(q) != 1 || !q[0].StartBefore.Equal(at(t, "2026-12-02T05:00:00Z")) || !q[0].StartAfter.IsZero() {
		t.Fatalf("inside the window: queue %+v; want one job bounded by 05:00", q)
	}

	clk.Advance(3*time.Hour + 30*time.Minute) // 05:30: closed, the job unclaimed
	if _, err := c.ClaimJob(ctx, "n1", time.Minute); !errors.Is(err, catalog.ErrNoJob) {
		t.Fatalf("ClaimJob after the window closed: %v; want ErrNoJob", err)
	}
	if err := m.Schedule(ctx); err != nil {
		t.Fatal(err)
	}
	q, _ = c.ListQueue(ctx, 0)
	if len(q) != 1 || !q[0].StartAfter.Equal(at(t, "2026-12-03T01:00:00Z")) || !q[0].StartBefore.Equal(at(t, "2026-12-03T05:00:00Z")) {
		t.Fatalf("after the window: queue %+v; want the job moved to the next window", q)
	}

	// The operator's request runs at once.
	if _, err := m.Compact(ctx, []string{id}, false, "now"); err != nil {
		t.Fatal(err)
	}
	if j, err := c.ClaimJob(ctx, "n1", time.Minute); err != nil || j.ID != q[0].ID {
		t.Fatalf("ClaimJob after Compact: %v, %v; want the expedited job", j.ID, err)
	}

	// A collection's own windows replace the server's.
	own := collectionWithBacklog(t, c, "own-window", 20)
	if _, err := m.SetCollectionPolicy(ctx, own, catalog.PolicyUpdate{Windows: &[]string{"Thu  12:00-13:00   Europe/Berlin"}}); err != nil {
		t.Fatal(err)
	}
	e = planEntry(t, m, own)
	if !e.Window.Own || e.Window.Windows[0] != "Thu 12:00-13:00 Europe/Berlin" || !e.Window.NextStart.Equal(at(t, "2026-12-03T11:00:00Z")) {
		t.Errorf("own window: %+v; want Thursday 11:00Z", e.Window)
	}
	// Its job waits for Thursday's window; once its own windows are
	// removed it follows the server's.
	if err := m.Schedule(ctx); err != nil {
		t.Fatal(err)
	}
	if e := planEntry(t, m, own); e.Decision != manager.DecideOutsideWindow {
		t.Errorf("own window closed: %s; want outside the window", e.Decision)
	}
	clk.Advance(29*time.Hour + 30*time.Minute) // Thursday 11:00Z = 12:00 in Berlin
	if err := m.Schedule(ctx); err != nil {
		t.Fatal(err)
	}
	var ownJob catalog.Job
	if q, _ := c.ListQueue(ctx, 0); len(q) == 1 && q[0].CollectionID == own {
		ownJob = q[0]
	}
	if !ownJob.StartBefore.Equal(at(t, "2026-12-03T12:00:00Z")) {
		t.Fatalf("own window open: job %+v; want one bounded by 13:00 Berlin", ownJob)
	}
	if _, err := m.SetCollectionPolicy(ctx, own, catalog.PolicyUpdate{Windows: &[]string{}}); err != nil {
		t.Fatal(err)
	}
	if err := m.Schedule(ctx); err != nil {
		t.Fatal(err)
	}
	if j, _ := c.GetJob(ctx, ownJob.ID); !j.StartAfter.Equal(at(t, "2026-12-04T01:00:00Z")) || !j.StartBefore.Equal(at(t, "2026-12-04T05:00:00Z")) {
		t.Errorf("after its windows were removed: bounds %v..%v; want the server's next window, Friday 01:00-05:00", j.StartAfter, j.StartBefore)
	}
	_, err = m.SetCollectionPolicy(ctx, own, catalog.PolicyUpdate{Windows: &[]string{"Thu 12:00-13:00 Mars/Olympus"}})
	if !errors.Is(err, manager.ErrInvalidArgument) || !strings.Contains(err.Error(), "Mars/Olympus") {
		t.Errorf("a window with an unknown zone: %v; want ErrInvalidArgument naming the zone", err)
	}
}

// TestAJobRunningWhenItsWindowClosesFollowsTheSetting runs a scheduled job
// bounded by a window and moves the wall clock past the window's end while
// it runs: with "requeue" it stops, commits nothing and a job is queued for
// the collection's next window; with "finish" it commits.
func TestAJobRunningWhenItsWindowClosesFollowsTheSetting(t *testing.T) {
	for _, policy := range []string{manager.WindowCloseRequeue, manager.WindowCloseFinish} {
		t.Run(policy, func(t *testing.T) {
			wall := clock.Shift(clock.System(), 0)
			c := openClockedCatalog(t, wall)
			id := collectionWithBacklog(t, c, "closing", 5)
			windows := []string{"01:00-05:00"}
			if _, err := c.UpdateCollectionPolicy(t.Context(), id, catalog.PolicyUpdate{Windows: &windows}); err != nil {
				t.Fatal(err)
			}
			exec := newCommitExec(c)
			release := make(chan struct{})
			exec.hold[id] = release
			store := observed{Store: c, expired: make(chan struct{}, 1), renewed: make(chan struct{}, 1)}
			r := startReplica(t, store, exec, "n1", func(cfg *manager.Config) {
				cfg.RenewInterval, cfg.Clock, cfg.WindowClose = 20*time.Millisecond, wall, policy
			})
			j, _, err := c.EnqueueJob(t.Context(), catalog.JobRequest{CollectionID: id, Trigger: catalog.TriggerScheduled,
				StartBefore: wall.Now().Add(time.Hour)})
			if err != nil {
				t.Fatal(err)
			}
			<-exec.started
			// Watch from now on: the job queued again for the next window
			// is published as it is queued (the end itself may be seen
			// earlier, through the catalog).
			wctx, wcancel := context.WithCancel(t.Context())
			defer wcancel()
			sub, _, err := r.m.Watch(wctx)
			if err != nil {
				t.Fatal(err)
			}
			wall.Step(2 * time.Hour)
			if policy == manager.WindowCloseFinish {
				waitFor(store.renewed, 2) // renewals after the step: the keeper has looked
				close(release)
			}
			got := waitJob(t, r.m, j.ID)
			if policy == manager.WindowCloseFinish {
				if got.State != catalog.JobSucceeded || got.VersionAfter != 1 {
					t.Fatalf("with finish: %s, version %d; want SUCCEEDED at version 1", got.State, got.VersionAfter)
				}
				return
			}
			if got.State != catalog.JobCancelled || got.Note != manager.NoteWindowClosed || got.VersionAfter != got.VersionBefore {
				t.Fatalf("with requeue: %s %q, versions %d -> %d; want CANCELLED %q, nothing committed",
					got.State, got.Note, got.VersionBefore, got.VersionAfter, manager.NoteWindowClosed)
			}
			for ev := range sub.Events() {
				if ev.Job.CollectionID == id && ev.Job.ID != j.ID && ev.Job.State == catalog.JobQueued {
					break
				}
			}
			set, _ := window.ParseSet(windows)
			q, err := c.ListQueue(t.Context(), 0)
			if err != nil || len(q) != 1 || q[0].Trigger != catalog.TriggerScheduled {
				t.Fatalf("queue after the stop: %+v, %v; want one scheduled job", q, err)
			}
			start, end, _ := set.Next(q[0].CreatedAt)
			if open := !start.After(q[0].CreatedAt); open {
				start = time.Time{}
			}
			if !q[0].StartAfter.Equal(start.Truncate(time.Millisecond)) || !q[0].StartBefore.Equal(end) {
				t.Errorf("the job queued again is bounded %v..%v; want the next window %v..%v", q[0].StartAfter, q[0].StartBefore, start, end)
			}
		})
	}
}

// TestFreshnessObjectivesOrderThePlanAndAreExported: a plan ranks the
// collections it would compact by priority class, then freshness debt; the
// gauges carry each objective, value and debt of the collections with an
// objective, and count those at risk.
func TestFreshnessObjectivesOrderThePlanAndAreExported(t *testing.T) {
	clk := clock.NewFake(at(t, "2026-12-01T06:00:00Z"))
	c := openClockedCatalog(t, clk)
	collectionWithBacklog(t, c, "plain", 20)
	clk.Advance(time.Minute)
	risky := collectionWithBacklog(t, c, "risky", 45) // 45 of 50 records: debt 0.9
	crit := collectionWithBacklog(t, c, "crit", 20)
	ctx := t.Context()
	reg := prometheus.NewPedanticRegistry()
	cfg := manager.DefaultConfig()
	cfg.Node, cfg.Clock = "n1", clk
	m, err := manager.New(c, newCommitExec(c), cfg, reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.SetCollectionPolicy(ctx, risky, catalog.PolicyUpdate{ObjectiveMaxBacklog: ptr(int64(50)), ObjectiveMaxAge: ptr(10 * time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.SetCollectionPolicy(ctx, crit, catalog.PolicyUpdate{Priority: ptr(catalog.PriorityCritical)}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(2 * time.Minute)
	p, err := m.Plan(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, e := range p.Entries {
		order = append(order, e.Collection.Name)
	}
	if want := "crit risky plain"; strings.Join(order, " ") != want {
		t.Errorf("plan order %q; want %q (critical, then the debt, then the oldest backlog)", order, want)
	}
	if err := m.Schedule(ctx); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP compactor_collections_at_risk Collections whose freshness debt is at least 0.8 (at risk of breaking, or breaking, an objective), as of the last scheduler run.
# TYPE compactor_collections_at_risk gauge
compactor_collections_at_risk 1
# HELP compactor_freshness_backlog_records A collection's uncompacted backlog, as of the last scheduler run. Only collections with an objective.
# TYPE compactor_freshness_backlog_records gauge
compactor_freshness_backlog_records{collection="risky"} 45
# HELP compactor_freshness_debt_ratio The larger of age over its objective and backlog over its objective: 1 and more breaks the objective. Only collections with an objective.
# TYPE compactor_freshness_debt_ratio gauge
compactor_freshness_debt_ratio{collection="risky"} 0.9
# HELP compactor_freshness_objective_age_seconds A collection's objective for the age of its oldest uncompacted record; 0: none. Only collections with an objective.
# TYPE compactor_freshness_objective_age_seconds gauge
compactor_freshness_objective_age_seconds{collection="risky"} 600
# HELP compactor_freshness_objective_breached 1 while a collection breaks a freshness objective, 0 otherwise (the SLI of the burn-rate alerts). Only collections with an objective.
# TYPE compactor_freshness_objective_breached gauge
compactor_freshness_objective_breached{collection="risky"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "compactor_collections_at_risk", "compactor_freshness_backlog_records",
		"compactor_freshness_debt_ratio", "compactor_freshness_objective_age_seconds", "compactor_freshness_objective_breached"); err != nil {
		t.Error(err)
	}
	if _, err := testutil.GatherAndLint(reg); err != nil {
		t.Error(err)
	}
	// Without the objective, its series go.
	if _, err := m.SetCollectionPolicy(ctx, risky, catalog.PolicyUpdate{ObjectiveMaxBacklog: ptr(int64(0)), ObjectiveMaxAge: ptr(time.Duration(0))}); err != nil {
		t.Fatal(err)
	}
	if err := m.Schedule(ctx); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(reg, "compactor_freshness_debt_ratio"); n != 0 {
		t.Errorf("%d debt series after the objective was removed; want 0", n)
	}
}

func ptr[T any](v T) *T { return &v }

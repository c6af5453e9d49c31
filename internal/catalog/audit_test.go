package catalog_test

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"sync"
	"testing"
	"time"

	"github.com/compactorhq/compactor/internal/audit"
	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/jobtype"
)

var alice = audit.Actor{Name: "alice", Role: "operator", Source: "10.0.0.7:51234"}

// auditActions runs every operator action the catalog audits, under ctx
// carrying alice, and returns the collection acted on (deleted at the end)
// and the job queued.
func auditActions(t *testing.T, c *catalog.Catalog) (collID, jobID string) {
	t.Helper()
	actx := audit.WithActor(ctx, alice)
	col, err := c.CreateCollectionSpec(actx, catalog.CollectionSpec{Name: "audited", Dimension: 2})
	if err != nil {
		t.Fatal(err)
	}
	outs, err := c.EnqueueJobs(ctx, []catalog.EnqueueCall{{Actor: &alice, Requests: []catalog.JobRequest{
		{CollectionID: col.ID, Trigger: catalog.TriggerOneOff, Reason: "before the upgrade", TriggeredBy: alice.Name},
	}}})
	if err != nil || outs[0].Err != nil {
		t.Fatalf("enqueue: %v %v", err, outs)
	}
	jobID = outs[0].Jobs[0].Job.ID
	if _, err := c.CancelJob(actx, jobID, "cancelled by operator"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SetCollectionPause(actx, col.ID, true, "maintenance", "alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SetCollectionPause(actx, col.ID, false, "", "alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SetCollectionSettings(actx, col.ID, catalog.CollectionSettings{MinCompactionSize: 50}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutSetting(actx, catalog.Setting{Name: catalog.SettingMaxThroughput, Value: "1048576", UpdatedBy: "alice"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutSetting(actx, catalog.Setting{Name: catalog.SettingSchedulerPaused, Value: "true", Reason: "incident", UpdatedBy: "alice"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteCollection(actx, col.ID); err != nil {
		t.Fatal(err)
	}
	return col.ID, jobID
}

// TestAuditEventsOfOperatorActions: every operator action under an actor
// appends one event with the actor, the action, the target, the reason, the
// state before and after and the job; the chain verifies; the same actions
// without an actor append nothing.
func TestAuditEventsOfOperatorActions(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		c := e.open(t)
		collID, jobID := auditActions(t, c)
		events, err := c.ListAuditEvents(ctx, catalog.AuditFilter{})
		if err != nil {
			t.Fatal(err)
		}
		want := []struct{ action, target, job, reason, before, after string }{
			{audit.ActionCreateCollection, collID, "", "", "", `"name":"audited"`},
			{audit.ActionCompact, collID, jobID, "before the upgrade", "", `"created":true`},
			{audit.ActionCancel, jobID, jobID, "cancelled by operator", `{"state":"QUEUED"}`, `"state":"CANCELLED"`},
			{audit.ActionPause, collID, "", "maintenance", `"paused":false`, `"paused":true`},
			{audit.ActionResume, collID, "", "", `"paused":true`, `"paused":false`},
			{audit.ActionSettings, collID, "", "", `"min_compaction_size":0`, `"min_compaction_size":50`},
			{audit.ActionThrottle, audit.TargetAll, "", "", `{"compaction.max_throughput_bytes":""}`, `{"compaction.max_throughput_bytes":"1048576"}`},
			{audit.ActionPause, audit.TargetAll, "", "incident", `{"scheduler.paused":""}`, `{"scheduler.paused":"true"}`},
			{audit.ActionDeleteCollection, collID, "", "", `"name":"audited"`, ""},
		}
		if len(events) != len(want) {
			t.Fatalf("%d events, want %d: %+v", len(events), len(want), events)
		}
		for i, w := range want {
			ev := events[i]
			if ev.ID != int64(i+1) || ev.Action != w.action || ev.Target != w.target || ev.JobID != w.job || ev.Reason != w.reason ||
				!strings.Contains(ev.Before, w.before) || !strings.Contains(ev.After, w.after) || (w.after == "" && ev.After != "") {
				t.Errorf("event %d = %+v, want %+v", i+1, ev, w)
			}
			if ev.Principal != "alice" || ev.Role != "operator" || ev.Source != alice.Source || !ev.Time.Equal(e.clock.Now().Truncate(time.Millisecond)) {
				t.Errorf("event %d: who/when %q %q %q %v", i+1, ev.Principal, ev.Role, ev.Source, ev.Time)
			}
		}
		if got, err := c.ListAuditEvents(ctx, catalog.AuditFilter{CollectionID: collID}); err != nil || len(got) != 7 {
			t.Errorf("events of the collection: %d, %v; want 7 (all but the two on every collection)", len(got), err)
		}
		if got, err := c.ListAuditEvents(ctx, catalog.AuditFilter{AfterID: 7, Limit: 1}); err != nil || len(got) != 1 || got[0].ID != 8 {
			t.Errorf("a page after event 7: %+v, %v", got, err)
		}
		if got, err := c.ListAuditEvents(ctx, catalog.AuditFilter{Since: e.clock.Now().Add(time.Second)}); err != nil || len(got) != 0 {
			t.Errorf("events since a second from now: %+v, %v", got, err)
		}
		v, err := c.VerifyAuditChain(ctx)
		if err != nil || v.Broken != nil || v.Events != 9 || v.LastID != 9 || v.LastHash != audit.Hex(events[8].Hash) {
			t.Fatalf("verify: %+v, %v", v, err)
		}

		// The same actions without an actor: no event.
		col := mustCreate(t, c, "quiet", 2)
		if _, err := c.SetCollectionPause(ctx, col.ID, true, "", ""); err != nil {
			t.Fatal(err)
		}
		if _, err := c.EnqueueJobs(ctx, []catalog.EnqueueCall{{Requests: []catalog.JobRequest{{CollectionID: col.ID, Trigger: catalog.TriggerScheduled}}}}); err != nil {
			t.Fatal(err)
		}
		if got, _ := c.ListAuditEvents(ctx, catalog.AuditFilter{}); len(got) != 9 {
			t.Errorf("%d events after actions without an actor, want 9", len(got))
		}
	})
}

// TestAuditEventRollsBackWithItsAction: an action that fails writes no
// event (the event is in the action's transaction).
func TestAuditEventRollsBackWithItsAction(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		c := e.open(t)
		actx := audit.WithActor(ctx, alice)
		col := mustCreate(t, c, "a", 2)
		if _, err := c.CreateCollectionSpec(actx, catalog.CollectionSpec{Name: "a", Dimension: 2}); !errors.Is(err, catalog.ErrAlreadyExists) {
			t.Fatalf("create a taken name: %v", err)
		}
		if _, err := c.SetCollectionPause(actx, "00000000-0000-0000-0000-000000000000", true, "", ""); !errors.Is(err, catalog.ErrNotFound) {
			t.Fatalf("pause an unknown collection: %v", err)
		}
		job, _, err := c.EnqueueJob(ctx, catalog.JobRequest{CollectionID: col.ID, Trigger: catalog.TriggerOneOff})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.CancelJob(ctx, job.ID, "x"); err != nil {
			t.Fatal(err)
		}
		if _, err := c.CancelJob(actx, job.ID, "again"); !errors.Is(err, catalog.ErrJobFinished) {
			t.Fatalf("cancel a finished job: %v", err)
		}
		if got, err := c.ListAuditEvents(ctx, catalog.AuditFilter{}); err != nil || len(got) != 0 {
			t.Fatalf("events of failed actions: %+v, %v", got, err)
		}
	})
}

// TestAuditVerifyFindsTampering: an edited field, an edited hash, a
// deleted event in the middle, the deleted last event and a rewritten head
// each break the chain at the event concerned, and verify says what
// differs.
func TestAuditVerifyFindsTampering(t *testing.T) {
	for _, tt := range []struct {
		name    string
		sql     string
		eventID int64
		problem string
	}{
		{"an edited reason", `UPDATE audit_events SET reason = 'nothing to see' WHERE id = 2`, 2, "the event was edited"},
		{"an edited principal", `UPDATE audit_events SET principal = 'mallory' WHERE id = 5`, 5, "the event was edited"},
		{"an edited hash", `UPDATE audit_events SET hash = '` + strings.Repeat("ab", 32) + `' WHERE id = 3`, 3, "the event was edited"},
		{"a deleted event", `DELETE FROM audit_events WHERE id = 4`, 4, "missing: the next event is 5"},
		{"the first event deleted", `DELETE FROM audit_events WHERE id = 1`, 1, "missing: the next event is 2"},
		{"the last event deleted", `DELETE FROM audit_events WHERE id = 9`, 9, "the chain's head names event 9"},
		{"the head rewritten", `UPDATE audit_head SET last_hash = '` + strings.Repeat("0", 64) + `'`, 9, "the chain's head holds hash"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			forEachBackend(t, func(t *testing.T, e *env) {
				c := e.open(t)
				auditActions(t, c)
				if v, err := c.VerifyAuditChain(ctx); err != nil || v.Broken != nil {
					t.Fatalf("before tampering: %+v, %v", v, err)
				}
				if _, err := rawDB(t, e).ExecContext(ctx, tt.sql); err != nil {
					t.Fatal(err)
				}
				v, err := c.VerifyAuditChain(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if v.Broken == nil || v.Broken.EventID != tt.eventID || !strings.Contains(v.Broken.Problem, tt.problem) {
					t.Fatalf("verify after %s: %+v, want event %d: …%s…", tt.sql, v.Broken, tt.eventID, tt.problem)
				}
				if !errors.Is(v.Broken, catalog.ErrAuditChainBroken) {
					t.Errorf("%v does not match ErrAuditChainBroken", v.Broken)
				}
			})
		})
	}
}

// TestAuditConcurrentAppendsKeepOneChain: actions of many concurrent
// callers (on PostgreSQL, concurrent transactions) append one chain: ids
// 1..n without gaps, each chained to the one before.
func TestAuditConcurrentAppendsKeepOneChain(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		c := e.open(t)
		const n = 24
		cols := make([]catalog.Collection, n)
		for i := range cols {
			cols[i] = mustCreate(t, c, fmt.Sprintf("c%d", i), 2)
		}
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				actx := audit.WithActor(context.Background(), audit.Actor{Name: fmt.Sprintf("op%d", i), Role: "operator"})
				_, err := c.SetCollectionPause(actx, cols[i].ID, true, "", "")
				if err == nil && i%2 == 0 {
					_, err = c.PutSetting(actx, catalog.Setting{Name: catalog.SettingMaxThroughput, Value: fmt.Sprint(i + 1)})
				}
				errs <- err
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		v, err := c.VerifyAuditChain(ctx)
		if err != nil || v.Broken != nil || v.Events != n+n/2 {
			t.Fatalf("verify: %+v, %v; want %d events", v, err, n+n/2)
		}
	})
}

// TestJobTriggeredByIsKept: a job keeps who asked for it, and so does the
// follow-up of an interrupted one.
func TestJobTriggeredByIsKept(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		c := e.open(t)
		col := mustCreate(t, c, "a", 2)
		job, _, err := c.EnqueueJob(ctx, catalog.JobRequest{CollectionID: col.ID, Trigger: catalog.TriggerOneOff, TriggeredBy: "alice"})
		if err != nil {
			t.Fatal(err)
		}
		if got, err := c.GetJob(ctx, job.ID); err != nil || got.TriggeredBy != "alice" || job.TriggeredBy != "alice" {
			t.Fatalf("job: %q (returned %q), %v", got.TriggeredBy, job.TriggeredBy, err)
		}
		if _, err := c.ClaimJob(ctx, "n1", time.Minute); err != nil {
			t.Fatal(err)
		}
		if _, err := c.ReleaseNode(ctx, "n1"); err != nil {
			t.Fatal(err)
		}
		queued, err := c.ListJobs(ctx, catalog.JobFilter{States: []catalog.JobState{catalog.JobQueued}})
		if err != nil || len(queued) != 1 || queued[0].TriggeredBy != "alice" || queued[0].Continues != job.ID {
			t.Fatalf("follow-up: %+v, %v", queued, err)
		}
	})
}

// TestAuditNamesJobsOfOtherKindsByKind: a verify job queued by an operator
// is audited as "verify", with its job.
func TestAuditNamesJobsOfOtherKindsByKind(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		c := e.open(t)
		col := mustCreate(t, c, "v", 2)
		outs, err := c.EnqueueJobs(ctx, []catalog.EnqueueCall{{Actor: &alice, Requests: []catalog.JobRequest{
			{CollectionID: col.ID, Kind: jobtype.KindVerify, Trigger: catalog.TriggerOneOff, TriggeredBy: alice.Name},
		}}})
		if err != nil || outs[0].Err != nil {
			t.Fatalf("enqueue: %v %v", err, outs)
		}
		events, err := c.ListAuditEvents(ctx, catalog.AuditFilter{})
		if err != nil || len(events) != 1 || events[0].Action != "verify" || events[0].JobID != outs[0].Jobs[0].Job.ID {
			t.Fatalf("events: %+v, %v", events, err)
		}
	})
}

// TestAuditEventsOfPolicyRollbackAndDeadLetterClear: a scheduling policy
// change, a rollback and a dead-letter clear by an actor each write their
// event, with the state before and after, in the action's transaction.
func TestAuditEventsOfPolicyRollbackAndDeadLetterClear(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		c := e.open(t)
		actx := audit.WithActor(ctx, alice)
		col := mustCreate(t, c, "governed", 2)
		critical := catalog.PriorityCritical
		if _, err := c.UpdateCollectionPolicy(actx, col.ID, catalog.PolicyUpdate{Priority: &critical}); err != nil {
			t.Fatal(err)
		}
		mustAppend(t, c, col.ID, adds("a", 10, 2))
		commitAt(t, c, col.ID, 1, 4)
		commitAt(t, c, col.ID, 2, 8)
		rb := catalog.Rollback{CollectionID: col.ID, BaseVersion: 2, NewVersion: 3, ToVersion: 1, FromManifestKey: "m1", ManifestKey: "m3",
			Reason: "bad compaction", By: "alice", JobID: uuid.NewString(), Node: "n1"}
		if err := c.CommitRollback(actx, rb); err != nil {
			t.Fatal(err)
		}
		rec := catalog.FailureRecord{DeadLetterAfter: 1, Build: "v1", JobID: "j1", Error: "corrupt block b1"}
		if _, dead, err := c.RecordFailureOf(ctx, col.ID, rec); err != nil || !dead {
			t.Fatalf("failure: dead %v, %v", dead, err)
		}
		if _, cleared, err := c.ClearDeadLetter(actx, col.ID, "alice", "restored b1"); err != nil || !cleared {
			t.Fatalf("ClearDeadLetter: %v, %v", cleared, err)
		}
		events, err := c.ListAuditEvents(ctx, catalog.AuditFilter{CollectionID: col.ID})
		if err != nil {
			t.Fatal(err)
		}
		want := []struct{ action, job, reason, before, after string }{
			{audit.ActionPolicy, "", "", `"Priority":`, `"Priority":`},
			{audit.ActionRollback, rb.JobID, "bad compaction", `"version":2`, `"restored_version":1`},
			{audit.ActionClearDeadLetter, "", "restored b1", `"dead_lettered":true`, `"dead_lettered":false`},
		}
		if len(events) != len(want) {
			t.Fatalf("%d events, want %d: %+v", len(events), len(want), events)
		}
		for i, w := range want {
			ev := events[i]
			if ev.Action != w.action || ev.Target != col.ID || ev.JobID != w.job || ev.Reason != w.reason ||
				!strings.Contains(ev.Before, w.before) || !strings.Contains(ev.After, w.after) || ev.Principal != "alice" {
				t.Errorf("event %d = %+v, want %+v", i+1, ev, w)
			}
		}
		if events[0].Before == events[0].After {
			t.Errorf("policy event: before %s equals after", events[0].Before)
		}
		if v, err := c.VerifyAuditChain(ctx); err != nil || v.Broken != nil {
			t.Fatalf("verify: %+v, %v", v, err)
		}
	})
}

package catalog_test

import (
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/jobtype"
)

func TestDeadLetterHistoryRecordsEveryChangeAndFoldsIntoRedriveState(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		c := e.open(t)
		col := mustCreate(t, c, "stuck", 0)
		other := mustCreate(t, c, "fine", 0)
		rec := catalog.FailureRecord{DeadLetterAfter: 2, Build: "v1", JobID: "j1", Error: "corrupt block b1"}
		if _, dead, err := c.RecordFailureOf(ctx, col.ID, rec); err != nil || dead {
			t.Fatalf("first failure: dead %v, %v", dead, err)
		}
		rec.JobID = "j2"
		if n, dead, err := c.RecordFailureOf(ctx, col.ID, rec); err != nil || !dead || n != 2 {
			t.Fatalf("second failure: (%d, %v, %v), want dead-lettered", n, dead, err)
		}
		rec.JobID = "j3"
		if _, _, err := c.RecordFailureOf(ctx, col.ID, rec); err != nil { // already dead-lettered: no second event
			t.Fatal(err)
		}
		states, err := c.DeadLetterStates(ctx)
		if err != nil || len(states) != 1 || states[0].CollectionID != col.ID || states[0].Build != "v1" || states[0].CoolOffRedriven {
			t.Fatalf("states %+v, %v", states, err)
		}

		j, created, err := c.RedriveDeadLetter(ctx, catalog.DeadLetterEvent{CollectionID: col.ID, Event: catalog.DeadLetterRedriven, Cause: catalog.RedriveCoolOff, Build: "v1"},
			catalog.JobRequest{CollectionID: col.ID, Trigger: catalog.TriggerScheduled, Reason: "re-drive"})
		if err != nil || !created || j.State != catalog.JobQueued {
			t.Fatalf("RedriveDeadLetter: %+v, %v, %v", j, created, err)
		}
		if _, created, err := c.RedriveDeadLetter(ctx, catalog.DeadLetterEvent{CollectionID: other.ID, Event: catalog.DeadLetterRedriven, Cause: catalog.RedriveUpgrade, Build: "v2"},
			catalog.JobRequest{CollectionID: other.ID, Trigger: catalog.TriggerScheduled, Reason: "re-drive"}); err != nil || created {
			t.Fatalf("re-drive of a collection not dead-lettered: created %v, %v", created, err)
		}
		if _, _, err := c.RedriveDeadLetter(ctx, catalog.DeadLetterEvent{CollectionID: col.ID, Event: catalog.DeadLetterRedriven, Cause: catalog.RedriveUpgrade, Build: "v2"},
			catalog.JobRequest{CollectionID: col.ID, Trigger: catalog.TriggerScheduled, Reason: "re-drive"}); err != nil {
			t.Fatal(err)
		}
		states, err = c.DeadLetterStates(ctx)
		if err != nil || len(states) != 1 || !states[0].CoolOffRedriven || len(states[0].RedrivenBuilds) != 1 || states[0].RedrivenBuilds[0] != "v2" {
			t.Fatalf("states after re-drives %+v, %v", states, err)
		}

		e.clock.Advance(time.Minute)
		got, cleared, err := c.ClearDeadLetter(ctx, col.ID, "ops@host", "restored b1")
		if err != nil || !cleared || got.DeadLettered() || got.FailureCount != 0 {
			t.Fatalf("ClearDeadLetter: %+v, %v, %v", got, cleared, err)
		}
		if _, cleared, err := c.ClearDeadLetter(ctx, other.ID, "ops@host", "nothing"); err != nil || cleared {
			t.Fatalf("clearing a collection not dead-lettered: %v, %v", cleared, err)
		}
		_, _, err = c.ClearDeadLetter(ctx, uuid.NewString(), "", "")
		wantErr(t, "ClearDeadLetter of an unknown collection", err, catalog.ErrNotFound)
		if err := c.RecordRecovery(ctx, col.ID, "j9", "v2"); err != nil { // cleared already: no recovery event
			t.Fatal(err)
		}
		evs, err := c.ListDeadLetterEvents(ctx, col.ID, 0)
		if err != nil {
			t.Fatal(err)
		}
		var kinds []string
		for _, ev := range evs {
			kinds = append(kinds, ev.Event+"/"+ev.Cause)
		}
		want := []string{"cleared/", "redriven/upgrade", "redriven/cool-off", "dead-lettered/"}
		if len(kinds) != len(want) {
			t.Fatalf("events newest first %v, want %v", kinds, want)
		}
		for i := range want {
			if kinds[i] != want[i] {
				t.Fatalf("events newest first %v, want %v", kinds, want)
			}
		}
		if d := evs[3]; d.JobID != "j2" || d.Build != "v1" || d.Reason != "corrupt block b1" || d.Failures != 2 {
			t.Errorf("dead-lettering event %+v", d)
		}
		if cl := evs[0]; cl.Actor != "ops@host" || cl.Reason != "restored b1" || cl.Failures != 3 {
			t.Errorf("clearing event %+v", cl)
		}
		if evs[1].JobID == "" || evs[1].Failures != 3 {
			t.Errorf("re-drive event %+v: want its job and the failure count", evs[1])
		}

		// A success after a dead-lettering is recorded once.
		rec.JobID = "j10"
		for range 2 {
			if _, _, err := c.RecordFailureOf(ctx, other.ID, rec); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.RecordSuccess(ctx, other.ID); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if err := c.RecordRecovery(ctx, other.ID, "j11", "v1"); err != nil {
				t.Fatal(err)
			}
		}
		evs, err = c.ListDeadLetterEvents(ctx, other.ID, 10)
		if err != nil || len(evs) != 2 || evs[0].Event != catalog.DeadLetterRecovered || evs[0].JobID != "j11" {
			t.Fatalf("history after a recovery %+v, %v", evs, err)
		}
		if _, err := c.DeleteCollection(ctx, other.ID); err != nil {
			t.Fatal(err)
		}
		if evs, err := c.ListDeadLetterEvents(ctx, other.ID, 10); err != nil || len(evs) != 0 {
			t.Fatalf("history of a deleted collection %+v, %v", evs, err)
		}
	})
}

func TestAJobKeepsItsPredictionActualFiguresAndFailureClass(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		c := e.open(t)
		col := mustCreate(t, c, "priced", 0)
		if _, _, err := c.EnqueueJob(ctx, catalog.JobRequest{CollectionID: col.ID, Trigger: catalog.TriggerOneOff}); err != nil {
			t.Fatal(err)
		}
		j, err := c.ClaimJob(ctx, "n1/a", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		p := jobtype.Prediction{Estimate: jobtype.Estimate{OpRecords: 10, BytesWritten: 4096, BlobPuts: 3}, Seconds: 1.5, SecondsKnown: true, Basis: "measured"}
		wantErr(t, "SetJobPrediction by another node", c.SetJobPrediction(ctx, j.ID, "n2/b", p), catalog.ErrLeaseLost)
		if err := c.SetJobPrediction(ctx, j.ID, "n1/a", p); err != nil {
			t.Fatal(err)
		}
		j.State, j.FinishedAt, j.Error = catalog.JobFailed, e.clock.Advance(time.Second), "corrupt"
		j.FailureClass, j.Actual = jobtype.FailureData, &jobtype.Actual{BlobPuts: 2, BytesRead: 100}
		if err := c.FinishJob(ctx, "n1/a", j); err != nil {
			t.Fatal(err)
		}
		got, err := c.GetJob(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.FailureClass != jobtype.FailureData || got.Predicted == nil || *got.Predicted != p || got.Actual == nil || *got.Actual != *j.Actual {
			t.Fatalf("job read back: class %q, predicted %+v, actual %+v", got.FailureClass, got.Predicted, got.Actual)
		}
	})
}

func TestAnInterruptedJobFailsAsInfrastructure(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		c := e.open(t)
		col := mustCreate(t, c, "interrupted", 0)
		if _, _, err := c.EnqueueJob(ctx, catalog.JobRequest{CollectionID: col.ID, Trigger: catalog.TriggerOneOff}); err != nil {
			t.Fatal(err)
		}
		j, err := c.ClaimJob(ctx, "n1/a", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.ReleaseNode(ctx, "n1"); err != nil {
			t.Fatal(err)
		}
		got, err := c.GetJob(ctx, j.ID)
		if err != nil || got.State != catalog.JobFailed || got.FailureClass != jobtype.FailureInfrastructure {
			t.Fatalf("interrupted job: %s, class %q, %v; want FAILED, infrastructure", got.State, got.FailureClass, err)
		}
	})
}

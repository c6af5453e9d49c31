package web_test

import (
	"strings"
	"testing"
	"time"

	"github.com/compactorhq/compactor/internal/jobtype"
	"github.com/compactorhq/compactor/web"
	"github.com/compactorhq/compactor/web/webtest"
)

func TestPlanPagePricesThePlannedJobsOnRequestWithTotals(t *testing.T) {
	e := newEnv(t, web.Config{})
	est := func(records, read, write int64, secs float64) *jobtype.Prediction {
		return &jobtype.Prediction{
			Estimate: jobtype.Estimate{OpRecords: records, BlocksTotal: 10, BlocksToRewrite: 2, BytesRead: read, BytesWritten: write,
				BlobGets: 3, BlobPuts: 4, RecordsToWrite: 2 * records, WriteAmplification: 2, VectorsToInsert: records, VectorsToDelete: 1, Indexed: true, IndexFullBuild: true, IndexFullBuildReason: "the current version has no index"},
			Seconds: secs, SecondsKnown: secs > 0, Basis: "writes at 10 MiB/s, measured over this node's last 3 jobs", Window: "now",
		}
	}
	e.src.SetPlan([]web.PlanEntry{
		{CollectionID: webtest.Orders, CollectionName: "orders", Decision: "run", Reason: "backlog", Backlog: 1200, Estimate: est(1200, 2048, 4096, 90)},
		{CollectionID: webtest.Debian, CollectionName: "debian", Decision: "run", Reason: "age", Backlog: 300, Estimate: est(300, 1024, 1024, 0)},
		{CollectionID: webtest.Hostile, CollectionName: "<b>hostile</b>", Decision: "run", Reason: "age", Backlog: 3, EstimateError: "read manifest: <boom>"},
	})
	p := e.get("/plan").page(t)
	if len(p.ByTestID("plan-priced")) != 0 || len(p.ByTestID("plan-estimate-link")) != 1 {
		t.Fatal("the plan without ?estimate=1 is priced, or has no link to price it")
	}
	p = e.get("/plan?estimate=1").page(t)
	rows := p.ByTestID("priced-row")
	if len(rows) != 3 {
		t.Fatalf("%d priced rows, want 3", len(rows))
	}
	for i, want := range []string{"1,200", "4.0 KiB", "+1,200 / −1, full rebuild", "1m30s", "now"} {
		if !strings.Contains(rows[0].Text(), want) {
			t.Errorf("priced row 0 (%d) lacks %q: %s", i, want, rows[0].Text())
		}
	}
	if !strings.Contains(rows[1].Text(), "unknown") {
		t.Errorf("a duration not measured yet is not shown unknown: %s", rows[1].Text())
	}
	if !strings.Contains(rows[2].Text(), "estimate failed: read manifest: <boom>") {
		t.Errorf("a failed estimate is not shown (escaped): %s", rows[2].Text())
	}
	total := p.One(t, "priced-total").Text()
	for _, want := range []string{"2 jobs", "1,500", "3.0 KiB", "5.0 KiB", "1m30s + 1 unknown", "+1,500 / −2"} {
		if !strings.Contains(total, want) {
			t.Errorf("totals lack %q: %s", want, total)
		}
	}
	if got := p.One(t, "plan-basis").Text(); !strings.Contains(got, "measured over this node's last 3 jobs") {
		t.Errorf("basis %q", got)
	}
}

func TestJobPageShowsPredictedBesideActualWithTheError(t *testing.T) {
	e := newEnv(t, web.Config{})
	start := time.Date(2026, 11, 30, 11, 0, 0, 0, time.UTC)
	j := web.Job{
		ID: "b0000001-0000-4000-8000-000000000000", CollectionID: webtest.Orders, CollectionName: "orders", Trigger: web.TriggerScheduled,
		State: web.StateSucceeded, Attempt: 1, CreatedAt: start, StartedAt: start, FinishedAt: start.Add(2 * time.Minute),
		RecordsRead: 1000, RecordsWritten: 1100, BytesWritten: 1 << 20, VersionBefore: 1, VersionAfter: 2,
		Predicted: &jobtype.Prediction{Estimate: jobtype.Estimate{OpRecords: 1000, RecordsToWrite: 1000, BytesWritten: 1 << 20, BlobPuts: 10, BlobGets: 4},
			Seconds: 100, SecondsKnown: true, Basis: "writes at 1 MiB/s"},
		Actual: &jobtype.Actual{BlobPuts: 12, BlobGets: 4},
	}
	e.src.SetJobs([]web.Job{j})
	p := e.get("/jobs/" + j.ID).page(t)
	got := map[string]string{}
	for _, r := range p.ByTestID("prediction-row") {
		got[r.Attrs["data-figure"]] = r.Text()
	}
	for fig, want := range map[string]string{
		"duration":        "Duration1m40s2m+20 %",
		"records":         "Operation records read1,0001,000+0 %",
		"records_written": "Records written1,0001,100+10 %",
		"blob_puts":       "Blob PUTs1012+20 %",
		"blob_gets":       "Blob GETs44+0 %",
	} {
		if strings.ReplaceAll(got[fig], " ", "") != strings.ReplaceAll(want, " ", "") {
			t.Errorf("row %s: %q, want %q", fig, got[fig], want)
		}
	}
	running := j
	running.ID, running.State, running.FinishedAt, running.Actual = "b0000002-0000-4000-8000-000000000000", web.StateRunning, time.Time{}, nil
	e.src.SetJobs([]web.Job{running})
	p = e.get("/jobs/" + running.ID).page(t)
	for _, r := range p.ByTestID("prediction-row") {
		if !strings.HasSuffix(strings.TrimSpace(r.Text()), "——") && !strings.Contains(r.Text(), "—") {
			t.Errorf("a running job shows an actual figure: %s", r.Text())
		}
	}
}

func TestCollectionPageShowsItsDeadLetterHistory(t *testing.T) {
	e := newEnv(t, web.Config{})
	at := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	e.src.SetDeadLetterHistory(webtest.Orders, []web.DeadLetterEvent{
		{At: at.Add(2 * time.Hour), Event: "cleared", Actor: "ops@host", Reason: "<fixed> the block"},
		{At: at.Add(time.Hour), Event: "redriven", Cause: "cool-off", Build: "v1.2.0", JobID: "c0000001-0000-4000-8000-000000000000", Failures: 5},
		{At: at, Event: "dead-lettered", Build: "v1.2.0", Failures: 5, Reason: "corrupt block"},
	})
	p := e.get("/collections/" + webtest.Orders).page(t)
	rows := p.ByTestID("dead-letter-event")
	if len(rows) != 3 {
		t.Fatalf("%d dead-letter events shown, want 3", len(rows))
	}
	for i, want := range []string{"cleared ops@host <fixed> the block", "redriven (cool-off) v1.2.0 5 c0000001", "dead-lettered v1.2.0 5"} {
		text := strings.Join(strings.Fields(rows[i].Text()), " ")
		for _, w := range strings.Fields(want) {
			if !strings.Contains(text, w) {
				t.Errorf("event %d %q lacks %q", i, text, w)
			}
		}
	}
	if len(e.get("/collections/"+webtest.Debian).page(t).ByTestID("dead-letter-history")) != 0 {
		t.Error("a collection without dead-letter events shows the panel")
	}
}

package e2e_test

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/chromedp/chromedp"

	compactorv1 "github.com/compactorhq/compactor/gen/compactor/v1"
	"github.com/compactorhq/compactor/gen/compactor/v1/compactorv1connect"
	"github.com/compactorhq/compactor/internal/browsertest"
	"github.com/compactorhq/compactor/internal/sampletest"
	"github.com/compactorhq/compactor/internal/server"
)

var updateScreenshot = flag.Bool("update-screenshot", false, "write the 1280 px dashboard screenshot to docs/screenshot.png")

const (
	collectionName = "debian-packages"
	batchRecords   = 100  // records per compaction batch: progress moves in steps
	maxRecords     = 2000 // records per job: 5,217 records need 3 jobs in a row
)

// TestBrowserLiveCompaction runs the whole process and watches it in
// headless Chromium: it pushes the Debian sample (5,000 packages, then 217
// upserts) through the Connect API, opens the dashboard, starts a one-off
// compaction through the API and waits until the page, without reloading,
// shows the job and then its continuation jobs as SUCCEEDED with nothing
// running, queued or left in the backlog. It checks the compacted records
// through the API, the collection page's two SVG charts, that the page logs
// no console error and scrolls sideways at neither 1280 nor 390 px, and
// saves full-page screenshots in the test's artifact directory.
func TestBrowserLiveCompaction(t *testing.T) {
	browsertest.Require(t)
	browsertest.RequireAxe(t)
	begin := time.Now()
	// Every wait below ends at this deadline, derived from the test's own
	// (go test -timeout): a busy machine is slow, not broken.
	deadline := browsertest.Deadline(t)

	// ---- the server, in-process, on a loopback port ----
	addr := startServer(t)
	base := "http://" + addr
	colls := compactorv1connect.NewCollectionServiceClient(http.DefaultClient, base)
	logs := compactorv1connect.NewLogServiceClient(http.DefaultClient, base)
	compactions := compactorv1connect.NewCompactionServiceClient(http.DefaultClient, base)
	api, cancelAPI := context.WithDeadline(context.Background(), deadline)
	defer cancelAPI()

	// ---- a collection with the Debian sample ----
	created, err := colls.CreateCollection(api, connect.NewRequest(&compactorv1.CreateCollectionRequest{Name: collectionName, Dimension: 64}))
	if err != nil {
		t.Fatalf("CreateCollection: %v", err)
	}
	collID := created.Msg.GetCollection().GetId()
	baseOps := sampletest.Proto(t, sampletest.Base(t))
	updateOps := sampletest.Proto(t, sampletest.Updates(t))
	pushed := 0
	for _, ops := range [][]*compactorv1.OperationRecord{baseOps, updateOps} {
		for chunk := range slices.Chunk(ops, 1000) {
			res, err := logs.PushLogs(api, connect.NewRequest(&compactorv1.PushLogsRequest{CollectionId: collID, Records: chunk}))
			if err != nil {
				t.Fatalf("PushLogs after %d records: %v", pushed, err)
			}
			if int(res.Msg.GetCount()) != len(chunk) {
				t.Fatalf("PushLogs appended %d records, want %d", res.Msg.GetCount(), len(chunk))
			}
			pushed += len(chunk)
		}
	}
	wantVersions := expectedVersions(baseOps, updateOps)
	wantJobs := (pushed + maxRecords - 1) / maxRecords
	t.Logf("started the server and pushed %d records (%d packages) into %s in %s; expecting %d jobs of at most %d records", pushed, len(wantVersions), collID, time.Since(begin).Round(time.Millisecond), wantJobs, maxRecords)

	// ---- the browser ----
	ctx := browsertest.Start(t)
	ctx, cancelBudget := context.WithDeadline(ctx, deadline)
	defer cancelBudget()
	problems := browsertest.WatchConsole(t, ctx)

	if err := chromedp.Do(ctx,
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(chromedp.CSS(`#live[data-state="live"]`)), // the event stream is connected
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="backlog-item"][data-collection-id="`+collID+`"]`)),
	); err != nil {
		t.Fatalf("load the dashboard: %v\n%s", err, mainText(ctx))
	}
	// A mark in this document that a reload would lose, and a log of what
	// the page showed while the jobs ran.
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[chromedp.Void](`
		window.__marker = 42;
		window.__seen = {queued: [], running: []};
		new MutationObserver(function () {
			var note = function (testid, list) {
				document.querySelectorAll('[data-testid="' + testid + '"]').forEach(function (r) {
					if (list.indexOf(r.dataset.jobId) < 0) { list.push(r.dataset.jobId); }
				});
			};
			note("queue-row", window.__seen.queued);
			note("running-job", window.__seen.running);
		}).observe(document.getElementById("main"), {childList: true, subtree: true});
	`)); err != nil {
		t.Fatalf("mark the document: %v", err)
	}
	if got := tileText(t, ctx, "count-running"); got != "0" {
		t.Errorf("running tile before the compaction = %q, want 0", got)
	}

	// ---- a one-off compaction through the API ----
	started := time.Now()
	res, err := compactions.Compact(api, connect.NewRequest(&compactorv1.CompactRequest{CollectionIds: []string{collID}, Reason: "e2e"}))
	if err != nil {
		t.Fatalf("Compact: %v", err)
	}
	if n := len(res.Msg.GetJobs()); n != 1 || !res.Msg.GetJobs()[0].GetCreated() {
		t.Fatalf("Compact returned %v, want one created job", res.Msg.GetJobs())
	}
	jobID := res.Msg.GetJobs()[0].GetJob().GetId()

	// The page shows the job without a reload: queued, running or done.
	where, err := chromedp.Run(ctx, chromedp.Poll[string](
		`(function () { var r = document.querySelector('#main [data-job-id="`+jobID+`"]'); return r ? r.getAttribute("data-testid") : ""; })()`,
		chromedp.WithPollingInterval(20*time.Millisecond), chromedp.WithPollingTimeout(0))) // until the deadline
	if err != nil {
		t.Fatalf("wait for job %s on the page (%s after Compact): %v\n%s", jobID, time.Since(started).Round(time.Second), err, mainText(ctx))
	}
	t.Logf("job %s appeared on the page as a %s row after %s", jobID, where, time.Since(started).Round(time.Millisecond))

	// Then every job of the backlog is done: nothing running or queued, no
	// backlog, and the history lists them all as SUCCEEDED.
	done := fmt.Sprintf(`(function () {
		var tile = function (id) { var e = document.querySelector('[data-testid="' + id + '"]'); return e ? e.textContent.trim() : ""; };
		var ok = document.querySelectorAll('#main [data-testid="history-row"][data-state="SUCCEEDED"]').length;
		return tile("count-running") === "0" && tile("count-queued") === "0" && tile("count-backlog") === "0" && ok === %d;
	})()`, wantJobs)
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](done,
		chromedp.WithPollingInterval(20*time.Millisecond), chromedp.WithPollingTimeout(0))); err != nil { // until the deadline
		t.Fatalf("wait for %d SUCCEEDED jobs and an idle dashboard (%s after Compact): %v\n%s", wantJobs, time.Since(started).Round(time.Second), err, mainText(ctx))
	}
	t.Logf("the page showed all %d jobs SUCCEEDED %s after Compact", wantJobs, time.Since(started).Round(time.Millisecond))

	type seenJobs struct {
		Queued  []string `json:"queued"`
		Running []string `json:"running"`
	}
	seen, err := chromedp.Run(ctx, chromedp.Evaluate[seenJobs](`window.__seen`))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("while they ran, the page showed %d job(s) queued and %d running", len(seen.Queued), len(seen.Running))

	// The history rows are the API's jobs, all SUCCEEDED: ours (one-off,
	// reason "e2e") and its continuations.
	list, err := compactions.ListCompactions(api, connect.NewRequest(&compactorv1.ListCompactionsRequest{CollectionId: collID}))
	if err != nil {
		t.Fatalf("ListCompactions: %v", err)
	}
	jobs := list.Msg.GetJobs()
	var apiIDs []string
	var read int64
	for _, j := range jobs {
		apiIDs = append(apiIDs, j.GetId())
		read += j.GetRecordsRead()
		if j.GetState() != compactorv1.JobState_JOB_STATE_SUCCEEDED {
			t.Errorf("job %s is %s, want SUCCEEDED (error %q)", j.GetId(), j.GetState(), j.GetError())
		}
		if j.GetRecordsRead() > maxRecords {
			t.Errorf("job %s read %d records, more than the maximum %d", j.GetId(), j.GetRecordsRead(), maxRecords)
		}
	}
	if len(jobs) != wantJobs || !slices.Contains(apiIDs, jobID) || read != int64(pushed) {
		t.Errorf("API jobs %v read %d records; want %d jobs including %s reading %d", apiIDs, read, wantJobs, jobID, pushed)
	}
	if len(jobs) > 0 {
		if first := jobs[len(jobs)-1]; first.GetId() != jobID || first.GetReason() != "e2e" {
			t.Errorf("oldest job = %s (reason %q), want %s (reason \"e2e\")", first.GetId(), first.GetReason(), jobID)
		}
	}
	pageIDs, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](
		`Array.from(document.querySelectorAll('#main [data-testid="history-row"]')).map(function (r) { return r.dataset.jobId; })`))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(pageIDs, apiIDs) {
		t.Errorf("history rows on the page = %v, want the API's jobs newest first %v", pageIDs, apiIDs)
	}

	// The page was updated in place: same document, swapped <main>.
	if m, err := chromedp.Run(ctx, chromedp.Evaluate[int](`window.__marker`)); err != nil || m != 42 {
		t.Errorf("window.__marker = %d (%v), want 42: the page reloaded instead of updating in place", m, err)
	}
	if r, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.getElementById("main").hasAttribute("data-refreshed")`)); err != nil || !r {
		t.Errorf("<main> was never swapped by the live-update script (%v)", err)
	}

	// ---- the compacted records, through the API ----
	checkRecords(t, api, colls, collID, wantVersions)

	// ---- screenshots of the dashboard ----
	dir := t.ArtifactDir()
	wide := screenshot(t, ctx, dir, "dashboard-1280.png", 1280)
	screenshot(t, ctx, dir, "dashboard-390.png", 390)
	if m, err := chromedp.Run(ctx, chromedp.Evaluate[int](`window.__marker`)); err != nil || m != 42 {
		t.Errorf("window.__marker after resizing = %d (%v), want 42", m, err)
	}
	if *updateScreenshot {
		if err := os.MkdirAll("../../docs", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile("../../docs/screenshot.png", wide, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Log("wrote docs/screenshot.png")
	}

	browsertest.CheckAxe(t, ctx, "the dashboard")

	// ---- the collection page and its charts ----
	if err := chromedp.Do(ctx,
		chromedp.EmulateViewport(1280, 900),
		chromedp.Navigate(base+"/collections/"+collID),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="chart-durations"] svg`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="chart-backlog"] svg`)),
	); err != nil {
		t.Fatalf("load the collection page with its charts: %v\n%s", err, mainText(ctx))
	}
	var charts struct {
		Name, Records  string
		Bars, Line     int
		DurW, BacklogW float64
	}
	if charts, err = chromedp.Run(ctx, chromedp.Evaluate[struct {
		Name, Records  string
		Bars, Line     int
		DurW, BacklogW float64
	}](`({
		Name: document.querySelector('h1 [data-testid="collection-name"]').textContent.trim(),
		Records: document.querySelector('[data-testid="collection-fields"] [data-field="records"]').textContent.trim(),
		Bars: document.querySelectorAll('[data-testid="chart-durations"] svg rect.bar-succeeded').length,
		Line: document.querySelectorAll('[data-testid="chart-backlog"] svg polyline.line').length,
		DurW: document.querySelector('[data-testid="chart-durations"] svg').getBoundingClientRect().width,
		BacklogW: document.querySelector('[data-testid="chart-backlog"] svg').getBoundingClientRect().width,
	})`)); err != nil {
		t.Fatalf("read the collection page: %v", err)
	}
	if charts.Name != collectionName || charts.Records != "5,000" {
		t.Errorf("collection page shows %q with %q records, want %q with 5,000", charts.Name, charts.Records, collectionName)
	}
	if charts.Bars != wantJobs {
		t.Errorf("duration chart has %d SUCCEEDED bars, want %d", charts.Bars, wantJobs)
	}
	if charts.Line != 1 {
		t.Errorf("backlog chart has %d lines, want 1", charts.Line)
	}
	if charts.DurW < 200 || charts.BacklogW < 200 {
		t.Errorf("charts drawn %.0f and %.0f px wide, want at least 200", charts.DurW, charts.BacklogW)
	}
	browsertest.CheckAxe(t, ctx, "the collection page")
	screenshot(t, ctx, dir, "collection-1280.png", 1280)
	screenshot(t, ctx, dir, "collection-390.png", 390)

	for _, p := range problems() {
		t.Errorf("browser console: %s", p)
	}
	t.Logf("screenshots in %s (kept with -artifacts -outputdir DIR); test ran %s", dir, time.Since(begin).Round(time.Millisecond))
}

// startServer runs the real server until the test ends and returns its
// address. The scheduler runs every 200 ms (so the backlog chart gets
// samples) but never queues a job of its own: only our one-off compaction
// and its continuations run.
func startServer(t *testing.T) string {
	t.Helper()
	cfg := server.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Listen = "127.0.0.1:0"
	cfg.ShutdownGrace = 2 * time.Second
	cfg.Manager.Interval = 200 * time.Millisecond
	cfg.Manager.MinCompactionSize = math.MaxInt64
	cfg.Manager.MaxAge = 100 * 365 * 24 * time.Hour
	cfg.Compaction.BatchRecords = batchRecords
	cfg.Compaction.MaxRecords = maxRecords
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))

	ctx, cancel := context.WithCancel(context.Background())
	app, err := server.Open(ctx, cfg, logger)
	if err != nil {
		cancel()
		t.Fatalf("open the server: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		cancel()
		_ = app.Close()
		t.Fatal(err)
	}
	ready := make(chan string, 1)
	stopped := make(chan error, 1)
	go func() { stopped <- app.Run(ctx, ln, func(a net.Addr) { ready <- a.String() }) }()
	t.Cleanup(func() {
		cancel()
		if err := <-stopped; err != nil {
			t.Errorf("server Run: %v", err)
		}
		if err := app.Close(); err != nil {
			t.Errorf("server Close: %v", err)
		}
	})
	select {
	case addr := <-ready:
		return addr
	case err := <-stopped:
		stopped <- err // for the cleanup
		t.Fatalf("server stopped before serving: %v", err)
	}
	return ""
}

// screenshot sizes the viewport to width, checks nothing scrolls sideways,
// and saves a full-page PNG as dir/name.
func screenshot(t *testing.T, ctx context.Context, dir, name string, width int64) []byte {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(width, 900)); err != nil {
		t.Fatalf("resize to %d px: %v", width, err)
	}
	if over, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.documentElement.scrollWidth - window.innerWidth`)); err != nil {
		t.Fatal(err)
	} else if over > 0 {
		t.Errorf("%s: the page scrolls sideways by %d px at %d px", name, over, width)
	}
	buf, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, buf, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot %s", path)
	return buf
}

func tileText(t *testing.T, ctx context.Context, testID string) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`[data-testid="`+testID+`"]`)))
	if err != nil {
		t.Fatalf("read tile %s: %v", testID, err)
	}
	return strings.TrimSpace(s)
}

// mainText is the visible text of <main>, for failure messages.
func mainText(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(document.getElementById("main") || document.body).innerText`))
	if err != nil {
		return "(page text unavailable: " + err.Error() + ")"
	}
	return "page text:\n" + s
}

// expectedVersions applies the operations' "version" metadata as the
// materialization rules do (first add wins, upsert merges) and returns the
// version each record must end with.
func expectedVersions(opss ...[]*compactorv1.OperationRecord) map[string]string {
	want := map[string]string{}
	for _, ops := range opss {
		for _, op := range ops {
			_, present := want[op.GetId()]
			if op.GetOp() == compactorv1.Operation_OPERATION_ADD && present {
				continue
			}
			v, ok := op.GetMetadata().GetFields()["version"]
			switch {
			case ok:
				want[op.GetId()] = v.GetStringValue()
			case !present:
				want[op.GetId()] = ""
			}
		}
	}
	return want
}

// checkRecords reads the whole collection, page by page, and compares it
// with the expected records.
func checkRecords(t *testing.T, ctx context.Context, colls compactorv1connect.CollectionServiceClient, collID string, want map[string]string) {
	t.Helper()
	got := map[string]string{}
	token := ""
	for {
		res, err := colls.GetRecords(ctx, connect.NewRequest(&compactorv1.GetRecordsRequest{CollectionId: collID, PageSize: 1000, PageToken: token}))
		if err != nil {
			t.Fatalf("GetRecords: %v", err)
		}
		for _, r := range res.Msg.GetRecords() {
			if _, dup := got[r.GetId()]; dup {
				t.Errorf("GetRecords returned %s twice", r.GetId())
			}
			got[r.GetId()] = r.GetMetadata().GetFields()["version"].GetStringValue()
			if len(r.GetEmbedding()) != 64 {
				t.Errorf("record %s has %d embedding values, want 64", r.GetId(), len(r.GetEmbedding()))
			}
		}
		if token = res.Msg.GetNextPageToken(); token == "" {
			break
		}
	}
	if len(got) != 5000 || len(want) != 5000 {
		t.Errorf("GetRecords yielded %d records, want 5000 (the sample has %d packages)", len(got), len(want))
	}
	bad := 0
	for id, v := range want {
		if g, ok := got[id]; !ok || g != v {
			if bad++; bad <= 5 {
				t.Errorf("record %s: version %q (present %v), want %q", id, g, ok, v)
			}
		}
	}
	if bad > 5 {
		t.Errorf("... and %d more records differ", bad-5)
	}
}

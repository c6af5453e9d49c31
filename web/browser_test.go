package web_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/compactorhq/compactor/internal/browsertest"
	"github.com/compactorhq/compactor/web"
	"github.com/compactorhq/compactor/web/webtest"
)

// TestInBrowser loads the pages in headless Chromium and checks what only a
// browser shows: the script connects to /events, a Source tick refreshes
// the running job's progress in place, the strict content security policy
// blocks nothing of ours (no console errors), at 1400, 1280 and 390 px wide
// no page scrolls sideways (and at 1280 px and more no table does), and
// axe-core finds no serious or critical accessibility violation on any
// page. It skips without Chromium. Set
// WEB_SCREENSHOT_DIR to keep screenshots.
func TestInBrowser(t *testing.T) {
	browsertest.Require(t)
	e := newEnv(t, web.Config{MinEventInterval: 10 * time.Millisecond})
	srv := newStreamServer(t, e)
	ctx := browsertest.Start(t)
	ctx, cancelTimeout := context.WithDeadline(ctx, browsertest.Deadline(t)) // from go test -timeout: a busy machine is slow, not broken
	defer cancelTimeout()
	problems := browsertest.WatchConsole(t, ctx)

	row := `tr[data-job-id="` + webtest.RunningJob + `"]`
	if err := chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/"),
		chromedp.WaitVisible(chromedp.CSS(`#live[data-state="live"]`)),
	); err != nil {
		t.Fatalf("load the dashboard: %v", err)
	}
	before, err := chromedp.Run(ctx, chromedp.AttributeValue(chromedp.CSS(row+" progress"), "value"))
	if err != nil || before.Value != "450" {
		t.Fatalf("progress before: %+v, %v; want 450", before, err)
	}
	screenshot(t, ctx, "dashboard-live-1280.png")

	// The job moves on; the page follows without a reload.
	jobs, err := e.src.Jobs(context.Background(), web.JobQuery{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range jobs {
		if jobs[i].ID == webtest.RunningJob {
			// Committing: no counter of its own, and an ETA the server
			// cannot estimate, shown as unknown.
			jobs[i].Phase, jobs[i].Fraction, jobs[i].ETA, jobs[i].ETAKnown = "committing", 0.95, 0, false
		}
	}
	e.src.SetJobs(jobs)
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[string](`window.__sameDocument = "yes"`)); err != nil {
		t.Fatal(err)
	}
	if n := e.src.Tick(); n != 1 {
		t.Fatalf("Tick reached %d subscribers, want the page's", n)
	}
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(row+` progress[value="950"]`))); err != nil {
		t.Fatalf("wait for the live update: %v", err)
	}
	phase, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(row+` [data-testid="job-phase"]`)))
	if phase = strings.TrimSpace(phase); err != nil || phase != "committing" {
		t.Errorf("phase after the update %q (%v), want committing", phase, err)
	}
	eta, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(row+` [data-testid="job-eta"]`)))
	if eta = strings.TrimSpace(eta); err != nil || eta != "unknown" {
		t.Errorf("ETA after the update %q (%v), want unknown", eta, err)
	}
	if same, err := chromedp.Run(ctx, chromedp.Evaluate[string](`window.__sameDocument`)); err != nil || same != "yes" {
		t.Errorf("the page reloaded instead of updating in place (%q, %v)", same, err)
	}

	axe := browsertest.RequireAxe(t)
	for _, page := range []string{"/", "/collections", "/collections/" + webtest.Orders, "/jobs/" + webtest.Failed, "/jobs/" + webtest.RunningJob, "/plan"} {
		for _, width := range []int64{1400, 1280, 390} {
			if err := chromedp.Do(ctx,
				chromedp.EmulateViewport(width, 844),
				chromedp.Navigate(srv.URL+page),
				chromedp.WaitReady(chromedp.CSS("#main")),
			); err != nil {
				t.Fatalf("%s at %d px: %v", page, width, err)
			}
			overflow, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.documentElement.scrollWidth > window.innerWidth`))
			if err != nil {
				t.Fatal(err)
			}
			if overflow {
				t.Errorf("%s scrolls sideways at %d px", page, width)
			}
			if width >= 1280 {
				// On a desktop screen no table needs its own sideways
				// scrolling either (ids are shown short, times relative).
				wide, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll(".table-wrap")].filter(w => w.scrollWidth > w.clientWidth).map(w => w.querySelector("table")?.dataset.testid || "?")`))
				if err != nil {
					t.Fatal(err)
				}
				if len(wide) > 0 {
					t.Errorf("%s at %d px: tables %v scroll sideways", page, width, wide)
				}
			}
			if axe && width != 1400 {
				browsertest.CheckAxe(t, ctx, page)
			}
			name := strings.ReplaceAll(strings.Trim(page, "/"), "/", "_")
			if name == "" {
				name = "dashboard"
			}
			screenshot(t, ctx, name+"-"+strconv.FormatInt(width, 10)+".png")
		}
	}

	for _, p := range problems() {
		t.Errorf("browser console: %s", p)
	}
}

func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	dir := os.Getenv("WEB_SCREENSHOT_DIR")
	if dir == "" {
		return
	}
	buf, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), buf, 0o644); err != nil {
		t.Fatal(err)
	}
}

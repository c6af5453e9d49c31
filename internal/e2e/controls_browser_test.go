package e2e_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/chromedp/chromedp"

	compactorv1 "github.com/compactorhq/compactor/gen/compactor/v1"
	"github.com/compactorhq/compactor/gen/compactor/v1/compactorv1connect"
	"github.com/compactorhq/compactor/internal/browsertest"
)

// TestBrowserPauseAndResume pauses automatic compaction from the dashboard
// in headless Chromium, with a reason: the page shows the banner, and the
// pause is the server's (GetControls over the API says so); then it resumes.
func TestBrowserPauseAndResume(t *testing.T) {
	browsertest.Require(t)
	deadline := time.Now().Add(5 * time.Minute)
	if d, ok := t.Deadline(); ok && d.Before(deadline) {
		deadline = d.Add(-5 * time.Second)
	}
	base := "http://" + startServer(t)
	controls := compactorv1connect.NewControlServiceClient(http.DefaultClient, base)
	ctx := browsertest.Start(t)
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	problems := browsertest.WatchConsole(t, ctx)

	if err := chromedp.Do(ctx,
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="pause-state"][data-paused="false"]`)),
		chromedp.SendKeys(chromedp.CSS(`[data-testid="pause-form"] input[name="reason"]`), "storage maintenance"),
		chromedp.Click(chromedp.CSS(`[data-testid="pause-button"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="pause-state"][data-paused="true"]`)),
	); err != nil {
		t.Fatalf("pause from the dashboard: %v\n%s", err, mainText(ctx))
	}
	banner, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`[data-testid="pause-state"]`)))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(banner, "storage maintenance") || !strings.Contains(banner, "status page") {
		t.Errorf("banner %q lacks the reason or who paused", banner)
	}
	res, err := controls.GetControls(ctx, connect.NewRequest(&compactorv1.GetControlsRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	if p := res.Msg.GetPause(); !p.GetPaused() || p.GetReason() != "storage maintenance" {
		t.Fatalf("the server's pause after the click: %v", p)
	}

	if err := chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`[data-testid="resume-button"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="pause-state"][data-paused="false"]`)),
	); err != nil {
		t.Fatalf("resume from the dashboard: %v\n%s", err, mainText(ctx))
	}
	if res, err := controls.GetControls(ctx, connect.NewRequest(&compactorv1.GetControlsRequest{})); err != nil || res.Msg.GetPause().GetPaused() {
		t.Fatalf("the server's pause after resuming: %v, %v", res, err)
	}
	if p := problems(); len(p) > 0 {
		t.Errorf("the page logged problems:\n%s", strings.Join(p, "\n"))
	}
}

// Package browsertest starts headless Chromium for the project's browser
// tests (the status page's own test in web/ and the end-to-end test in
// internal/e2e), driven by chromedp.
//
// The browser is $COMPACTOR_CHROME, Debian's /usr/bin/chromium, or a
// chromium on PATH. Without one the test is skipped, or fails when
// COMPACTOR_REQUIRE_BROWSER=1 (scripts/test.sh sets it in CI, after
// installing Debian's chromium package).
package browsertest

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Path returns the browser to drive, or "" when there is none.
func Path() string {
	if p := os.Getenv("COMPACTOR_CHROME"); p != "" {
		return p
	}
	if _, err := os.Stat("/usr/bin/chromium"); err == nil {
		return "/usr/bin/chromium"
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// Require skips the test without a browser (fails instead with
// COMPACTOR_REQUIRE_BROWSER=1) and in -short mode (unless required), and
// returns the browser's path. A test calls it before costly setup.
func Require(t *testing.T) string {
	t.Helper()
	required := os.Getenv("COMPACTOR_REQUIRE_BROWSER") == "1"
	if testing.Short() && !required {
		t.Skip("browser test skipped in -short mode")
	}
	if env := os.Getenv("COMPACTOR_CHROME"); env != "" {
		if _, err := os.Stat(env); err != nil {
			t.Fatalf("COMPACTOR_CHROME: %v", err)
		}
	}
	chrome := Path()
	if chrome == "" {
		msg := "Chromium not found at /usr/bin/chromium or on PATH: install it (apt-get install chromium) or set COMPACTOR_CHROME"
		if required {
			t.Fatal(msg + " (COMPACTOR_REQUIRE_BROWSER=1)")
		}
		t.Skip(msg)
	}
	return chrome
}

// Deadline is when a browser test gives up waiting: a minute before the
// test binary's own deadline (go test -timeout, default 10m), so that a
// slow, busy machine gets all the time the run allows while a failure still
// names the step that did not finish and the cleanup still runs; without
// -timeout, 10 minutes from now. A fixed short budget fails on a loaded CI
// machine where nothing is wrong.
func Deadline(t *testing.T) time.Time {
	d, ok := t.Deadline()
	if !ok {
		return time.Now().Add(10 * time.Minute)
	}
	const margin = time.Minute
	if until := time.Until(d); until > 2*margin {
		return d.Add(-margin)
	}
	return d.Add(-time.Until(d) / 2) // a short -timeout: half of what is left for the cleanup
}

// Start starts headless Chromium (after Require) with a fresh profile and a
// 1280×900 window, and returns the chromedp context of its first tab; the
// browser is closed when the test ends. The flags keep Chromium off the
// network: this machine reaches none.
func Start(t *testing.T) context.Context {
	t.Helper()
	chrome := Require(t)
	profile := t.TempDir() // registered first, so removed after the browser exits
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chrome),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(1280, 900),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancelCtx()
		cancelAlloc() // waits for the browser to exit
	})
	// The first action starts the browser; it must get ctx itself, not a
	// context with a deadline, or the browser would end with that deadline.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start Chromium (%s): %v", chrome, err)
	}
	return ctx
}

// WatchConsole collects the page's console errors and uncaught exceptions
// (a script or style blocked by the content security policy shows up here).
// The returned function stops collecting and returns them.
func WatchConsole(t *testing.T, ctx context.Context) func() []string {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	var mu sync.Mutex
	var problems []string
	done := make(chan struct{})
	messages := chromedp.Console(ctx)
	go func() {
		defer close(done)
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.IsException() {
				mu.Lock()
				problems = append(problems, m.String())
				mu.Unlock()
			}
		}
	}()
	var once sync.Once
	stop := func() []string {
		once.Do(func() { cancel(); <-done })
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(problems)
	}
	t.Cleanup(func() { stop() })
	return stop
}

package browsertest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"
)

// The accessibility check: axe-core, installed from npm into tools/axe by
// scripts/test.sh (pinned by tools/axe/package-lock.json), is injected into
// a loaded page and run over the whole document.

// axeScript is the path of axe.min.js relative to the module root.
const axeScript = "tools/axe/node_modules/axe-core/axe.min.js"

// AxeViolation is one rule a page breaks, as axe-core reports it.
type AxeViolation struct {
	ID     string `json:"id"`     // the rule, such as "nested-interactive"
	Impact string `json:"impact"` // "minor", "moderate", "serious" or "critical"
	Help   string `json:"help"`
	Nodes  []struct {
		Target []any  `json:"target"` // CSS selectors of the element
		HTML   string `json:"html"`
	} `json:"nodes"`
}

// String is the rule, its impact and the elements that break it.
func (v AxeViolation) String() string {
	var targets []string
	for _, n := range v.Nodes {
		targets = append(targets, fmt.Sprint(n.Target...))
	}
	return fmt.Sprintf("%s (%s): %s: %s", v.ID, v.Impact, v.Help, strings.Join(targets, ", "))
}

// Serious reports whether the violation is serious or critical.
func (v AxeViolation) Serious() bool { return v.Impact == "serious" || v.Impact == "critical" }

var axeSource = sync.OnceValues(func() (string, error) {
	path := os.Getenv("COMPACTOR_AXE")
	if path == "" {
		root, err := moduleRoot()
		if err != nil {
			return "", err
		}
		path = filepath.Join(root, axeScript)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("axe-core: %w (scripts/test.sh installs it: npm ci --prefix tools/axe; or set COMPACTOR_AXE)", err)
	}
	return string(b), nil
})

// moduleRoot is the nearest directory above the working directory (a
// package's directory under go test) that holds go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = parent
	}
}

// RequireAxe returns whether axe-core is installed. Without it the
// accessibility checks are skipped with a note, or the test fails when
// COMPACTOR_REQUIRE_BROWSER=1 (CI).
func RequireAxe(t *testing.T) bool {
	t.Helper()
	if _, err := axeSource(); err != nil {
		if os.Getenv("COMPACTOR_REQUIRE_BROWSER") == "1" {
			t.Fatalf("%v (COMPACTOR_REQUIRE_BROWSER=1)", err)
		}
		t.Logf("accessibility checks skipped: %v", err)
		return false
	}
	return true
}

// Axe runs axe-core over the page loaded in ctx and returns its violations
// (every impact; see Serious). The script is injected through the DevTools
// protocol, which the page's content security policy does not govern.
func Axe(ctx context.Context) ([]AxeViolation, error) {
	src, err := axeSource()
	if err != nil {
		return nil, err
	}
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](src+"\n;true")); err != nil {
		return nil, fmt.Errorf("inject axe-core: %w", err)
	}
	out, err := chromedp.Run(ctx, chromedp.Evaluate[string](
		`axe.run(document, {resultTypes: ["violations"]}).then(r => JSON.stringify(r.violations))`, chromedp.EvalAwaitPromise))
	if err != nil {
		return nil, fmt.Errorf("run axe-core: %w", err)
	}
	var vs []AxeViolation
	if err := json.Unmarshal([]byte(out), &vs); err != nil {
		return nil, fmt.Errorf("decode axe-core's result: %w", err)
	}
	return vs, nil
}

// CheckAxe runs axe-core over the page loaded in ctx (named page in the
// messages) and fails the test on every serious or critical violation; the
// others are logged. It does nothing when axe-core is not installed (see
// RequireAxe, which the test calls first).
func CheckAxe(t *testing.T, ctx context.Context, page string) {
	t.Helper()
	if _, err := axeSource(); err != nil {
		return
	}
	vs, err := Axe(ctx)
	if err != nil {
		t.Fatalf("%s: %v", page, err)
	}
	for _, v := range vs {
		if v.Serious() {
			t.Errorf("%s: accessibility: %s", page, v)
		} else {
			t.Logf("%s: accessibility (%s, not failing): %s", page, v.Impact, v)
		}
	}
}

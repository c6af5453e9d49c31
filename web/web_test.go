package web_test

import (
	"flag"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/compactorhq/compactor/internal/testutil"
	"github.com/compactorhq/compactor/web"
	"github.com/compactorhq/compactor/web/webtest"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

// env is a handler over the fixture Source with a fixed clock.
type env struct {
	t    *testing.T
	src  *webtest.Source
	h    http.Handler
	logs *testutil.SyncBuffer
}

func newEnv(t *testing.T, cfg web.Config) *env {
	t.Helper()
	e := &env{t: t, src: webtest.Fixture(), logs: &testutil.SyncBuffer{}}
	if cfg.Now == nil {
		cfg.Now = func() time.Time { return webtest.Now }
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	h, err := web.NewHandler(e.src, cfg)
	if err != nil {
		t.Fatalf("NewHandler: %v", err)
	}
	e.h = h
	return e
}

type response struct {
	*http.Response
	body string
}

func (e *env) do(req *http.Request) response {
	e.t.Helper()
	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, req)
	res := rec.Result()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return response{Response: res, body: string(b)}
}

func (e *env) get(path string, mods ...func(*http.Request)) response {
	e.t.Helper()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	for _, m := range mods {
		m(req)
	}
	return e.do(req)
}

// post sends a form as a same-origin browser would (Origin and
// Sec-Fetch-Site headers), unless mods change that.
func (e *env) post(path string, form url.Values, mods ...func(*http.Request)) response {
	e.t.Helper()
	req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "http://example.com")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	for _, m := range mods {
		m(req)
	}
	return e.do(req)
}

func withCookie(c *http.Cookie) func(*http.Request) {
	return func(r *http.Request) { r.AddCookie(c) }
}

func (r response) page(t *testing.T) *node {
	t.Helper()
	return parseHTML(t, r.body)
}

func wantStatus(t *testing.T, r response, want int) {
	t.Helper()
	if r.StatusCode != want {
		t.Fatalf("status %d, want %d; body:\n%s", r.StatusCode, want, r.body)
	}
}

// goldenForm puts each tag on its own line so that a golden file diffs
// readably; the transformation is applied to both sides of the comparison.
func goldenForm(s string) string { return strings.ReplaceAll(s, "><", ">\n<") + "\n" }

func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	got = goldenForm(got)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./web -update to create it)", err)
	}
	if got == string(want) {
		return
	}
	gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
	for i := range max(len(gl), len(wl)) {
		var g, w string
		if i < len(gl) {
			g = gl[i]
		}
		if i < len(wl) {
			w = wl[i]
		}
		if g != w {
			t.Fatalf("%s differs at line %d (run go test ./web -update if the change is intended):\n got: %s\nwant: %s", path, i+1, g, w)
		}
	}
}

func TestPagesMatchGolden(t *testing.T) {
	const token = "golden-token"
	signedIn := withCookie(signIn(t, token))
	tests := []struct {
		name   string
		path   string
		cfg    web.Config
		mods   []func(*http.Request)
		status int
	}{
		{name: "dashboard", path: "/", status: 200},
		{name: "dashboard_filtered", path: "/?state=FAILED&trigger=SCHEDULED&collection=" + webtest.Hostile, status: 200},
		{name: "dashboard_partial", path: "/?partial=1", status: 200},
		{name: "dashboard_signed_out", path: "/", cfg: web.Config{Token: token}, status: 200},
		{name: "dashboard_signed_in", path: "/", cfg: web.Config{Token: token}, mods: []func(*http.Request){signedIn}, status: 200},
		{name: "job_running", path: "/jobs/" + webtest.RunningJob, status: 200},
		{name: "job_failed", path: "/jobs/" + webtest.Failed, status: 200},
		{name: "job_queued_hostile", path: "/jobs/" + webtest.QueuedHostile, status: 200},
		{name: "collections", path: "/collections?sort=backlog&dir=desc", status: 200},
		{name: "collection", path: "/collections/" + webtest.Orders, status: 200},
		{name: "collection_hostile", path: "/collections/" + webtest.Hostile, status: 200},
		{name: "collection_flash", path: "/collections/" + webtest.Orders + "?flash=compact-queued&job=" + webtest.QueuedOrders, status: 200},
		{name: "plan", path: "/plan", status: 200},
		{name: "not_found", path: "/jobs/no-such-job", status: 404},
		{name: "login", path: "/login?next=%2Fcollections", cfg: web.Config{Token: token}, status: 200},
		{name: "login_required", path: "/collections", cfg: web.Config{Token: token, ProtectReads: true}, status: 401},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, tt.cfg)
			r := e.get(tt.path, tt.mods...)
			wantStatus(t, r, tt.status)
			if ct := r.Header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
				t.Errorf("Content-Type %q", ct)
			}
			if cc := r.Header.Get("Cache-Control"); cc != "no-store" {
				t.Errorf("Cache-Control %q, want no-store", cc)
			}
			parseHTML(t, r.body) // well-formed
			checkGolden(t, tt.name, r.body)
		})
	}
}

// signIn returns the cookie that POST /login sets for token.
func signIn(t *testing.T, token string) *http.Cookie {
	t.Helper()
	e := newEnv(t, web.Config{Token: token})
	r := e.post("/login", url.Values{"token": {token}})
	wantStatus(t, r, http.StatusSeeOther)
	for _, c := range r.Cookies() {
		if c.Name == web.CookieName {
			return &http.Cookie{Name: c.Name, Value: c.Value}
		}
	}
	t.Fatalf("POST /login set no %s cookie", web.CookieName)
	return nil
}

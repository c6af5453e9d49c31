package web_test

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/compactorhq/compactor/web"
	"github.com/compactorhq/compactor/web/webtest"
)

func wantRedirect(t *testing.T, r response, want string) {
	t.Helper()
	wantStatus(t, r, http.StatusSeeOther)
	if got := r.Header.Get("Location"); got != want {
		t.Fatalf("Location %q, want %q", got, want)
	}
}

func TestCompactCallsTheSourceAndRedirectsWithAFlash(t *testing.T) {
	e := newEnv(t, web.Config{})
	path := "/collections/" + webtest.Orders
	r := e.post(path+"/compact", url.Values{"reason": {"  after \"bulk\" load\nof 1M  "}, "next": {path}})
	wantRedirect(t, r, path+"?flash=compact-queued&job="+webtest.QueuedOrders) // the queued job is kept
	calls := e.src.CompactCalls()
	if len(calls) != 1 || calls[0] != (webtest.CompactCall{CollectionID: webtest.Orders, Reason: "after \"bulk\" load\nof 1M"}) {
		t.Fatalf("Compact calls %+v", calls)
	}

	p := e.get(r.Header.Get("Location")).page(t)
	flash := p.One(t, "flash")
	if !strings.Contains(flash.Text(), "Compaction queued as job "+webtest.QueuedOrders) {
		t.Errorf("flash %q", flash.Text())
	}
	if a := flash.ByTag("a"); len(a) != 1 || a[0].Attrs["href"] != "/jobs/"+webtest.QueuedOrders {
		t.Errorf("flash link %v", a)
	}

	// A collection without a queued job gets a new one; an empty reason
	// gets a default; without next the collection page is the way back.
	r = e.post("/collections/"+webtest.Debian+"/compact", url.Values{})
	wantRedirect(t, r, "/collections/"+webtest.Debian+"?flash=compact-queued&job=new-job-1")
	if calls := e.src.CompactCalls(); calls[1].Reason != "compact now from the status page" {
		t.Errorf("default reason %q", calls[1].Reason)
	}
}

func TestActionsRedirectOnlyWithinTheSite(t *testing.T) {
	for next, want := range map[string]string{
		"/":                              "/?flash=cancel-requested",
		"/?state=FAILED&partial=1#x":     "/?flash=cancel-requested&state=FAILED",
		"https://evil.example/":          "/?flash=cancel-requested",
		"//evil.example/":                "/?flash=cancel-requested",
		"/\\evil.example":                "/?flash=cancel-requested",
		"javascript:alert(1)":            "/?flash=cancel-requested",
		"/collections?flash=signed-in":   "/collections?flash=cancel-requested",
		"/collections?sort=backlog&dir=": "/collections?dir=&flash=cancel-requested&sort=backlog",
	} {
		t.Run(next, func(t *testing.T) {
			e := newEnv(t, web.Config{})
			r := e.post("/jobs/"+webtest.QueuedHostile+"/cancel", url.Values{"next": {next}})
			wantRedirect(t, r, want)
		})
	}
}

func TestCancel(t *testing.T) {
	tests := []struct {
		name     string
		job      string
		location string
		status   int
	}{
		{"a queued job", webtest.QueuedOrders, "/jobs/" + webtest.QueuedOrders + "?flash=cancel-requested", http.StatusSeeOther},
		{"a running job", webtest.RunningJob, "/jobs/" + webtest.RunningJob + "?flash=cancel-requested", http.StatusSeeOther},
		{"a finished job", webtest.Succeeded, "/jobs/" + webtest.Succeeded + "?flash=cancel-refused", http.StatusSeeOther},
		{"an unknown job", "nope", "", http.StatusNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, web.Config{})
			r := e.post("/jobs/"+tt.job+"/cancel", nil)
			wantStatus(t, r, tt.status)
			if got := r.Header.Get("Location"); got != tt.location {
				t.Errorf("Location %q, want %q", got, tt.location)
			}
			if calls := e.src.CancelCalls(); len(calls) != 1 || calls[0] != tt.job {
				t.Errorf("Cancel calls %v", calls)
			}
		})
	}
	e := newEnv(t, web.Config{})
	p := e.get("/jobs/" + webtest.Succeeded + "?flash=cancel-refused").page(t)
	if got := p.One(t, "flash").Text(); !strings.Contains(got, "already finished") {
		t.Errorf("flash %q", got)
	}
}

func TestCompactErrors(t *testing.T) {
	t.Run("unknown collection is 404", func(t *testing.T) {
		e := newEnv(t, web.Config{})
		wantStatus(t, e.post("/collections/nope/compact", nil), http.StatusNotFound)
	})
	t.Run("a refusal is a flash", func(t *testing.T) {
		e := newEnv(t, web.Config{})
		e.src.FailWith("Compact", fmt.Errorf("collection is being deleted: %w", web.ErrConflict))
		wantRedirect(t, e.post("/collections/"+webtest.Orders+"/compact", nil), "/collections/"+webtest.Orders+"?flash=compact-refused")
	})
	t.Run("an unexpected error is 500 without detail", func(t *testing.T) {
		e := newEnv(t, web.Config{})
		e.src.FailWith("Compact", errors.New("queue: secret internals"))
		r := e.post("/collections/"+webtest.Orders+"/compact", nil)
		wantStatus(t, r, http.StatusInternalServerError)
		if strings.Contains(r.body, "secret internals") {
			t.Error("detail on the page")
		}
		if !strings.Contains(e.logs.String(), "secret internals") {
			t.Error("detail not logged")
		}
	})
	t.Run("a reason over 1000 bytes is refused before the Source", func(t *testing.T) {
		e := newEnv(t, web.Config{})
		wantStatus(t, e.post("/collections/"+webtest.Orders+"/compact", url.Values{"reason": {strings.Repeat("x", 1001)}}), http.StatusBadRequest)
		if calls := e.src.CompactCalls(); len(calls) != 0 {
			t.Errorf("Compact called: %v", calls)
		}
	})
	t.Run("GET is not an action", func(t *testing.T) {
		e := newEnv(t, web.Config{})
		wantStatus(t, e.get("/collections/"+webtest.Orders+"/compact"), http.StatusMethodNotAllowed)
		wantStatus(t, e.get("/jobs/"+webtest.QueuedOrders+"/cancel"), http.StatusMethodNotAllowed)
		if len(e.src.CompactCalls())+len(e.src.CancelCalls()) != 0 {
			t.Error("a GET acted")
		}
	})
}

func TestCrossOriginPostsAreRefused(t *testing.T) {
	crossSite := func(r *http.Request) {
		r.Header.Set("Sec-Fetch-Site", "cross-site")
		r.Header.Set("Origin", "https://evil.example")
	}
	originOnly := func(r *http.Request) { // an older browser: no Sec-Fetch-Site
		r.Header.Del("Sec-Fetch-Site")
		r.Header.Set("Origin", "https://evil.example")
	}
	sameSiteOtherOrigin := func(r *http.Request) {
		r.Header.Set("Sec-Fetch-Site", "same-site")
		r.Header.Set("Origin", "https://other.example.com")
	}
	const token = "cross-token"
	for _, tc := range []struct {
		name string
		mod  func(*http.Request)
	}{{"cross-site", crossSite}, {"origin only", originOnly}, {"same-site", sameSiteOtherOrigin}} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, web.Config{Token: token})
			cookie := withCookie(signIn(t, token))
			for _, path := range []string{"/collections/" + webtest.Orders + "/compact", "/jobs/" + webtest.QueuedOrders + "/cancel", "/login", "/logout"} {
				r := e.post(path, url.Values{"token": {token}, "reason": {"csrf"}}, cookie, tc.mod)
				wantStatus(t, r, http.StatusForbidden)
				if len(r.Cookies()) != 0 {
					t.Errorf("%s: a refused request set a cookie", path)
				}
			}
			if n := len(e.src.CompactCalls()) + len(e.src.CancelCalls()); n != 0 {
				t.Errorf("%d Source calls from cross-origin requests", n)
			}
			if !strings.Contains(e.logs.String(), "cross-origin request refused") {
				t.Error("refusal not logged")
			}
		})
	}

	t.Run("a trusted origin is accepted", func(t *testing.T) {
		e := newEnv(t, web.Config{TrustedOrigins: []string{"https://evil.example"}})
		wantStatus(t, e.post("/jobs/"+webtest.QueuedOrders+"/cancel", nil, crossSite), http.StatusSeeOther)
	})
	t.Run("a cross-origin GET still reads", func(t *testing.T) {
		e := newEnv(t, web.Config{})
		wantStatus(t, e.get("/", crossSite), http.StatusOK)
	})
}

func TestTokenGuardsActions(t *testing.T) {
	const token = "s3cret-token-value"
	e := newEnv(t, web.Config{Token: token})
	compact := "/collections/" + webtest.Orders + "/compact"

	// Pages stay readable; they offer a sign-in link instead of forms.
	p := e.get("/collections/" + webtest.Orders).page(t)
	if len(p.ByTestID("compact-form")) != 0 {
		t.Error("compact form shown before sign-in")
	}
	if links := p.ByTestID("signin-link"); len(links) == 0 || !strings.HasPrefix(links[0].Attrs["href"], "/login?next=%2Fcollections%2F") {
		t.Errorf("sign-in links %v", attrs(links, "href"))
	}
	if len(e.get("/").page(t).ByTestID("cancel-form")) != 0 {
		t.Error("cancel forms shown before sign-in")
	}

	// Without the cookie an action answers 401 with the sign-in form.
	r := e.post(compact, url.Values{"reason": {"x"}})
	wantStatus(t, r, http.StatusUnauthorized)
	form := r.page(t).One(t, "login-form")
	if next := form.All(func(n *node) bool { return n.Attrs["name"] == "next" }); len(next) != 1 || next[0].Attrs["value"] != "/collections/"+webtest.Orders {
		t.Errorf("login form next %v", next)
	}

	// A wrong token is refused and sets nothing.
	r = e.post("/login", url.Values{"token": {"wrong"}, "next": {"/collections/" + webtest.Orders}})
	wantStatus(t, r, http.StatusUnauthorized)
	r.page(t).One(t, "login-error")
	if len(r.Cookies()) != 0 {
		t.Error("a wrong token set a cookie")
	}

	// The right token sets the cookie and goes back.
	r = e.post("/login", url.Values{"token": {token}, "next": {"/collections/" + webtest.Orders}})
	wantRedirect(t, r, "/collections/"+webtest.Orders+"?flash=signed-in")
	cookies := r.Cookies()
	if len(cookies) != 1 {
		t.Fatalf("cookies %v", cookies)
	}
	c := cookies[0]
	if c.Name != web.CookieName || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" || c.Secure || c.MaxAge <= 0 {
		t.Errorf("cookie %+v: want HttpOnly, SameSite=Strict, Path=/, not Secure over plain HTTP, persistent", c)
	}
	if strings.Contains(c.Value, token) {
		t.Error("the cookie holds the token in clear")
	}
	session := withCookie(&http.Cookie{Name: c.Name, Value: c.Value})

	// With the cookie the page offers the form and the action works.
	if len(e.get("/collections/"+webtest.Orders, session).page(t).ByTestID("compact-form")) != 1 {
		t.Error("no compact form after sign-in")
	}
	wantStatus(t, e.post(compact, url.Values{"reason": {"signed in"}}, session), http.StatusSeeOther)
	if calls := e.src.CompactCalls(); len(calls) != 1 || calls[0].Reason != "signed in" {
		t.Errorf("Compact calls %v", calls)
	}

	// Forged cookies and bearer tokens.
	for name, mod := range map[string]func(*http.Request){
		"the raw token as cookie": withCookie(&http.Cookie{Name: web.CookieName, Value: token}),
		"an altered cookie":       withCookie(&http.Cookie{Name: web.CookieName, Value: alter(c.Value)}),
		"a wrong bearer token":    func(r *http.Request) { r.Header.Set("Authorization", "Bearer nope") },
	} {
		if r := e.post(compact, nil, mod); r.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s: status %d, want 401", name, r.StatusCode)
		}
	}
	bearer := func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+token) }
	wantStatus(t, e.post(compact, nil, bearer), http.StatusSeeOther)
	if n := len(e.src.CompactCalls()); n != 2 {
		t.Errorf("%d Compact calls, want 2 (cookie, bearer)", n)
	}

	// Over TLS the cookie is Secure.
	r = e.post("/login", url.Values{"token": {token}}, func(r *http.Request) { r.TLS = &tls.ConnectionState{} })
	if cs := r.Cookies(); len(cs) != 1 || !cs[0].Secure {
		t.Errorf("cookie over TLS %+v, want Secure", cs)
	}

	// Sign out clears the cookie.
	r = e.post("/logout", nil, session)
	wantRedirect(t, r, "/?flash=signed-out")
	if cs := r.Cookies(); len(cs) != 1 || cs[0].MaxAge >= 0 || cs[0].Value != "" {
		t.Errorf("logout cookie %+v", cs)
	}

	if strings.Contains(e.logs.String(), token) {
		t.Error("the token is in the log")
	}
}

func TestProtectReads(t *testing.T) {
	const token = "read-token"
	e := newEnv(t, web.Config{Token: token, ProtectReads: true})
	for _, path := range []string{"/", "/collections", "/collections/" + webtest.Orders, "/jobs/" + webtest.Failed, "/no/page"} {
		r := e.get(path)
		wantStatus(t, r, http.StatusUnauthorized)
		r.page(t).One(t, "login-form")
		if strings.Contains(r.body, "orders") {
			t.Errorf("%s: the sign-in page shows data", path)
		}
	}
	if r := e.get("/?partial=1"); r.StatusCode != http.StatusUnauthorized || strings.Contains(r.body, "<form") {
		t.Errorf("partial without sign-in: %d %q", r.StatusCode, r.body)
	}
	wantStatus(t, e.get("/events"), http.StatusUnauthorized)
	wantStatus(t, e.get("/static/style.css"), http.StatusOK) // the sign-in page needs it

	session := withCookie(signIn(t, token))
	for _, path := range []string{"/", "/collections", "/collections/" + webtest.Orders, "/jobs/" + webtest.Failed} {
		wantStatus(t, e.get(path, session), http.StatusOK)
	}
	if n := len(e.src.Queries()); n == 0 {
		t.Error("no Source reads after sign-in")
	}
}

func TestLoginWithoutTokenRedirects(t *testing.T) {
	e := newEnv(t, web.Config{})
	wantRedirect(t, e.get("/login?next=%2Fcollections"), "/collections")
	p := e.get("/").page(t)
	if len(p.ByTestID("signin-link")) != 0 || len(p.ByTestID("logout-form")) != 0 {
		t.Error("sign-in controls without a token")
	}
}

// alter changes the first character of s.
func alter(s string) string {
	if s[0] == 'A' {
		return "B" + s[1:]
	}
	return "A" + s[1:]
}

func TestPauseAndResumeFromThePage(t *testing.T) {
	e := newEnv(t, web.Config{})
	p := e.get("/").page(t)
	if state := p.One(t, "pause-state"); state.Attrs["data-paused"] != "false" || !strings.Contains(state.Text(), "running") {
		t.Fatalf("dashboard pause state %q (%v)", state.Text(), state.Attrs)
	}

	// Pause everything: the banner says so, with the reason and who.
	r := e.post("/pause", url.Values{"reason": {"  storage maintenance "}, "next": {"/"}})
	wantRedirect(t, r, "/?flash=paused")
	calls := e.src.PauseCalls()
	if len(calls) != 1 || calls[0].CollectionID != "" || !calls[0].Paused || calls[0].Reason != "storage maintenance" || !strings.HasPrefix(calls[0].By, "status page (") {
		t.Fatalf("Pause calls %+v", calls)
	}
	p = e.get(r.Header.Get("Location")).page(t)
	banner := p.One(t, "pause-state")
	if banner.Attrs["data-paused"] != "true" || !strings.Contains(banner.Text(), "storage maintenance") || !strings.Contains(banner.Text(), "One-off compactions still run") {
		t.Fatalf("banner %q", banner.Text())
	}
	if !strings.Contains(p.One(t, "flash").Text(), "Automatic compaction paused") {
		t.Errorf("flash %q", p.One(t, "flash").Text())
	}
	p.One(t, "resume-button")
	wantRedirect(t, e.post("/resume", url.Values{}), "/?flash=resumed")

	// One collection: its page shows the state and flips it.
	path := "/collections/" + webtest.Orders
	wantRedirect(t, e.post(path+"/pause", url.Values{"reason": {"reindex"}}), path+"?flash=paused")
	fields := e.get(path).page(t).One(t, "collection-fields")
	if !strings.Contains(fields.Text(), "paused since") || !strings.Contains(fields.Text(), "reindex") {
		t.Errorf("collection fields lack the pause:\n%s", fields.Text())
	}
	wantRedirect(t, e.post(path+"/resume", url.Values{}), path+"?flash=resumed")
	if calls := e.src.PauseCalls(); len(calls) != 4 || calls[2].CollectionID != webtest.Orders || calls[3].Paused {
		t.Fatalf("Pause calls %+v", calls)
	}

	wantStatus(t, e.post("/collections/no-such-collection/pause", url.Values{}), http.StatusNotFound)
	wantStatus(t, e.get("/pause"), http.StatusMethodNotAllowed)
	long := strings.Repeat("r", 1001)
	wantStatus(t, e.post("/pause", url.Values{"reason": {long}}), http.StatusBadRequest)
}

func TestPauseNeedsTheToken(t *testing.T) {
	e := newEnv(t, web.Config{Token: "s3cret-token-value"})
	if len(e.get("/").page(t).ByTestID("pause-form")) != 0 {
		t.Error("pause form shown before sign-in")
	}
	wantStatus(t, e.post("/pause", url.Values{}), http.StatusUnauthorized)
	if calls := e.src.PauseCalls(); len(calls) != 0 {
		t.Fatalf("an unauthenticated pause reached the Source: %+v", calls)
	}
}

func TestPlanPageListsPlannedAndSkipped(t *testing.T) {
	e := newEnv(t, web.Config{})
	e.src.SetPlan([]web.PlanEntry{
		{CollectionID: webtest.Orders, CollectionName: "orders", Decision: "run", Reason: "backlog of 1200 records (minimum 10)", Backlog: 1200},
		{CollectionID: webtest.Hostile, CollectionName: "<b>hostile</b>", Decision: "dead-lettered", Reason: "dead-lettered after 5 consecutive failures", Backlog: 300},
		{CollectionID: webtest.Debian, CollectionName: "debian", Decision: "empty", Reason: "nothing to compact"},
	})
	p := e.get("/plan").page(t)
	planned, skipped := p.ByTestID("planned-row"), p.ByTestID("skipped-row")
	if len(planned) != 1 || !strings.Contains(planned[0].Text(), "minimum 10") {
		t.Fatalf("planned rows %v", attrs(planned, "data-decision"))
	}
	if len(skipped) != 1 || skipped[0].Attrs["data-decision"] != "dead-lettered" || !strings.Contains(skipped[0].Text(), "<b>hostile</b>") {
		t.Fatalf("skipped rows %v", attrs(skipped, "data-decision"))
	}
}

func TestPagesShowCollectionsAtRiskAndTheNextWindow(t *testing.T) {
	e := newEnv(t, web.Config{})
	risk := e.get("/").page(t).ByTestID("at-risk-item")
	if len(risk) != 1 || risk[0].Attrs["data-collection-id"] != webtest.Orders || !strings.Contains(risk[0].Text(), "debt 1.20") {
		t.Fatalf("at-risk items %v; want orders with debt 1.20 (users, at 0.07, is not at risk)", attrs(risk, "data-collection-id"))
	}
	p := e.get("/plan").page(t)
	windows, debts := p.ByTestID("plan-window"), p.ByTestID("plan-debt")
	var texts, atRisk []string
	for i := range windows {
		texts = append(texts, windows[i].Text())
		atRisk = append(atRisk, debts[i].Attrs["data-at-risk"])
	}
	if want := []string{"any time", "any time", "Tue 1 Dec 00:00 UTC to Tue 1 Dec 04:00 UTC"}; !slices.Equal(texts, want) {
		t.Errorf("plan windows %q; want %q", texts, want)
	}
	if want := []string{"true", "false", "false"}; !slices.Equal(atRisk, want) {
		t.Errorf("plan at-risk flags %q; want %q", atRisk, want)
	}
}

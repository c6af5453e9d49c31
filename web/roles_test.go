package web_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/compactorhq/compactor/internal/audit"
	"github.com/compactorhq/compactor/internal/auth"
	"github.com/compactorhq/compactor/web"
	"github.com/compactorhq/compactor/web/webtest"
)

// auditedSource is the fixture Source that records the actor of each
// compaction it is asked for, and serves an audit log.
type auditedSource struct {
	*webtest.Source
	mu     sync.Mutex
	actors []audit.Actor
}

func (s *auditedSource) Compact(ctx context.Context, collectionID, reason string) (string, error) {
	a, _ := audit.ActorFrom(ctx)
	s.mu.Lock()
	s.actors = append(s.actors, a)
	s.mu.Unlock()
	return s.Source.Compact(ctx, collectionID, reason)
}

func (s *auditedSource) RecentAuditEvents(context.Context, string, int) ([]audit.Event, error) {
	return []audit.Event{{ID: 2, Time: webtest.Now.Add(-time.Minute), Principal: "ops", Role: "operator", Source: "10.0.0.9:4000",
		Action: audit.ActionCompact, CollectionID: webtest.Orders, Target: webtest.Orders, Reason: "<script>x</script>", JobID: webtest.QueuedOrders,
		After: `{"created":true}`}}, nil
}

func credentials(t *testing.T, lines ...string) *auth.Credentials {
	t.Helper()
	var b strings.Builder
	for _, l := range lines {
		name, role, _ := strings.Cut(l, " ")
		s := sha256.Sum256([]byte(name + "-token"))
		b.WriteString(name + " " + role + " " + hex.EncodeToString(s[:]) + "\n")
	}
	c, err := auth.ParseFile(strings.NewReader(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func roleEnv(t *testing.T) (*env, *auditedSource, *auth.Authenticator) {
	t.Helper()
	a := auth.NewAuthenticator(credentials(t, "viewer reader", "app writer", "ops operator", "boss admin"))
	src := &auditedSource{Source: webtest.Fixture()}
	h, err := web.NewHandler(src, web.Config{Auth: a, Now: func() time.Time { return webtest.Now }})
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, src: src.Source, h: h}, src, a
}

// login signs in with name's token and returns the session cookie.
func (e *env) login(name string) func(*http.Request) {
	e.t.Helper()
	r := e.post("/login", url.Values{"token": {name + "-token"}})
	wantStatus(e.t, r, http.StatusSeeOther)
	for _, c := range r.Cookies() {
		if c.Name == web.CookieName {
			return withCookie(&http.Cookie{Name: c.Name, Value: c.Value})
		}
	}
	e.t.Fatalf("no session cookie for %s", name)
	return nil
}

// TestPageActionsFollowRoles: a reader or writer signed in sees no action
// forms, is told the role needed, and is refused (403) when posting one; an
// operator or admin sees and uses them, as itself (the actor of the action);
// the audit view is for operators and admins; a rotated credential's
// session is refused.
func TestPageActionsFollowRoles(t *testing.T) {
	e, src, a := roleEnv(t)
	coll := "/collections/" + webtest.Orders
	for _, name := range []string{"viewer", "app"} {
		session := e.login(name)
		p := e.get(coll, session).page(t)
		if len(p.ByTestID("compact-form")) != 0 || len(p.ByTestID("pause-form")) != 0 {
			t.Errorf("%s sees the action forms of a collection", name)
		}
		if msg := p.One(t, "role-refused").Text(); !strings.Contains(msg, "needs role operator or admin") || !strings.Contains(msg, name) {
			t.Errorf("%s is told %q", name, msg)
		}
		if got := p.One(t, "principal").Text(); !strings.Contains(got, name) {
			t.Errorf("the header shows %q for %s", got, name)
		}
		if len(e.get("/", session).page(t).ByTestID("pause-form")) != 0 {
			t.Errorf("%s sees the pause form of the dashboard", name)
		}
		if len(e.get("/jobs/"+webtest.QueuedOrders, session).page(t).ByTestID("cancel-form")) != 0 {
			t.Errorf("%s sees the cancel form", name)
		}
		r := e.post(coll+"/compact", url.Values{}, session)
		wantStatus(t, r, http.StatusForbidden)
		if !strings.Contains(r.body, "needs role operator or admin") {
			t.Errorf("the refusal does not name the role: %s", r.body)
		}
		wantStatus(t, e.post("/jobs/"+webtest.QueuedOrders+"/cancel", url.Values{}, session), http.StatusForbidden)
		wantStatus(t, e.post("/pause", url.Values{}, session), http.StatusForbidden)
		wantStatus(t, e.get("/audit", session), http.StatusForbidden)
		if strings.Contains(e.get("/", session).body, `href="/audit"`) {
			t.Errorf("%s sees the link to the audit view", name)
		}
	}
	if n := len(e.src.CompactCalls()); n != 0 {
		t.Fatalf("%d compactions asked for by roles that may not", n)
	}

	for _, name := range []string{"ops", "boss"} {
		session := e.login(name)
		p := e.get(coll, session).page(t)
		p.One(t, "compact-form")
		if len(p.ByTestID("role-refused")) != 0 {
			t.Errorf("%s is told its role may not act", name)
		}
		wantStatus(t, e.post(coll+"/compact", url.Values{}, session), http.StatusSeeOther)
		audited := e.get("/audit", session)
		wantStatus(t, audited, http.StatusOK)
		ap := audited.page(t)
		if got := ap.One(t, "audit-principal").Text(); got != "ops" {
			t.Errorf("audit view principal %q", got)
		}
		if strings.Contains(audited.body, "<script>x") {
			t.Error("the audit view does not escape a reason")
		}
		if !strings.Contains(e.get("/", session).body, `href="/audit"`) {
			t.Errorf("%s does not see the link to the audit view", name)
		}
	}
	src.mu.Lock()
	if len(src.actors) != 2 || src.actors[0].Name != "ops" || src.actors[0].Role != "operator" || src.actors[1].Name != "boss" || src.actors[1].Role != "admin" {
		t.Errorf("actors of the compactions: %+v", src.actors)
	}
	src.mu.Unlock()

	// Not signed in: the sign-in page, for actions and the audit view.
	wantStatus(t, e.post(coll+"/compact", url.Values{}), http.StatusUnauthorized)
	wantStatus(t, e.get("/audit"), http.StatusUnauthorized)

	// A rotated token ends its sessions.
	session := e.login("ops")
	a.Set(credentials(t, "viewer reader"))
	wantStatus(t, e.post(coll+"/compact", url.Values{}, session), http.StatusUnauthorized)
}

// TestJobPageShowsWhoTriggeredIt: the job page names who asked for it, and
// the scheduler for its own jobs.
func TestJobPageShowsWhoTriggeredIt(t *testing.T) {
	e := newEnv(t, web.Config{})
	body := e.get("/jobs/" + webtest.QueuedOrders).body
	if !strings.Contains(body, "Triggered by") {
		t.Fatalf("the job page has no Triggered by:\n%s", body)
	}
}

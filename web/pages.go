package web

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"

	"github.com/a-h/templ"

	"github.com/compactorhq/compactor/internal/auth"
)

// isPartial reports whether the request wants only the content of <main>.
func isPartial(r *http.Request) bool { return r.URL.Query().Get("partial") == "1" }

// here is the request's own path and query, without partial and flash: the
// place to come back to after signing in or acting.
func here(r *http.Request) string { return localPath(r.URL.RequestURI()) }

func (h *handler) meta(r *http.Request, title, section string, live bool) pageMeta {
	p, signedIn := h.principal(r)
	m := pageMeta{
		Title:     title,
		Section:   section,
		Live:      live,
		StyleURL:  h.static.url("style.css"),
		ScriptURL: h.static.url("app.js"),
		IconURL:   h.static.url("favicon.svg"),
		Flash:     flashFor(r.URL.Query()),
		Auth: authView{
			Required:  h.auth.Enabled(),
			SignedIn:  signedIn,
			Principal: p.Name,
			Role:      string(p.Role),
			MayAudit:  h.hasAudit() && h.may(r, auth.RoleOperator),
			LoginURL:  "/login?" + url.Values{"next": {here(r)}}.Encode(),
			LogoutURL: "/logout",
		},
	}
	if live {
		m.Refresh = h.cfg.RefreshSeconds
	}
	if b := h.cfg.Build; b.Version != "" {
		m.Build = buildView{Version: b.Version, Revision: b.Revision, Full: b.Revision, Time: b.Time, Modified: b.Modified}
		if len(b.Revision) > 12 {
			m.Build.Revision = b.Revision[:12]
		}
	}
	return m
}

func (h *handler) act(r *http.Request) actView {
	p, signedIn := h.principal(r)
	return actView{
		Allowed:   h.may(r, auth.RoleOperator),
		SignedIn:  signedIn,
		Principal: p.Name,
		Role:      string(p.Role),
		Next:      here(r),
		LoginURL:  "/login?" + url.Values{"next": {here(r)}}.Encode(),
	}
}

// render writes a page: the layout around main, or main alone for a partial
// request. It renders into a buffer first, so that a failed render becomes
// a clean 500 rather than half a page.
func (h *handler) render(w http.ResponseWriter, r *http.Request, status int, m pageMeta, main templ.Component) {
	var c templ.Component
	if isPartial(r) {
		c = main
	} else {
		c = layout(m, main)
	}
	var buf bytes.Buffer
	if err := c.Render(r.Context(), &buf); err != nil {
		if r.Context().Err() != nil {
			return // the client went away
		}
		h.log.Error("render page", "path", r.URL.Path, "err", err)
		w.Header().Set("Cache-Control", "no-store")
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		_, _ = w.Write(buf.Bytes())
	}
}

// fail answers a Source error: 404 for ErrNotFound, 500 with a generic
// message otherwise (the detail goes to the log, never to the page).
func (h *handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, ErrNotFound):
		h.renderError(w, r, http.StatusNotFound, "")
	case errors.Is(err, context.Canceled) && r.Context().Err() != nil:
		// The client went away; nobody reads an answer.
	default:
		h.log.Error("serve page", "method", r.Method, "path", r.URL.Path, "err", err)
		h.renderError(w, r, http.StatusInternalServerError, "")
	}
}

func (h *handler) renderError(w http.ResponseWriter, r *http.Request, status int, msg string) {
	v := errorView{Status: strconv.Itoa(status), Title: http.StatusText(status), Message: msg}
	switch status {
	case http.StatusNotFound:
		v.Title = "Not found"
		if v.Message == "" {
			v.Message = "There is no such page, job or collection. It may have been deleted, or have left the history."
		}
	case http.StatusInternalServerError:
		v.Title = "Something went wrong"
		if v.Message == "" {
			v.Message = "The page could not be built. The details are in the server's log."
		}
	}
	h.render(w, r, status, h.meta(r, v.Title, "", false), errorMain(v))
}

func (h *handler) renderLogin(w http.ResponseWriter, r *http.Request, status int, next, notice, errMsg string) {
	if isPartial(r) {
		http.Error(w, http.StatusText(status), status)
		return
	}
	m := h.meta(r, "Sign in", "login", false)
	m.Flash = nil
	h.render(w, r, status, m, loginMain(loginView{Next: localPath(next), Notice: notice, Error: errMsg}))
}

// guardRead answers 401 with the sign-in page when reads need the token and
// the request lacks it. It reports whether the request may go on.
func (h *handler) guardRead(w http.ResponseWriter, r *http.Request) bool {
	if h.mayRead(r) {
		return true
	}
	h.renderLogin(w, r, http.StatusUnauthorized, here(r), "Sign in to see the compactor's status.", "")
	return false
}

func (h *handler) notFound(w http.ResponseWriter, r *http.Request) {
	if !h.guardRead(w, r) {
		return
	}
	h.renderError(w, r, http.StatusNotFound, "")
}

func (h *handler) dashboard(w http.ResponseWriter, r *http.Request) {
	if !h.guardRead(w, r) {
		return
	}
	ctx := r.Context()
	f := parseDashboardFilter(r.URL.Query())
	d := dashboardData{Filter: f, Act: h.act(r)}
	var err error
	if d.Running, err = h.src.Jobs(ctx, JobQuery{States: []string{StateRunning}}); err != nil {
		h.fail(w, r, err)
		return
	}
	if d.Queued, err = h.src.Queue(ctx); err != nil {
		h.fail(w, r, err)
		return
	}
	if d.Nodes, err = h.src.Nodes(ctx); err != nil {
		h.fail(w, r, err)
		return
	}
	if d.Controls, err = h.src.Controls(ctx); err != nil {
		h.fail(w, r, err)
		return
	}
	if d.History, err = h.src.Jobs(ctx, f.historyQuery()); err != nil {
		h.fail(w, r, err)
		return
	}
	if d.Failed, err = h.src.Jobs(ctx, JobQuery{States: []string{StateFailed}, Limit: failedScanLimit}); err != nil {
		h.fail(w, r, err)
		return
	}
	if d.Succeeded, err = h.src.Jobs(ctx, JobQuery{States: []string{StateSucceeded}, Limit: throughputScanLimit}); err != nil {
		h.fail(w, r, err)
		return
	}
	if d.Collections, err = h.src.CollectionSummary(ctx, SummaryQuery{Largest: backlogShown, Names: filterChoices}); err != nil {
		h.fail(w, r, err)
		return
	}
	v := buildDashboard(h.cfg.Now(), d)
	h.render(w, r, http.StatusOK, h.meta(r, "Compaction status", "dashboard", true), dashboardMain(v))
}

func (h *handler) jobPage(w http.ResponseWriter, r *http.Request) {
	if !h.guardRead(w, r) {
		return
	}
	j, err := h.src.Job(r.Context(), r.PathValue("id"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if j.CollectionName == "" && j.CollectionID != "" {
		// Best effort: a deleted collection keeps its jobs, shown by id.
		if c, err := h.src.Collection(r.Context(), j.CollectionID); err == nil {
			j.CollectionName = c.Name
		} else if !errors.Is(err, ErrNotFound) {
			h.fail(w, r, err)
			return
		}
	}
	var capBps int64
	if j.State == StateRunning {
		c, err := h.src.Controls(r.Context())
		if err != nil {
			h.fail(w, r, err)
			return
		}
		capBps = c.MaxThroughput
	}
	v := buildJob(h.cfg.Now(), j, capBps, h.act(r))
	h.render(w, r, http.StatusOK, h.meta(r, v.Title, "", true), jobMain(v))
}

func (h *handler) collectionsPage(w http.ResponseWriter, r *http.Request) {
	if !h.guardRead(w, r) {
		return
	}
	s, q := parseCollectionQuery(r.URL.Query())
	p, err := h.src.CollectionsPage(r.Context(), q)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	v := buildCollections(h.cfg.Now(), p, s, q)
	h.render(w, r, http.StatusOK, h.meta(r, "Collections", "collections", true), collectionsMain(v))
}

func (h *handler) collectionPage(w http.ResponseWriter, r *http.Request) {
	if !h.guardRead(w, r) {
		return
	}
	ctx := r.Context()
	id := r.PathValue("id")
	c, err := h.src.Collection(ctx, id)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	jobs, err := h.src.Jobs(ctx, JobQuery{CollectionID: id, Limit: collectionJobsShown})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	history, err := h.src.BacklogHistory(ctx, id)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	dead, err := h.src.DeadLetterHistory(ctx, id)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	v := buildCollection(h.cfg.Now(), c, jobs, history, h.act(r))
	v.DeadLetters = buildDeadLetters(h.cfg.Now(), dead)
	h.render(w, r, http.StatusOK, h.meta(r, c.Name, "collections", true), collectionMain(v))
}

// planPage handles GET /plan: what the scheduler would do on its next run;
// with ?estimate=1, each planned job priced (a manifest and a log scan per
// planned collection, so it is asked for, not the default).
func (h *handler) planPage(w http.ResponseWriter, r *http.Request) {
	if !h.guardRead(w, r) {
		return
	}
	ctx := r.Context()
	c, err := h.src.Controls(ctx)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	estimate := r.URL.Query().Get("estimate") == "1"
	entries, err := h.src.Plan(ctx, estimate)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	v := buildPlan(h.cfg.Now(), c, entries, h.act(r))
	v.Estimated = estimate
	h.render(w, r, http.StatusOK, h.meta(r, "Scheduler plan", "plan", false), planMain(v))
}

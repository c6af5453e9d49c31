package web

import (
	"context"
	"net/http"
	"time"

	"github.com/compactorhq/compactor/internal/audit"
	"github.com/compactorhq/compactor/internal/auth"
)

// CookieName is the sign-in cookie set by POST /login.
const CookieName = "compactor_session"

const (
	cookieMaxAge = 7 * 24 * time.Hour
	maxFormBytes = 64 << 10
)

// principal returns who r is, and whether r is signed in (a valid sign-in
// cookie or bearer token). Without credentials every request is
// "anonymous" with role admin (and not signed in); otherwise a request not
// signed in is "anonymous" with role reader. The cookie (made by
// auth.Authenticator.Session) names its principal and is checked against
// the credentials in force, so it stops working when its token is rotated
// or its credential removed.
func (h *handler) principal(r *http.Request) (auth.Principal, bool) {
	if !h.auth.Enabled() {
		return auth.Principal{Name: auth.Anonymous, Role: auth.RoleAdmin}, false
	}
	if c, err := r.Cookie(CookieName); err == nil {
		if p, ok := h.auth.SessionPrincipal(c.Value); ok {
			return p, true
		}
	}
	p, err := h.auth.Authenticate(r.Header)
	if err != nil {
		return auth.Principal{Name: auth.Anonymous, Role: auth.RoleReader}, false
	}
	return p, true
}

// may reports whether r's principal may do what needs role need: with
// credentials configured, only when signed in.
func (h *handler) may(r *http.Request, need auth.Role) bool {
	p, signedIn := h.principal(r)
	return (signedIn || !h.auth.Enabled()) && p.Role.Allows(need)
}

// mayRead reports whether r may see pages.
func (h *handler) mayRead(r *http.Request) bool {
	if !h.cfg.ProtectReads {
		return true
	}
	_, signedIn := h.principal(r)
	return signedIn
}

// actorContext returns r's context carrying r's principal as the actor of
// the actions it asks for (their audit events).
func (h *handler) actorContext(r *http.Request) context.Context {
	p, _ := h.principal(r)
	return audit.WithActor(r.Context(), audit.Actor{Name: p.Name, Role: string(p.Role), Source: r.RemoteAddr})
}

func (h *handler) loginPage(w http.ResponseWriter, r *http.Request) {
	next := localPath(r.URL.Query().Get("next"))
	if !h.auth.Enabled() {
		http.Redirect(w, r, next, http.StatusSeeOther)
		return
	}
	h.renderLogin(w, r, http.StatusOK, next, "", "")
}

func (h *handler) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		h.renderError(w, r, http.StatusBadRequest, "The form could not be read.")
		return
	}
	next := localPath(r.PostForm.Get("next"))
	if !h.auth.Enabled() {
		http.Redirect(w, r, next, http.StatusSeeOther)
		return
	}
	p, ok := h.auth.Credentials().Lookup(r.PostForm.Get("token"))
	session := ""
	if ok {
		session, ok = h.auth.Session(p.Name)
	}
	if !ok {
		h.log.Warn("sign-in refused", "remote", r.RemoteAddr)
		h.renderLogin(w, r, http.StatusUnauthorized, next, "", "That token is not correct.")
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name:     CookieName,
		Value:    session,
		Path:     "/",
		MaxAge:   int(cookieMaxAge / time.Second),
		HttpOnly: true,
		Secure:   r.TLS != nil,
		SameSite: http.SameSiteStrictMode,
	})
	h.log.Info("signed in", "remote", r.RemoteAddr, "principal", p.Name, "role", p.Role)
	http.Redirect(w, r, withFlash(next, "signed-in", ""), http.StatusSeeOther)
}

func (h *handler) logout(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{
		Name:     CookieName,
		Value:    "",
		Path:     "/",
		MaxAge:   -1,
		HttpOnly: true,
		Secure:   r.TLS != nil,
		SameSite: http.SameSiteStrictMode,
	})
	http.Redirect(w, r, withFlash("/", "signed-out", ""), http.StatusSeeOther)
}

// crossOrigin answers a request refused by the cross-origin protection.
func (h *handler) crossOrigin(w http.ResponseWriter, r *http.Request) {
	h.log.Warn("cross-origin request refused", "method", r.Method, "path", r.URL.Path,
		"origin", r.Header.Get("Origin"), "sec_fetch_site", r.Header.Get("Sec-Fetch-Site"))
	h.renderError(w, r, http.StatusForbidden, "Cross-origin requests are not accepted. Use the form on this site.")
}

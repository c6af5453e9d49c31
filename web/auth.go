package web

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"time"
)

// CookieName is the sign-in cookie set by POST /login.
const CookieName = "compactor_session"

const (
	cookieMaxAge = 7 * 24 * time.Hour
	maxFormBytes = 64 << 10
)

// sessionValue is the cookie value for a token: a MAC of a fixed label
// keyed with the token. It proves knowledge of the token without the token
// itself sitting in the browser (a stolen cookie does not open the RPC API),
// needs no server state, and changes when the token is rotated.
func sessionValue(token string) string {
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte("compactor web session v1"))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// authorized reports whether r may act (and read, with ProtectReads): no
// token configured, a valid sign-in cookie, or a bearer token.
func (h *handler) authorized(r *http.Request) bool {
	if h.cfg.Token == "" {
		return true
	}
	if c, err := r.Cookie(CookieName); err == nil {
		if subtle.ConstantTimeCompare([]byte(c.Value), []byte(h.session)) == 1 {
			return true
		}
	}
	return h.token.CheckHeader(r.Header) == nil
}

// mayRead reports whether r may see pages.
func (h *handler) mayRead(r *http.Request) bool {
	return !h.cfg.ProtectReads || h.authorized(r)
}

func (h *handler) loginPage(w http.ResponseWriter, r *http.Request) {
	next := localPath(r.URL.Query().Get("next"))
	if h.cfg.Token == "" {
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
	if h.cfg.Token == "" {
		http.Redirect(w, r, next, http.StatusSeeOther)
		return
	}
	if !h.token.Matches(r.PostForm.Get("token")) {
		h.log.Warn("sign-in refused", "remote", r.RemoteAddr)
		h.renderLogin(w, r, http.StatusUnauthorized, next, "", "That token is not correct.")
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name:     CookieName,
		Value:    h.session,
		Path:     "/",
		MaxAge:   int(cookieMaxAge / time.Second),
		HttpOnly: true,
		Secure:   r.TLS != nil,
		SameSite: http.SameSiteStrictMode,
	})
	h.log.Info("signed in", "remote", r.RemoteAddr)
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

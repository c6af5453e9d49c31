package web

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/compactorhq/compactor/internal/auth"
)

// maxReasonBytes bounds the reason of a one-off compaction from the page.
const maxReasonBytes = 1000

const defaultReason = "compact now from the status page"

// actionRole is the role the page's actions need (compact, cancel, pause,
// resume): the role of the same calls on the RPC API (rpc.ProcedureRoles).
const actionRole = auth.RoleOperator

// actionForm reads an action's form and checks that its principal may act.
// It answers the request itself (400; 401 with the sign-in page when not
// signed in; 403 naming the role needed when the principal's role does not
// allow it) and returns ok=false when the action must not go on.
func (h *handler) actionForm(w http.ResponseWriter, r *http.Request, fallbackNext, notice string) (next string, ok bool) {
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		h.renderError(w, r, http.StatusBadRequest, "The form could not be read.")
		return "", false
	}
	next = fallbackNext
	if n := r.PostForm.Get("next"); n != "" {
		next = localPath(n)
	}
	if p, signedIn := h.principal(r); !h.may(r, actionRole) {
		if !signedIn {
			h.renderLogin(w, r, http.StatusUnauthorized, next, notice, "")
		} else {
			h.log.Warn("page action refused", "path", r.URL.Path, "principal", p.Name, "role", p.Role)
			h.renderError(w, r, http.StatusForbidden, fmt.Sprintf("This action needs role %s or admin; %s has role %s.", actionRole, p.Name, p.Role))
		}
		return "", false
	}
	return next, true
}

// formReason reads the form's reason, trimmed. It answers 400 itself and
// returns ok=false for text that is not UTF-8 or over maxReasonBytes.
func (h *handler) formReason(w http.ResponseWriter, r *http.Request) (reason string, ok bool) {
	reason = strings.TrimSpace(r.PostForm.Get("reason"))
	switch {
	case !utf8.ValidString(reason):
		h.renderError(w, r, http.StatusBadRequest, "The reason is not valid UTF-8 text.")
		return "", false
	case len(reason) > maxReasonBytes:
		h.renderError(w, r, http.StatusBadRequest, "The reason is too long: at most 1000 bytes.")
		return "", false
	}
	return reason, true
}

// compact handles POST /collections/{id}/compact: a one-off compaction.
func (h *handler) compact(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	next, ok := h.actionForm(w, r, collectionURL(id), "Sign in to compact a collection.")
	if !ok {
		return
	}
	reason, ok := h.formReason(w, r)
	if !ok {
		return
	}
	if reason == "" {
		reason = defaultReason
	}
	jobID, err := h.src.Compact(h.actorContext(r), id, reason)
	switch {
	case errors.Is(err, ErrConflict):
		h.log.Info("compaction refused", "collection", id, "err", err)
		http.Redirect(w, r, withFlash(next, "compact-refused", ""), http.StatusSeeOther)
		return
	case err != nil:
		h.fail(w, r, err)
		return
	}
	h.log.Info("compaction requested", "collection", id, "job", jobID)
	http.Redirect(w, r, withFlash(next, "compact-queued", jobID), http.StatusSeeOther)
}

// cancel handles POST /jobs/{id}/cancel.
func (h *handler) cancel(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	next, ok := h.actionForm(w, r, jobURL(id), "Sign in to cancel a compaction.")
	if !ok {
		return
	}
	err := h.src.Cancel(h.actorContext(r), id)
	switch {
	case errors.Is(err, ErrConflict):
		http.Redirect(w, r, withFlash(next, "cancel-refused", ""), http.StatusSeeOther)
		return
	case err != nil:
		h.fail(w, r, err)
		return
	}
	h.log.Info("cancellation requested", "job", id)
	http.Redirect(w, r, withFlash(next, "cancel-requested", ""), http.StatusSeeOther)
}

// pause handles POST /pause (every collection) and POST
// /collections/{id}/pause: automatic compaction stops being scheduled, one-off
// compactions still run.
func (h *handler) pause(w http.ResponseWriter, r *http.Request) {
	h.setPause(w, r, true)
}

// resume handles POST /resume and POST /collections/{id}/resume.
func (h *handler) resume(w http.ResponseWriter, r *http.Request) {
	h.setPause(w, r, false)
}

func (h *handler) setPause(w http.ResponseWriter, r *http.Request, paused bool) {
	id := r.PathValue("id")
	fallback, notice := "/", "Sign in to pause or resume automatic compaction."
	if id != "" {
		fallback = collectionURL(id)
	}
	next, ok := h.actionForm(w, r, fallback, notice)
	if !ok {
		return
	}
	reason, ok := h.formReason(w, r)
	if !ok {
		return
	}
	by := "status page (" + clientHost(r) + ")"
	if p, signedIn := h.principal(r); signedIn {
		by = p.Name + " (status page, " + clientHost(r) + ")"
	}
	ctx := h.actorContext(r)
	var err error
	flash := "resumed"
	if paused {
		err, flash = h.src.Pause(ctx, id, reason, by), "paused"
	} else {
		err = h.src.Resume(ctx, id, by)
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.log.Info("automatic compaction "+flash, "collection", id, "reason", reason, "by", by)
	http.Redirect(w, r, withFlash(next, flash, ""), http.StatusSeeOther)
}

// clientHost is the address the request came from, without its port.
func clientHost(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

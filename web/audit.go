package web

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/compactorhq/compactor/internal/audit"
	"github.com/compactorhq/compactor/internal/auth"
)

// AuditSource is the audit log, read by the audit view (/audit). A Source
// that implements it gets the view; one that does not answers 404 there.
type AuditSource interface {
	// RecentAuditEvents returns up to limit events, newest first; of one
	// collection when collectionID is set.
	RecentAuditEvents(ctx context.Context, collectionID string, limit int) ([]audit.Event, error)
}

// auditShown is how many events the audit view lists.
const auditShown = 200

type auditView struct {
	Count string
	Rows  []auditRow
}

type auditRow struct {
	ID, Time, Ago                   string
	Principal, Role, Source, Action string
	Target, TargetURL               string
	JobShort, JobURL                string
	Reason, Change                  string
}

func buildAudit(now time.Time, events []audit.Event) auditView {
	v := auditView{Count: fmt.Sprintf("the newest %d events", len(events))}
	if len(events) < auditShown {
		v.Count = fmt.Sprintf("%d events", len(events))
	}
	for _, e := range events {
		row := auditRow{
			ID: fmt.Sprint(e.ID), Time: e.Time.UTC().Format(time.RFC3339), Ago: relTime(now, e.Time),
			Principal: e.Principal, Role: e.Role, Source: e.Source, Action: e.Action,
			Target: e.Target, Reason: e.Reason, Change: change(e.Before, e.After),
		}
		if e.CollectionID != "" && e.Target == e.CollectionID && e.Action != audit.ActionDeleteCollection {
			row.TargetURL = collectionURL(e.CollectionID)
		}
		if e.JobID != "" {
			row.JobURL, row.JobShort = jobURL(e.JobID), shortJobID(e.JobID)
		}
		v.Rows = append(v.Rows, row)
	}
	return v
}

func change(before, after string) string {
	switch {
	case before == "":
		return after
	case after == "":
		return before + " → (none)"
	}
	return before + " → " + after
}

func shortJobID(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

// hasAudit reports whether the Source serves the audit log.
func (h *handler) hasAudit() bool {
	_, ok := h.src.(AuditSource)
	return ok
}

// auditPage handles GET /audit: the newest operator actions, for operators
// and admins (the audit log names principals and their addresses).
func (h *handler) auditPage(w http.ResponseWriter, r *http.Request) {
	src, ok := h.src.(AuditSource)
	if !ok {
		http.NotFound(w, r)
		return
	}
	if !h.guardRead(w, r) {
		return
	}
	if p, signedIn := h.principal(r); !h.may(r, auth.RoleOperator) {
		if !signedIn {
			h.renderLogin(w, r, http.StatusUnauthorized, here(r), "Sign in as an operator or admin to see the audit log.", "")
			return
		}
		h.renderError(w, r, http.StatusForbidden, fmt.Sprintf("The audit log needs role operator or admin; %s has role %s.", p.Name, p.Role))
		return
	}
	events, err := src.RecentAuditEvents(r.Context(), "", auditShown)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.render(w, r, http.StatusOK, h.meta(r, "Audit log", "audit", false), auditMain(buildAudit(h.cfg.Now(), events)))
}

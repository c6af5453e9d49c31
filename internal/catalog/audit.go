package catalog

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/compactorhq/compactor/internal/audit"
)

// The audit log (tables audit_events and audit_head): every operator action
// appends an event in the transaction of the action, chained by hash to the
// event before it (package audit documents the hash). The catalog's
// operator actions (EnqueueJobs with an EnqueueCall.Actor; CancelJob,
// SetCollectionPause, SetCollectionSettings, PutSetting,
// CreateCollectionSpec and DeleteCollection under a context with an
// audit.Actor) call AppendAuditEvent themselves.

// AuditEntry is what an action says of itself; AppendAuditEvent adds the
// actor, the time, the id and the hashes.
type AuditEntry struct {
	Action       string // one of the audit.Action… constants
	CollectionID string
	Target       string
	Reason       string
	Before       any // marshalled to JSON; nil: ""
	After        any
	JobID        string
}

// Bounds of an audit event's texts: longer ones are cut (at a UTF-8
// boundary) with "…", so that an action is never refused for its audit
// event.
const maxAuditText = 4096

// AppendAuditEvent appends the audit event of an action by actor to the
// chain, inside tx, the action's own write transaction: the event commits
// or rolls back with the action. Call it last in the transaction: it locks
// the chain's head row (FOR UPDATE on PostgreSQL; SQLite's one writer
// serializes anyway) until tx ends, so that concurrent appends on several
// replicas never fork the chain, and locking it last keeps that lock
// short and out of lock-order cycles. It returns the event as stored.
// Errors: the database's.
//
// Actions other packages of the catalog add (verify, rollback, priority
// settings, dead-letter clear) call it the same way, with their own
// audit.Action… constant.
func (c *Catalog) AppendAuditEvent(ctx context.Context, tx *sql.Tx, actor audit.Actor, e AuditEntry) (audit.Event, error) {
	before, err := auditJSON(e.Before)
	if err != nil {
		return audit.Event{}, fmt.Errorf("audit %s: encode the state before: %w", e.Action, err)
	}
	after, err := auditJSON(e.After)
	if err != nil {
		return audit.Event{}, fmt.Errorf("audit %s: encode the state after: %w", e.Action, err)
	}
	var (
		lastID   int64
		lastHash string
	)
	if err := tx.QueryRowContext(ctx, `SELECT last_id, last_hash FROM audit_head WHERE singleton = 1`+c.d.forUpdate).Scan(&lastID, &lastHash); err != nil {
		return audit.Event{}, fmt.Errorf("audit %s: read the chain head: %w", e.Action, err)
	}
	prev, ok := audit.ParseHex(lastHash)
	if !ok {
		return audit.Event{}, fmt.Errorf("audit %s: the chain head's hash %q is not a SHA-256 in hex", e.Action, cut(lastHash, 80))
	}
	ev := audit.Seal(prev, audit.Event{
		ID:           lastID + 1,
		Time:         fromMs(ms(c.now())),
		Principal:    cut(actor.Name, maxAuditText),
		Role:         cut(actor.Role, maxAuditText),
		Source:       cut(actor.Source, maxAuditText),
		Action:       e.Action,
		CollectionID: e.CollectionID,
		Target:       cut(e.Target, maxAuditText),
		Reason:       cut(e.Reason, maxAuditText),
		Before:       before,
		After:        after,
		JobID:        e.JobID,
	})
	if _, err := tx.ExecContext(ctx, c.d.q(`INSERT INTO audit_events (id, created_at, principal, role, source, action,
			collection_id, target, reason, before_state, after_state, job_id, prev_hash, hash)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
		ev.ID, ms(ev.Time), ev.Principal, ev.Role, ev.Source, ev.Action, ev.CollectionID, ev.Target, ev.Reason,
		ev.Before, ev.After, ev.JobID, audit.Hex(ev.PrevHash), audit.Hex(ev.Hash)); err != nil {
		return audit.Event{}, fmt.Errorf("audit %s: insert event %d: %w", e.Action, ev.ID, err)
	}
	if _, err := tx.ExecContext(ctx, c.d.q(`UPDATE audit_head SET last_id = ?, last_hash = ? WHERE singleton = 1`), ev.ID, audit.Hex(ev.Hash)); err != nil {
		return audit.Event{}, fmt.Errorf("audit %s: advance the chain head: %w", e.Action, err)
	}
	return ev, nil
}

// auditFromContext appends e for the actor ctx carries, if any: the
// catalog's operator actions call it last in their transaction. Work done
// without an actor (the scheduler's, the manager's own) is not audited.
func (c *Catalog) auditFromContext(ctx context.Context, tx *sql.Tx, e AuditEntry) error {
	actor, ok := audit.ActorFrom(ctx)
	if !ok {
		return nil
	}
	_, err := c.AppendAuditEvent(ctx, tx, actor, e)
	return err
}

func auditJSON(v any) (string, error) {
	if v == nil {
		return "", nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	return cut(string(b), maxAuditText), nil
}

// cut returns s cut to at most n bytes at a UTF-8 boundary, with "…" when
// it was cut.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n-len("…")]
	for i := 0; i < utf8.UTFMax && len(s) > 0; i++ {
		if r, size := utf8.DecodeLastRuneInString(s); r != utf8.RuneError || size > 1 {
			break
		}
		s = s[:len(s)-1]
	}
	return s + "…"
}

// AuditFilter selects audit events for ListAuditEvents. Zero fields do not
// filter.
type AuditFilter struct {
	CollectionID string
	Since        time.Time // events at or after it
	// AfterID is a cursor: only events with a larger id.
	AfterID int64
	// Newest lists the newest events first (by id descending) instead of
	// the oldest.
	Newest bool
	Limit  int // at most this many events; 0 or over 1000 means 1000
}

// maxListAudit bounds one listing of audit events.
const maxListAudit = 1000

const auditColumns = `id, created_at, principal, role, source, action, collection_id, target, reason,
	before_state, after_state, job_id, prev_hash, hash`

// ListAuditEvents returns audit events oldest first (by id). Errors:
// ErrUnavailable; a stored hash that is not hex is returned as a zero hash
// (VerifyAuditChain reports it).
func (c *Catalog) ListAuditEvents(ctx context.Context, f AuditFilter) ([]audit.Event, error) {
	limit := f.Limit
	if limit <= 0 || limit > maxListAudit {
		limit = maxListAudit
	}
	var (
		where []string
		args  []any
	)
	if f.CollectionID != "" {
		where, args = append(where, "collection_id = ?"), append(args, f.CollectionID)
	}
	if !f.Since.IsZero() {
		where, args = append(where, "created_at >= ?"), append(args, ms(f.Since))
	}
	if f.AfterID > 0 {
		where, args = append(where, "id > ?"), append(args, f.AfterID)
	}
	q := `SELECT ` + auditColumns + ` FROM audit_events`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, " AND ")
	}
	if f.Newest {
		q += ` ORDER BY id DESC LIMIT ?`
	} else {
		q += ` ORDER BY id LIMIT ?`
	}
	events, _, err := c.queryAudit(ctx, c.r, q, append(args, limit)...)
	if err != nil {
		return nil, c.wrap(err, "list audit events")
	}
	return events, nil
}

// storedHashes are the hashes of an event as stored, which may not be hex
// after tampering.
type storedHashes struct{ prev, hash string }

func (c *Catalog) queryAudit(ctx context.Context, q querier, query string, args ...any) ([]audit.Event, []storedHashes, error) {
	rows, err := q.QueryContext(ctx, c.d.q(query), args...)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	var (
		out    []audit.Event
		hashes []storedHashes
	)
	for rows.Next() {
		var (
			e  audit.Event
			at int64
			h  storedHashes
		)
		if err := rows.Scan(&e.ID, &at, &e.Principal, &e.Role, &e.Source, &e.Action, &e.CollectionID, &e.Target, &e.Reason,
			&e.Before, &e.After, &e.JobID, &h.prev, &h.hash); err != nil {
			return nil, nil, err
		}
		e.Time = fromMs(at)
		e.PrevHash, _ = audit.ParseHex(h.prev)
		e.Hash, _ = audit.ParseHex(h.hash)
		out = append(out, e)
		hashes = append(hashes, h)
	}
	return out, hashes, rows.Err()
}

// AuditChainError is the first broken link VerifyAuditChain found. It
// matches ErrAuditChainBroken.
type AuditChainError struct {
	EventID int64  // the event at which the chain breaks
	Problem string // what differs
}

func (e *AuditChainError) Error() string {
	return fmt.Sprintf("audit event %d: %s", e.EventID, e.Problem)
}

// ErrAuditChainBroken matches every *AuditChainError.
var ErrAuditChainBroken = errors.New("audit chain broken")

// Is reports whether target is ErrAuditChainBroken.
func (e *AuditChainError) Is(target error) bool { return target == ErrAuditChainBroken }

// AuditVerification is the outcome of a check of the whole chain.
type AuditVerification struct {
	Events   int64  // events checked
	LastID   int64  // the head's last id
	LastHash string // the head's hash (hex): record it elsewhere to detect a rewrite of the whole chain
	// Broken is the first broken link; nil when the chain is whole.
	Broken *AuditChainError
}

// auditVerifyPage is how many events VerifyAuditChain reads at a time.
const auditVerifyPage = 1000

// VerifyAuditChain checks the whole audit chain, from event 1 to the head:
// ids without gaps (a deleted event leaves one), each event's stored
// prev_hash equal to the hash of the event before (32 zero bytes for the
// first), each stored hash equal to the hash recomputed from the event's
// fields (an edited field changes it), and the head naming the last event
// and its hash (a deletion of the last events). It reads the chain in
// pages, in one read transaction. The first broken link is in Broken;
// the error is the database's.
func (c *Catalog) VerifyAuditChain(ctx context.Context) (AuditVerification, error) {
	var out AuditVerification
	err := c.readTx(ctx, func(tx *sql.Tx) error {
		if err := tx.QueryRowContext(ctx, `SELECT last_id, last_hash FROM audit_head WHERE singleton = 1`).Scan(&out.LastID, &out.LastHash); err != nil {
			return fmt.Errorf("read the chain head: %w", err)
		}
		var (
			prevID   int64
			prevHash [32]byte
			zero     = audit.Hex([32]byte{})
			prevHex  = zero
		)
		for {
			events, hashes, err := c.queryAudit(ctx, tx, `SELECT `+auditColumns+` FROM audit_events WHERE id > ? ORDER BY id LIMIT ?`, prevID, auditVerifyPage)
			if err != nil {
				return err
			}
			for i, e := range events {
				out.Events++
				if b := checkLink(e, hashes[i], prevID, prevHash, prevHex); b != nil {
					out.Broken = b
					return nil
				}
				prevID, prevHash, prevHex = e.ID, e.Hash, hashes[i].hash
			}
			if len(events) < auditVerifyPage {
				break
			}
		}
		switch {
		case out.LastID != prevID:
			if out.LastID > prevID {
				out.Broken = &AuditChainError{EventID: prevID + 1, Problem: fmt.Sprintf("missing: the chain's head names event %d as the last, the table ends at event %d (events deleted)", out.LastID, prevID)}
			} else {
				out.Broken = &AuditChainError{EventID: out.LastID + 1, Problem: fmt.Sprintf("the chain's head names event %d as the last, the table holds events up to %d", out.LastID, prevID)}
			}
		case out.LastHash != prevHex:
			out.Broken = &AuditChainError{EventID: prevID, Problem: fmt.Sprintf("the chain's head holds hash %s, the last event %s", cut(out.LastHash, 80), prevHex)}
		}
		return nil
	})
	if err != nil {
		return AuditVerification{}, c.wrap(err, "verify the audit chain")
	}
	return out, nil
}

// checkLink checks event e (stored hashes h) against its predecessor.
func checkLink(e audit.Event, h storedHashes, prevID int64, prevHash [32]byte, prevHex string) *AuditChainError {
	if e.ID != prevID+1 {
		return &AuditChainError{EventID: prevID + 1, Problem: fmt.Sprintf("missing: the next event is %d (events deleted)", e.ID)}
	}
	if h.prev != prevHex {
		what := "the genesis (64 zeros)"
		if prevID > 0 {
			what = fmt.Sprintf("event %d's hash %s", prevID, prevHex)
		}
		return &AuditChainError{EventID: e.ID, Problem: fmt.Sprintf("prev_hash is %s, not %s", cut(h.prev, 80), what)}
	}
	if want := audit.ComputeHash(prevHash, e); audit.Hex(want) != h.hash {
		return &AuditChainError{EventID: e.ID, Problem: fmt.Sprintf("stored hash %s differs from the hash of its fields %s: the event was edited", cut(h.hash, 80), audit.Hex(want))}
	}
	return nil
}

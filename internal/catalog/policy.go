package catalog

import (
	"context"
	"database/sql"
	"fmt"
	"github.com/compactorhq/compactor/internal/audit"
	"strings"
	"time"
)

// The scheduling policy of a collection (its priority class, compaction
// windows and freshness objectives) is stored in its row, so that every
// replica orders and gates the queue alike. The claim order that uses it is
// written once, in claimOrder.

// PriorityClass is a collection's priority class. The zero value is
// PriorityNormal.
type PriorityClass int

// Priority classes.
const (
	PriorityNormal PriorityClass = iota
	PriorityCritical
	PriorityLow
)

// priorityClasses in claim rank order (rank 0 first).
var priorityClasses = [...]PriorityClass{PriorityCritical, PriorityNormal, PriorityLow}

// String is "critical", "normal" or "low".
func (p PriorityClass) String() string {
	switch p {
	case PriorityCritical:
		return "critical"
	case PriorityLow:
		return "low"
	case PriorityNormal:
		return "normal"
	}
	return fmt.Sprintf("PriorityClass(%d)", int(p))
}

// ParsePriorityClass parses "critical", "normal" or "low". Errors:
// ErrInvalidArgument naming the value.
func ParsePriorityClass(s string) (PriorityClass, error) {
	for _, p := range priorityClasses {
		if strings.EqualFold(s, p.String()) {
			return p, nil
		}
	}
	return 0, fmt.Errorf("priority %q: want critical, normal or low: %w", s, ErrInvalidArgument)
}

// Rank is the class's place in the claim order: critical 0, normal 1, low 2
// (the value stored in collections.priority_class).
func (p PriorityClass) Rank() int {
	for i, q := range priorityClasses {
		if p == q {
			return i
		}
	}
	return 1
}

func priorityOfRank(r int64) PriorityClass {
	if r >= 0 && int(r) < len(priorityClasses) {
		return priorityClasses[r]
	}
	return PriorityNormal
}

// DefaultPriorityAging is the aging step of the claim order when
// Config.PriorityAging is zero.
const DefaultPriorityAging = 5 * time.Minute

// CollectionPolicy is a collection's scheduling policy.
type CollectionPolicy struct {
	// Priority orders its scheduled jobs against other collections' (see
	// ClaimJob).
	Priority PriorityClass
	// Windows are its compaction windows ("Mon-Fri 01:00-05:00
	// Europe/Berlin", syntax of package window); empty: the server's
	// --compaction-window. The catalog stores them; the manager parses
	// them.
	Windows []string
	// ObjectiveMaxAge: the objective "the oldest uncompacted record is at
	// most this old"; 0: none. Stored to the millisecond.
	ObjectiveMaxAge time.Duration
	// ObjectiveMaxBacklog: the objective "at most this many uncompacted
	// records"; 0: none.
	ObjectiveMaxBacklog int64
	// ThroughputShare: the fraction (0 < share <= 1) of the throughput cap
	// its compactions may write while other compactions write on the same
	// node; 0: none.
	ThroughputShare float64
}

// HasObjective reports whether p states a freshness objective.
func (p CollectionPolicy) HasObjective() bool {
	return p.ObjectiveMaxAge > 0 || p.ObjectiveMaxBacklog > 0
}

// PolicyUpdate changes the fields of a CollectionPolicy that are set (nil:
// unchanged). A zero value clears: no windows (the server's), no
// objective.
type PolicyUpdate struct {
	Priority            *PriorityClass
	Windows             *[]string
	ObjectiveMaxAge     *time.Duration
	ObjectiveMaxBacklog *int64
	ThroughputShare     *float64
}

// Bounds of a collection's windows.
const (
	MaxCollectionWindows = 16
	maxWindowText        = 128
)

// UpdateCollectionPolicy applies u to collection id's policy in one
// transaction and returns the collection as stored. The window texts are
// stored as given (the manager parses them first). Errors:
// ErrInvalidArgument (an unknown class, more than 16 windows, a window over
// 128 bytes or with a line break, a negative objective, an age objective
// under one second, a throughput share outside [0, 1]), ErrNotFound, ErrUnavailable.
func (c *Catalog) UpdateCollectionPolicy(ctx context.Context, id string, u PolicyUpdate) (Collection, error) {
	fail := func(format string, args ...any) (Collection, error) {
		return Collection{}, fmt.Errorf("collection %s: %s: %w", id, fmt.Sprintf(format, args...), ErrInvalidArgument)
	}
	var (
		set  []string
		args []any
	)
	if u.Priority != nil {
		if p := *u.Priority; p != PriorityNormal && p != PriorityCritical && p != PriorityLow {
			return fail("unknown priority class %d", int(p))
		}
		set, args = append(set, "priority_class = ?"), append(args, u.Priority.Rank())
	}
	if u.Windows != nil {
		ws := *u.Windows
		if len(ws) > MaxCollectionWindows {
			return fail("%d compaction windows, more than %d", len(ws), MaxCollectionWindows)
		}
		for _, w := range ws {
			if len(w) > maxWindowText || strings.ContainsAny(w, "\r\n") || strings.TrimSpace(w) == "" {
				return fail("compaction window %q: want a non-empty line of at most %d bytes", w, maxWindowText)
			}
		}
		set, args = append(set, "compaction_windows = ?"), append(args, strings.Join(ws, "\n"))
	}
	if u.ObjectiveMaxAge != nil {
		d := *u.ObjectiveMaxAge
		if d < 0 || (d > 0 && d < time.Second) {
			return fail("objective maximum age %s must be 0 (none) or at least 1s", d)
		}
		set, args = append(set, "objective_max_age_ms = ?"), append(args, nullIfZero(d.Milliseconds()))
	}
	if u.ObjectiveMaxBacklog != nil {
		if *u.ObjectiveMaxBacklog < 0 {
			return fail("objective maximum backlog %d must not be negative", *u.ObjectiveMaxBacklog)
		}
		set, args = append(set, "objective_max_backlog = ?"), append(args, nullIfZero(*u.ObjectiveMaxBacklog))
	}
	if u.ThroughputShare != nil {
		sh := *u.ThroughputShare
		if !(sh >= 0 && sh <= 1) { // NaN fails too
			return fail("throughput share %v must be 0 (none) or in (0, 1]", sh)
		}
		var v any
		if sh > 0 {
			v = sh
		}
		set, args = append(set, "throughput_share = ?"), append(args, v)
	}
	if len(set) == 0 {
		return c.GetCollection(ctx, id)
	}
	set, args = append(set, "updated_at = ?"), append(args, ms(c.now()))
	entry := func(before, after Collection) AuditEntry {
		return AuditEntry{Action: audit.ActionPolicy, CollectionID: id, Target: id, Before: before.Policy, After: after.Policy}
	}
	col, err := c.updateCollection(ctx, id, entry, strings.Join(set, ", "), args...)
	if err != nil {
		return Collection{}, c.wrap(err, "set scheduling policy of collection %s", id)
	}
	return col, nil
}

func nullIfZero(v int64) any {
	if v == 0 {
		return nil
	}
	return v
}

// scanPolicy fills p from its columns.
func scanPolicy(p *CollectionPolicy, rank int64, windows string, maxAgeMs, maxBacklog *int64, share *float64) {
	if share != nil {
		p.ThroughputShare = *share
	}
	p.Priority = priorityOfRank(rank)
	p.Windows = nil
	if windows != "" {
		p.Windows = strings.Split(windows, "\n")
	}
	if maxAgeMs != nil {
		p.ObjectiveMaxAge = time.Duration(*maxAgeMs) * time.Millisecond
	}
	if maxBacklog != nil {
		p.ObjectiveMaxBacklog = *maxBacklog
	}
}

// RescheduleJob moves the start bounds of QUEUED scheduled job jobID (its
// compaction window closed before it was claimed) to [after, before) (zero:
// no bound) and reports whether it did: false when the job is no longer
// QUEUED. Errors: ErrUnavailable.
func (c *Catalog) RescheduleJob(ctx context.Context, jobID string, after, before time.Time) (bool, error) {
	var n int64
	err := c.writeTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, c.d.q(`UPDATE jobs SET start_after = ?, start_before = ? WHERE id = ? AND state = ?`),
			msOrNull(after), msOrNull(before), jobID, string(JobQueued))
		if err != nil {
			return err
		}
		n, err = rowsAffected(res)
		return err
	})
	if err != nil {
		return false, c.wrap(err, "reschedule job %s", jobID)
	}
	return n == 1, nil
}

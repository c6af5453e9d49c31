package web

import (
	"strings"
	"time"
	"unicode/utf8"

	"github.com/compactorhq/compactor/internal/format"
)

const (
	timeLayout = "2006-01-02 15:04:05Z"
	dash       = "—"
)

// timeView is a time as a page shows it: UTC text, a machine-readable form
// for <time datetime>, and a hint relative to now.
type timeView struct {
	Text string // "2006-01-02 15:04:05Z", or "—" for the zero time
	ISO  string // RFC 3339, "" for the zero time
	Rel  string // "3m ago", "in 5s", "" for the zero time
}

func (t timeView) IsZero() bool { return t.ISO == "" }

func newTimeView(now, t time.Time) timeView {
	if t.IsZero() {
		return timeView{Text: dash}
	}
	t = t.UTC()
	return timeView{Text: t.Format(timeLayout), ISO: t.Format(time.RFC3339), Rel: relTime(now, t)}
}

// relTime says how long ago (or from now) t is, coarsely: "3m ago".
func relTime(now, t time.Time) string { return format.Relative(now.Sub(t)) }

// fmtDuration writes a duration for humans: "850ms", "4.2s", "1m12s".
func fmtDuration(d time.Duration) string { return format.Duration(d) }

// fmtCount writes an integer with thousands separators: "12,345".
func fmtCount(n int64) string { return format.Count(n) }

// fmtBytes writes a byte count in binary units: "512 B", "1.5 KiB".
func fmtBytes(n int64) string { return format.Bytes(n) }

// truncate shortens s to at most n runes, with an ellipsis when cut.
func truncate(s string, n int) string { return format.Truncate(s, n) }

// firstLine returns the first line of s, marked when more follows.
func firstLine(s string) string {
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		return strings.TrimSpace(s[:i]) + " …"
	}
	return s
}

// shortID shortens an id (UUID) to its first 8 characters for tables.
func shortID(id string) string {
	if len(id) > 8 && utf8.ValidString(id[:8]) {
		return id[:8]
	}
	return id
}

// stateClass returns the CSS class of a state badge.
func stateClass(state string) string {
	switch state {
	case StateQueued, StateRunning, StateSucceeded, StateFailed, StateCancelled:
		return "badge state-" + strings.ToLower(state)
	default:
		return "badge state-unknown"
	}
}

// kindLabel returns a job kind for humans: "compaction", "index rebuild".
func kindLabel(k string) string {
	if k == "" {
		k = KindCompaction
	}
	return strings.ReplaceAll(k, "_", " ")
}

// triggerLabel returns a trigger for humans.
func triggerLabel(t string) string {
	switch t {
	case TriggerScheduled:
		return "scheduled"
	case TriggerOneOff:
		return "one-off"
	default:
		return strings.ToLower(t)
	}
}

package web

import (
	"math"
	"strconv"
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

// progress of a running job: the fraction read, and an ETA extrapolated from
// the elapsed time.
type progressView struct {
	Known   bool   // RecordsTotal > 0
	Value   string // for <progress value>, per mille
	Percent string // "34.5%"
	Text    string // "3,450 / 10,000 records"
	Elapsed string // "1m12s"
	ETA     string // "2m17s", or "—" when it cannot be estimated
}

func newProgress(now time.Time, j Job) progressView {
	p := progressView{ETA: dash, Elapsed: dash}
	var elapsed time.Duration
	if !j.StartedAt.IsZero() {
		elapsed = now.Sub(j.StartedAt)
		p.Elapsed = fmtDuration(elapsed)
	}
	if j.RecordsTotal <= 0 {
		p.Text = fmtCount(j.RecordsRead) + " records read"
		return p
	}
	f := float64(j.RecordsRead) / float64(j.RecordsTotal)
	f = math.Max(0, math.Min(1, f))
	p.Known = true
	p.Value = strconv.Itoa(int(math.Round(f * 1000)))
	p.Percent = strconv.FormatFloat(math.Floor(f*1000)/10, 'f', 1, 64) + "%"
	p.Text = fmtCount(j.RecordsRead) + " / " + fmtCount(j.RecordsTotal) + " records"
	if f > 0 && f < 1 && elapsed > 0 {
		p.ETA = fmtDuration(time.Duration(float64(elapsed) * (1 - f) / f))
	} else if f >= 1 {
		p.ETA = "0s"
	}
	return p
}

package web

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
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

// relTime says how long ago (or from now) t is, coarsely.
func relTime(now, t time.Time) string {
	d := now.Sub(t)
	if d < 0 {
		return "in " + coarse(-d)
	}
	if d < 5*time.Second {
		return "just now"
	}
	return coarse(d) + " ago"
}

func coarse(d time.Duration) string {
	switch {
	case d < time.Minute:
		return strconv.FormatInt(int64(d/time.Second), 10) + "s"
	case d < time.Hour:
		return strconv.FormatInt(int64(d/time.Minute), 10) + "m"
	case d < 48*time.Hour:
		return strconv.FormatInt(int64(d/time.Hour), 10) + "h"
	default:
		return strconv.FormatInt(int64(d/(24*time.Hour)), 10) + "d"
	}
}

// fmtDuration writes a duration for humans: "850ms", "4.2s", "12s", "1m12s",
// "2h3m", "3d4h". Negative durations (clock skew) show as "0s".
func fmtDuration(d time.Duration) string {
	switch {
	case d <= 0:
		return "0s"
	case d < time.Second:
		return strconv.FormatInt(int64(d/time.Millisecond), 10) + "ms"
	case d < 10*time.Second:
		return strconv.FormatFloat(math.Floor(d.Seconds()*10)/10, 'f', 1, 64) + "s"
	}
	d = d.Round(time.Second)
	days, d := d/(24*time.Hour), d%(24*time.Hour)
	hours, d := d/time.Hour, d%time.Hour
	mins, d := d/time.Minute, d%time.Minute
	secs := d / time.Second
	switch {
	case days > 0:
		return joinUnits(int64(days), "d", int64(hours), "h")
	case hours > 0:
		return joinUnits(int64(hours), "h", int64(mins), "m")
	case mins > 0:
		return joinUnits(int64(mins), "m", int64(secs), "s")
	default:
		return strconv.FormatInt(int64(secs), 10) + "s"
	}
}

func joinUnits(a int64, au string, b int64, bu string) string {
	s := strconv.FormatInt(a, 10) + au
	if b > 0 {
		s += strconv.FormatInt(b, 10) + bu
	}
	return s
}

// fmtCount writes an integer with thousands separators: "12,345".
func fmtCount(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	if neg {
		s = s[1:]
	}
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// fmtBytes writes a byte count in binary units: "512 B", "1.5 KiB".
func fmtBytes(n int64) string {
	if n < 1024 {
		return strconv.FormatInt(n, 10) + " B"
	}
	units := []string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	v := float64(n)
	i := -1
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	return fmt.Sprintf("%.1f %s", v, units[i])
}

// truncate shortens s to at most n runes, with an ellipsis when cut.
func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

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

// Package window parses and evaluates compaction windows: the times of the
// week in which scheduled compactions may start (after RocksDB's
// daily_offpeak_time_utc, with days and a time zone), such as
// "01:00-05:00", "Mon-Fri 01:00-05:00 Europe/Berlin" or "Sat,Sun 22:00-06:00".
//
// A window is "[DAYS] HH:MM-HH:MM [ZONE]":
//   - DAYS: comma-separated days or ranges of days (Mon, Tue, Wed, Thu, Fri,
//     Sat, Sun; case-insensitive; a range may wrap, e.g. Fri-Mon); absent:
//     every day. A window whose end is at or before its start crosses
//     midnight: it opens on each listed day and closes on the next one.
//   - HH:MM-HH:MM: the opening and closing wall-clock times, 00:00 to 23:59,
//     and 24:00 as a closing time. Equal times ("00:00-00:00",
//     "01:00-01:00") mean 24 hours from the opening time: on every day, a
//     window that never closes.
//   - ZONE: an IANA time zone name (Europe/Berlin, America/New_York, UTC);
//     absent: UTC. The zone database is compiled into the binary
//     (time/tzdata), so a host without /usr/share/zoneinfo reads the same.
//
// Daylight saving time: the times are wall-clock times in the zone, turned
// into instants by time.Date. A boundary that falls into the hour skipped
// when clocks go forward moves past the gap (02:30 on that night in
// Europe/Berlin is 03:30 summer time), and one in the hour repeated when
// they go back is its first occurrence; so "01:00-05:00 Europe/Berlin"
// lasts 3 hours on the night clocks go forward and 5 on the night they go
// back, and "02:00-02:30 Europe/Berlin" is 03:00-03:30 summer time on the
// night clocks go forward. A Set is the union of its windows.
package window

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // zones do not depend on the host's zoneinfo
)

// ErrInvalid matches every parse error.
var ErrInvalid = errors.New("invalid compaction window")

// Window is one parsed window.
type Window struct {
	text       string
	days       [7]bool // by time.Weekday
	start, end int     // minutes of the day; end in 1..1440
	loc        *time.Location
}

// maxText bounds the text of one window.
const maxText = 128

// String is the window as it was written (trimmed).
func (w Window) String() string { return w.text }

var dayNames = map[string]time.Weekday{
	"sun": time.Sunday, "mon": time.Monday, "tue": time.Tuesday, "wed": time.Wednesday,
	"thu": time.Thursday, "fri": time.Friday, "sat": time.Saturday,
}

// Parse parses one window. Its errors match ErrInvalid and name the part of
// the text that is wrong.
func Parse(s string) (Window, error) {
	s = strings.TrimSpace(s)
	fail := func(format string, args ...any) (Window, error) {
		return Window{}, fmt.Errorf("%w %q: %s", ErrInvalid, s, fmt.Sprintf(format, args...))
	}
	if s == "" {
		return fail("empty; want [DAYS] HH:MM-HH:MM [ZONE], e.g. \"Mon-Fri 01:00-05:00 Europe/Berlin\"")
	}
	if len(s) > maxText {
		return fail("%d bytes, more than %d", len(s), maxText)
	}
	fields := strings.Fields(s)
	w := Window{text: strings.Join(fields, " "), loc: time.UTC}
	// The time range is the field with a ':'; days before it, a zone after.
	ti := -1
	for i, f := range fields {
		if strings.Contains(f, ":") {
			ti = i
			break
		}
	}
	switch {
	case ti < 0:
		return fail("no time range; want HH:MM-HH:MM, e.g. 01:00-05:00")
	case ti > 1:
		return fail("%q before the time range: want one list of days such as Mon-Fri or Sat,Sun", strings.Join(fields[:ti], " "))
	case len(fields) > ti+2:
		return fail("%q after the time zone: want at most one zone", strings.Join(fields[ti+2:], " "))
	}
	if ti == 1 {
		if err := parseDays(fields[0], &w.days); err != nil {
			return fail("%v", err)
		}
	} else {
		for d := range w.days {
			w.days[d] = true
		}
	}
	from, to, ok := strings.Cut(fields[ti], "-")
	if !ok {
		return fail("time range %q: want HH:MM-HH:MM", fields[ti])
	}
	var err error
	if w.start, err = parseClock(from, false); err != nil {
		return fail("opening time %v", err)
	}
	if w.end, err = parseClock(to, true); err != nil {
		return fail("closing time %v", err)
	}
	if w.end <= w.start {
		w.end += 24 * 60 // crosses midnight (equal: the whole day)
	}
	if len(fields) == ti+2 {
		z := fields[ti+1]
		loc, err := time.LoadLocation(z)
		if err != nil || strings.EqualFold(z, "local") {
			return fail("unknown time zone %q: want an IANA name such as UTC or Europe/Berlin", z)
		}
		w.loc = loc
	}
	return w, nil
}

// parseDays parses "Mon-Fri", "Sat,Sun", "Fri-Mon,Wed".
func parseDays(s string, days *[7]bool) error {
	for part := range strings.SplitSeq(s, ",") {
		from, to, isRange := strings.Cut(part, "-")
		a, ok := dayNames[strings.ToLower(from)]
		if !ok {
			return fmt.Errorf("unknown day %q in %q: want Mon, Tue, Wed, Thu, Fri, Sat or Sun", from, s)
		}
		b := a
		if isRange {
			if b, ok = dayNames[strings.ToLower(to)]; !ok {
				return fmt.Errorf("unknown day %q in %q: want Mon, Tue, Wed, Thu, Fri, Sat or Sun", to, s)
			}
		}
		for d := a; ; d = (d + 1) % 7 {
			days[d] = true
			if d == b {
				break
			}
		}
	}
	return nil
}

// parseClock parses "HH:MM" into minutes of the day; "24:00" only as a
// closing time.
func parseClock(s string, closing bool) (int, error) {
	hh, mm, ok := strings.Cut(s, ":")
	h, herr := strconv.Atoi(hh)
	m, merr := strconv.Atoi(mm)
	switch {
	case !ok || herr != nil || merr != nil || len(hh) < 1 || len(hh) > 2 || len(mm) != 2:
		return 0, fmt.Errorf("%q: want HH:MM", s)
	case h == 24 && m == 0 && closing:
		return 24 * 60, nil
	case h < 0 || h > 23 || m < 0 || m > 59:
		return 0, fmt.Errorf("%q: want 00:00 to 23:59%s", s, map[bool]string{true: " or 24:00"}[closing])
	}
	return h*60 + m, nil
}

// Set is a union of windows; the empty Set is no restriction (Always).
type Set []Window

// ParseSet parses each window of texts. Errors: those of Parse, joined.
func ParseSet(texts []string) (Set, error) {
	var (
		set  Set
		errs []error
	)
	for _, t := range texts {
		w, err := Parse(t)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		set = append(set, w)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return set, nil
}

// Strings returns the windows' texts.
func (s Set) Strings() []string {
	out := make([]string, len(s))
	for i, w := range s {
		out[i] = w.text
	}
	return out
}

// Always reports whether s restricts nothing (it has no window).
func (s Set) Always() bool { return len(s) == 0 }

// interval is one opening of a window: [start, end).
type interval struct{ start, end time.Time }

// openings returns the openings of w that may contain or follow t: those
// starting from the local day before t's to eight days after.
func (w Window) openings(t time.Time, each func(interval) bool) {
	lt := t.In(w.loc)
	y, mo, d := lt.Date()
	for i := -1; i <= 8; i++ {
		day := time.Date(y, mo, d+i, 0, 0, 0, 0, w.loc)
		if !w.days[day.Weekday()] {
			continue
		}
		dy, dm, dd := day.Date()
		start := time.Date(dy, dm, dd, w.start/60, w.start%60, 0, 0, w.loc)
		end := time.Date(dy, dm, dd, w.end/60, w.end%60, 0, 0, w.loc)
		if !end.After(start) {
			continue // not possible for parsed windows; kept as a guard
		}
		if !each(interval{start, end}) {
			return
		}
	}
}

// week is how long a union of windows may stay open before it is known
// never to close: its windows repeat every week.
const week = 7 * 24 * time.Hour

// Open reports whether t is inside one of s's windows (always true for an
// empty Set), and until when it stays open: the end of the opening
// containing t, extended by every opening that overlaps or touches it. until
// is the zero time for an empty Set, and for a Set that never closes: one
// whose openings chain for a whole week from t, such as "01:00-01:00" or
// "00:00-24:00" on every day, or "00:00-12:00" with "12:00-24:00".
func (s Set) Open(t time.Time) (open bool, until time.Time) {
	if s.Always() {
		return true, time.Time{}
	}
	// Each round moves until to a later opening's end, and there are
	// finitely many within a week: the loop ends.
	for {
		extended := false
		probe := t
		if open {
			probe = until
		}
		for _, w := range s {
			w.openings(probe, func(iv interval) bool {
				if !iv.start.After(probe) && probe.Before(iv.end) && iv.end.After(until) {
					open, until, extended = true, iv.end, true
				}
				return true
			})
		}
		switch {
		case !extended:
			return open, until
		case until.Sub(t) >= week:
			return true, time.Time{}
		}
	}
}

// Next returns the next time s is open from t on: when t is inside a
// window, [t, until) as Open gives it (end zero when s never closes); else
// the earliest later opening, [start, end). ok is false for an
// empty Set (no restriction) and for a Set that never opens within eight
// days (not possible for a parsed window, which opens every week).
func (s Set) Next(t time.Time) (start, end time.Time, ok bool) {
	if s.Always() {
		return time.Time{}, time.Time{}, false
	}
	if open, until := s.Open(t); open {
		return t, until, true
	}
	for _, w := range s {
		w.openings(t, func(iv interval) bool {
			if iv.start.After(t) && (start.IsZero() || iv.start.Before(start)) {
				start = iv.start
			}
			return true
		})
	}
	if start.IsZero() {
		return time.Time{}, time.Time{}, false
	}
	_, end = s.Open(start)
	return start, end, true
}

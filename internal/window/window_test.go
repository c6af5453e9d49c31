package window

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func mustSet(t *testing.T, texts ...string) Set {
	t.Helper()
	s, err := ParseSet(texts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func at(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestParseErrorsNameTheBadPart(t *testing.T) {
	for text, want := range map[string]string{
		"":                         "empty",
		"01:00":                    `time range "01:00"`,
		"Mon-Fri":                  "no time range",
		"Mon-Fry 01:00-05:00":      `unknown day "Fry"`,
		"Mon Tue 01:00-05:00":      `"Mon Tue" before the time range`,
		"25:00-05:00":              `opening time "25:00"`,
		"01:00-05:60":              `closing time "05:60"`,
		"24:00-05:00":              `opening time "24:00"`,
		"1:0-05:00":                `opening time "1:0"`,
		"01:00-05:00 Mars/Olympus": `unknown time zone "Mars/Olympus"`,
		"01:00-05:00 Local":        `unknown time zone "Local"`,
		"01:00-05:00 UTC extra":    `"extra" after the time zone`,
		strings.Repeat("x", 200):   "more than 128",
	} {
		_, err := Parse(text)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v; want an ErrInvalid naming %s", text, err, want)
		}
	}
}

func TestOpenAndNextInUTC(t *testing.T) {
	s := mustSet(t, "01:00-05:00")
	if open, until := s.Open(at(t, "2026-12-01T02:00:00Z")); !open || !until.Equal(at(t, "2026-12-01T05:00:00Z")) {
		t.Errorf("02:00: open %v until %v; want open until 05:00", open, until)
	}
	if open, _ := s.Open(at(t, "2026-12-01T05:00:00Z")); open {
		t.Error("05:00 is open; the closing time is outside the window")
	}
	start, end, ok := s.Next(at(t, "2026-12-01T06:00:00Z"))
	if !ok || !start.Equal(at(t, "2026-12-02T01:00:00Z")) || !end.Equal(at(t, "2026-12-02T05:00:00Z")) {
		t.Errorf("next after 06:00: %v..%v %v; want the next day's 01:00..05:00", start, end, ok)
	}
}

func TestDaysZonesAndMidnight(t *testing.T) {
	// 2026-12-04 is a Friday.
	s := mustSet(t, "Mon-Fri 22:00-02:00 Europe/Berlin")
	// Friday 23:00 Berlin (22:00Z) is open, until Saturday 02:00 Berlin.
	if open, until := s.Open(at(t, "2026-12-04T22:00:00Z")); !open || !until.Equal(at(t, "2026-12-05T01:00:00Z")) {
		t.Errorf("Fri 23:00 Berlin: open %v until %v", open, until)
	}
	// Saturday 23:00 Berlin: closed; next opening Monday 22:00 Berlin.
	start, _, ok := s.Next(at(t, "2026-12-05T22:00:00Z"))
	if !ok || !start.Equal(at(t, "2026-12-07T21:00:00Z")) {
		t.Errorf("next after Sat 23:00 Berlin: %v; want Mon 22:00 Berlin", start)
	}
	// A wrapping range of days.
	w := mustSet(t, "Fri-Mon 00:00-24:00")
	if open, _ := w.Open(at(t, "2026-12-06T12:00:00Z")); !open { // Sunday
		t.Error("Fri-Mon is not open on Sunday")
	}
	if open, _ := w.Open(at(t, "2026-12-02T12:00:00Z")); open { // Wednesday
		t.Error("Fri-Mon is open on Wednesday")
	}
}

func TestUnionChainsTouchingWindows(t *testing.T) {
	s := mustSet(t, "01:00-03:00", "03:00-05:00", "10:00-11:00")
	if open, until := s.Open(at(t, "2026-12-01T02:00:00Z")); !open || !until.Equal(at(t, "2026-12-01T05:00:00Z")) {
		t.Errorf("open %v until %v; want until 05:00 (two touching windows)", open, until)
	}
	if s := mustSet(t, "00:00-00:00"); !func() bool { o, _ := s.Open(at(t, "2026-12-01T13:37:00Z")); return o }() {
		t.Error("00:00-00:00 is not the whole day")
	}
	if open, until := (Set{}).Open(time.Now()); !open || !until.IsZero() {
		t.Error("an empty set restricts")
	}
}

func TestDaylightSavingTime(t *testing.T) {
	s := mustSet(t, "01:00-05:00 Europe/Berlin")
	// 2026-03-29: clocks go forward at 02:00 CET; the window lasts 3 hours.
	start, end, _ := s.Next(at(t, "2026-03-28T12:00:00Z"))
	if got := end.Sub(start); got != 3*time.Hour {
		t.Errorf("spring forward: window of %s (%v..%v); want 3h", got, start, end)
	}
	// 2026-10-25: clocks go back at 03:00 CEST; the window lasts 5 hours.
	start, end, _ = s.Next(at(t, "2026-10-24T12:00:00Z"))
	if got := end.Sub(start); got != 5*time.Hour {
		t.Errorf("fall back: window of %s (%v..%v); want 5h", got, start, end)
	}
	// A window inside the skipped hour moves past the gap: 03:00-03:30 CEST.
	gap := mustSet(t, "02:00-02:30 Europe/Berlin")
	start, end, _ = gap.Next(at(t, "2026-03-28T23:00:00Z"))
	if want := at(t, "2026-03-29T01:00:00Z"); !start.Equal(want) || end.Sub(start) != 30*time.Minute {
		t.Errorf("window in the skipped hour: %v..%v; want 30 minutes from %v", start, end, want)
	}
}

// A union that stays open all week never closes: Open and Next say so with
// the zero end, not with the end of however many days a bounded chain
// reached ("01:00-01:00" shown as a 31-day window).
func TestASetOpenAllWeekNeverCloses(t *testing.T) {
	now := at(t, "2026-12-01T13:37:00Z") // a Tuesday
	var hourly []string
	for h := range 24 {
		hourly = append(hourly, fmt.Sprintf("%02d:00-%02d:00", h, (h+1)%24))
	}
	for name, texts := range map[string][]string{
		"equal times":        {"01:00-01:00"},
		"whole days":         {"00:00-24:00"},
		"two halves":         {"00:00-12:00", "12:00-00:00"},
		"24 hourly windows":  hourly,
		"weekdays, weekends": {"Mon-Fri 00:00-24:00", "Sat,Sun 00:00-00:00"},
		"in a zone":          {"06:00-06:00 Europe/Berlin"},
	} {
		s := mustSet(t, texts...)
		if open, until := s.Open(now); !open || !until.IsZero() {
			t.Errorf("%s: Open = %v until %v; want open, never closing (zero until)", name, open, until)
		}
		if start, end, ok := s.Next(now); !ok || !start.Equal(now) || !end.IsZero() {
			t.Errorf("%s: Next = %v..%v %v; want from now, never closing", name, start, end, ok)
		}
	}
	// Chains that close keep their end: six whole days, and one 24-hour
	// window.
	if open, until := mustSet(t, "Mon-Sat 00:00-24:00").Open(now); !open || !until.Equal(at(t, "2026-12-06T00:00:00Z")) {
		t.Errorf("Mon-Sat whole days: open %v until %v; want until Sunday 00:00", open, until)
	}
	if open, until := mustSet(t, "Tue 01:00-01:00").Open(now); !open || !until.Equal(at(t, "2026-12-02T01:00:00Z")) {
		t.Errorf("Tue 01:00-01:00: open %v until %v; want until Wednesday 01:00", open, until)
	}
}

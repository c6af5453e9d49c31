// Package format writes figures for people, the same way on every surface
// (the CLI, the status page, RPC error messages): byte counts in IEC units
// ("1.5 MiB", from github.com/dustin/go-humanize), durations ("850ms",
// "4.2s", "1m12s", "3d4h"), counts with thousands separators, and text cut
// to a length with "…". It knows nothing of the project's types.
package format

import (
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dustin/go-humanize"
)

// Bytes is n bytes in IEC (binary, powers of 1024) units, with one decimal
// under 10 of a unit (go-humanize's IBytes): "512 B", "1.5 KiB", "2.3 MiB",
// "15 MiB". A negative n is written as
// "-" followed by the size of -n.
func Bytes(n int64) string {
	if n < 0 {
		return "-" + Bytes(-n)
	}
	return humanize.IBytes(uint64(n))
}

// Rate is n bytes per second in IEC units: "64 MiB/s".
func Rate(n int64) string { return Bytes(n) + "/s" }

// Duration is d for people, with at most two units: "850ms", "4.2s" (one
// decimal under 10 s), "12s", "1m12s", "2h3m", "3d4h". Zero and negative
// durations (clock skew) are "0s".
func Duration(d time.Duration) string {
	switch {
	case d <= 0:
		return "0s"
	case d < time.Second:
		return strconv.FormatInt(int64(d/time.Millisecond), 10) + "ms"
	case d < 10*time.Second:
		// Truncated, not rounded: 9.99s stays under 10s.
		return strconv.FormatFloat(float64(d/(100*time.Millisecond))/10, 'f', 1, 64) + "s"
	}
	d = d.Round(time.Second)
	days, d := d/(24*time.Hour), d%(24*time.Hour)
	hours, d := d/time.Hour, d%time.Hour
	mins, d := d/time.Minute, d%time.Minute
	secs := d / time.Second
	switch {
	case days > 0:
		return units(int64(days), "d", int64(hours), "h")
	case hours > 0:
		return units(int64(hours), "h", int64(mins), "m")
	case mins > 0:
		return units(int64(mins), "m", int64(secs), "s")
	}
	return strconv.FormatInt(int64(secs), 10) + "s"
}

func units(a int64, au string, b int64, bu string) string {
	s := strconv.FormatInt(a, 10) + au
	if b > 0 {
		s += strconv.FormatInt(b, 10) + bu
	}
	return s
}

// Relative is how long ago (d > 0) or ahead (d < 0) a time is, coarsely:
// "just now" (under 5 s either way), "5s ago", "2m ago", "3h ago" (up to 48
// h), "4d ago", "in 5s".
func Relative(d time.Duration) string {
	switch {
	case d > -5*time.Second && d < 5*time.Second:
		return "just now"
	case d < 0:
		return "in " + coarse(-d)
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
	}
	return strconv.FormatInt(int64(d/(24*time.Hour)), 10) + "d"
}

// Count is n with thousands separators: "12,345".
func Count(n int64) string { return humanize.Comma(n) }

// Truncate cuts s to at most n runes (n ≥ 1), the last being "…" when it
// cut.
func Truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:max(n-1, 0)]) + "…"
}

// TruncateBytes cuts s to at most n bytes at a UTF-8 boundary, followed by
// "…" when it cut (so the result may be up to n+3 bytes): for limits in
// bytes, such as the length of an id echoed in an error.
func TruncateBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// Plural is n and noun, with an "s" (or "es" after "ch") unless n is 1:
// "1 record", "2 records", "3 batches".
func Plural(n int64, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	if strings.HasSuffix(noun, "ch") {
		return strconv.FormatInt(n, 10) + " " + noun + "es"
	}
	return strconv.FormatInt(n, 10) + " " + noun + "s"
}

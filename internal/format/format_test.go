package format

import (
	"testing"
	"time"
)

func TestBytesAreIEC(t *testing.T) {
	for n, want := range map[int64]string{
		0: "0 B", 512: "512 B", 1023: "1023 B", 1536: "1.5 KiB", 1572864: "1.5 MiB",
		15 << 20: "15 MiB", 5 << 40: "5.0 TiB", -1536: "-1.5 KiB",
	} {
		if got := Bytes(n); got != want {
			t.Errorf("Bytes(%d) = %q, want %q", n, got, want)
		}
	}
	if got := Rate(64 << 20); got != "64 MiB/s" {
		t.Errorf("Rate = %q", got)
	}
}

func TestDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		-time.Second:            "0s",
		0:                       "0s",
		850 * time.Millisecond:  "850ms",
		4200 * time.Millisecond: "4.2s",
		9999 * time.Millisecond: "9.9s",
		12 * time.Second:        "12s",
		72 * time.Second:        "1m12s",
		2 * time.Minute:         "2m",
		2*time.Hour + 3*time.Minute + 4*time.Second:  "2h3m",
		3*24*time.Hour + 4*time.Hour + 5*time.Minute: "3d4h",
		59*time.Second + 600*time.Millisecond:        "1m",
	} {
		if got := Duration(d); got != want {
			t.Errorf("Duration(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestRelative(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0:                    "just now",
		4 * time.Second:      "just now",
		-4 * time.Second:     "just now",
		42 * time.Second:     "42s ago",
		3 * time.Minute:      "3m ago",
		47 * time.Hour:       "47h ago",
		49 * time.Hour:       "2d ago",
		-90 * time.Second:    "in 1m",
		-30 * 24 * time.Hour: "in 30d",
	} {
		if got := Relative(d); got != want {
			t.Errorf("Relative(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestCountTruncatePlural(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567", -12345: "-12,345"} {
		if got := Count(n); got != want {
			t.Errorf("Count(%d) = %q, want %q", n, got, want)
		}
	}
	for _, tt := range []struct {
		in   string
		n    int
		want string
	}{{"héllo wörld", 6, "héllo…"}, {"short", 10, "short"}, {"ab", 1, "…"}} {
		if got := Truncate(tt.in, tt.n); got != tt.want {
			t.Errorf("Truncate(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.want)
		}
	}
	// "é" is two bytes: a cut at byte 2 of "héllo" falls inside it.
	if got := TruncateBytes("héllo", 2); got != "h…" {
		t.Errorf("TruncateBytes = %q, want h…", got)
	}
	if got := TruncateBytes("abc", 3); got != "abc" {
		t.Errorf("TruncateBytes = %q", got)
	}
	for n, want := range map[int64]string{1: "1 record", 0: "0 records", 2: "2 records"} {
		if got := Plural(n, "record"); got != want {
			t.Errorf("Plural(%d) = %q, want %q", n, got, want)
		}
	}
	if got := Plural(3, "batch"); got != "3 batches" {
		t.Errorf("Plural batch = %q", got)
	}
}

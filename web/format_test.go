package web

import (
	"net/url"
	"strings"
	"testing"
	"time"
)

func TestTimeViewIsUTC(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	zone := time.FixedZone("CET", 3600)
	v := newTimeView(now, time.Date(2026, 11, 30, 13, 57, 0, 0, zone))
	if v.Text != "2026-11-30 12:57:00Z" || v.ISO != "2026-11-30T12:57:00Z" || v.Rel != "in 57m" {
		t.Errorf("%+v", v)
	}
	if z := newTimeView(now, time.Time{}); z.Text != "—" || !z.IsZero() {
		t.Errorf("zero time %+v", z)
	}
}

func TestTruncateAndFirstLine(t *testing.T) {
	if got := truncate("héllo wörld", 6); got != "héllo…" {
		t.Errorf("truncate = %q", got)
	}
	if got := truncate("short", 10); got != "short" {
		t.Errorf("truncate = %q", got)
	}
	if got := firstLine("one\ntwo"); got != "one …" {
		t.Errorf("firstLine = %q", got)
	}
}

func TestLocalPath(t *testing.T) {
	for in, want := range map[string]string{
		"":                          "/",
		"/":                         "/",
		"/collections?sort=backlog": "/collections?sort=backlog",
		"/jobs/x?partial=1&flash=signed-in&job=y#frag": "/jobs/x",
		"//evil.example/x":      "/",
		"/\\evil.example":       "/",
		"https://evil.example/": "/",
		"javascript:alert(1)":   "/",
		"collections":           "/",
		"/a\r\nSet-Cookie: x=y": "/",
		"/%2F%2Fevil.example":   "/%2F%2Fevil.example",
	} {
		if got := localPath(in); got != want {
			t.Errorf("localPath(%q) = %q, want %q", in, got, want)
		}
	}
	if got := withFlash("/collections?sort=name", "compact-queued", "j 1"); got != "/collections?flash=compact-queued&job=j+1&sort=name" {
		t.Errorf("withFlash = %q", got)
	}
}

func TestFlashOnlyForKnownCodes(t *testing.T) {
	if f := flashFor(url.Values{"flash": {"<b>you have been hacked</b>"}}); f != nil {
		t.Errorf("unknown code shown: %+v", f)
	}
	f := flashFor(url.Values{"flash": {"compact-queued"}, "job": {"j1"}})
	if f == nil || f.LinkURL != "/jobs/j1" || f.Kind != "ok" {
		t.Errorf("%+v", f)
	}
}

func TestDashboardCountsFailuresInTheLast24Hours(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	var failed []Job
	for i := range failedScanLimit {
		failed = append(failed, Job{ID: strings.Repeat("f", 1+i%3), State: StateFailed, FinishedAt: now.Add(-time.Minute)})
	}
	v := buildDashboard(now, dashboardData{Failed: failed, Filter: dashboardFilter{Limit: 50}})
	for _, tile := range v.Tiles {
		if tile.TestID == "count-failed" && tile.Value != "1000+" {
			t.Errorf("a full scan of recent failures shows %q, want 1000+", tile.Value)
		}
	}
	v = buildDashboard(now, dashboardData{Failed: []Job{
		{State: StateFailed, FinishedAt: now.Add(-23 * time.Hour)},
		{State: StateFailed, FinishedAt: now.Add(-25 * time.Hour)},
	}, Filter: dashboardFilter{Limit: 50}})
	for _, tile := range v.Tiles {
		if tile.TestID == "count-failed" && (tile.Value != "1" || !tile.Alert) {
			t.Errorf("count-failed %+v, want 1 with alert", tile)
		}
	}
}

func TestQueueIsCappedAndKeepsTheRunOrder(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	var queued []Job
	for i := range 60 {
		// The Source's run order, whatever the triggers and times say.
		queued = append(queued, Job{ID: string(rune('A' + i)), State: StateQueued, Trigger: TriggerScheduled, CreatedAt: now.Add(time.Duration(i%7) * time.Second)})
	}
	queued[3].Trigger = TriggerOneOff
	v := buildDashboard(now, dashboardData{Queued: queued, Filter: dashboardFilter{Limit: 50}})
	if len(v.Queue) != queueShown || v.QueueMore != 10 {
		t.Fatalf("%d shown, %d more", len(v.Queue), v.QueueMore)
	}
	for i, r := range v.Queue {
		if r.ID != queued[i].ID {
			t.Fatalf("queue row %d is %s, want %s: the page must not reorder the Source's queue", i, r.ID, queued[i].ID)
		}
	}
}

func TestConfigDefaults(t *testing.T) {
	c := Config{}.withDefaults()
	if c.RefreshSeconds != 10 || c.Heartbeat != 15*time.Second || c.MinEventInterval != 500*time.Millisecond || c.MaxStreams != 100 || c.Now == nil || c.Logger == nil {
		t.Errorf("%+v", c)
	}
}

func TestWindowTextOfAWindowThatNeverCloses(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	always := PlanEntry{Windows: []string{"01:00-01:00"}, WindowOpen: true, NextWindowStart: now}
	if got := windowText(now, always); got != "open, never closes" {
		t.Errorf("open all week: %q", got)
	}
	end := now.Add(2 * time.Hour)
	open := PlanEntry{Windows: []string{"12:00-14:00"}, WindowOpen: true, NextWindowStart: now, NextWindowEnd: end}
	if got := windowText(now, open); got != "open until 14:00 UTC" {
		t.Errorf("open window: %q", got)
	}
	if got := windowText(now, PlanEntry{}); got != "any time" {
		t.Errorf("no window: %q", got)
	}
}

package web

import (
	"math"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestNiceStep(t *testing.T) {
	for _, tc := range []struct {
		max  float64
		n    int
		want float64
	}{
		{0, 4, 1}, {3, 4, 1}, {10, 4, 5}, {1200, 4, 500}, {1000, 4, 500}, {99, 4, 50}, {7, 5, 2}, {math.NaN(), 4, 1},
	} {
		if got := niceStep(tc.max, tc.n); got != tc.want {
			t.Errorf("niceStep(%v, %d) = %v, want %v", tc.max, tc.n, got, tc.want)
		}
	}
}

func TestDurationStep(t *testing.T) {
	for d, want := range map[time.Duration]time.Duration{
		0:                      10 * time.Millisecond,
		72 * time.Second:       15 * time.Second,
		3 * time.Second:        time.Second,
		40 * time.Minute:       10 * time.Minute,
		20 * 24 * time.Hour:    5 * 24 * time.Hour,
		850 * time.Millisecond: 200 * time.Millisecond,
	} {
		if got := durationStep(d); got != want {
			t.Errorf("durationStep(%v) = %v, want %v", d, got, want)
		}
	}
}

func parseF(t *testing.T, s string) float64 {
	t.Helper()
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("number %q: %v", s, err)
	}
	return f
}

func TestDurationChartScalesBarsInsideThePlot(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	var jobs []Job
	for i, d := range []time.Duration{10 * time.Second, 40 * time.Second, 20 * time.Second} {
		start := t0.Add(time.Duration(i) * time.Hour)
		jobs = append([]Job{{ID: "job" + strconv.Itoa(i), State: StateSucceeded, StartedAt: start, FinishedAt: start.Add(d)}}, jobs...) // newest first
	}
	jobs = append(jobs, Job{ID: "running", State: StateRunning, StartedAt: t0}) // not finished: no bar
	c := durationChart(jobs)
	if c.Empty || len(c.Bars) != 3 {
		t.Fatalf("bars %+v", c.Bars)
	}
	var heights []float64
	for i, b := range c.Bars {
		x, y, w, h := parseF(t, b.X), parseF(t, b.Y), parseF(t, b.W), parseF(t, b.H)
		if x < plotLeft || x+w > plotRight || y < plotTop || math.Abs(y+h-plotBottom) > 0.05 {
			t.Errorf("bar %d out of the plot: %+v", i, b)
		}
		heights = append(heights, h)
	}
	// Oldest on the left; 10 s, 40 s, 20 s on a 0–50 s axis (step 10 s).
	if !(heights[0] < heights[2] && heights[2] < heights[1]) {
		t.Errorf("heights %v do not follow 10 s, 40 s, 20 s", heights)
	}
	if math.Abs(heights[1]/heights[0]-4) > 0.05 {
		t.Errorf("heights %v not proportional", heights)
	}
	if !strings.HasPrefix(c.Bars[0].Title, "job0 ") || c.Bars[0].URL != "/jobs/job0" {
		t.Errorf("first bar %+v", c.Bars[0])
	}
	labels := []string{}
	for _, tk := range c.YTicks {
		labels = append(labels, tk.Label)
	}
	if got := strings.Join(labels, " "); got != "0s 10s 20s 30s 40s" {
		t.Errorf("y labels %q", got)
	}
	if len(c.XTicks) != 3 || c.XTicks[0].Label != "11-30 10:00" || c.XTicks[2].Label != "11-30 12:00" {
		t.Errorf("x ticks %+v", c.XTicks)
	}
}

func TestChartsWithoutDataSaySo(t *testing.T) {
	if c := durationChart(nil); !c.Empty || c.EmptyText == "" {
		t.Errorf("%+v", c)
	}
	if c := backlogChart(nil); !c.Empty || c.EmptyText == "" {
		t.Errorf("%+v", c)
	}
}

func TestBacklogChartPlotsPointsOverTime(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	pts := []Point{{t0, 0}, {t0.Add(30 * time.Minute), 100}, {t0.Add(time.Hour), 50}}
	c := backlogChart(pts)
	got := strings.Fields(c.Line)
	want := []string{"64.0,204.0", "344.0,16.0", "624.0,110.0"} // left, middle top, right half-way
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("line %v, want %v", got, want)
	}
	if c.Dot == nil || c.Dot.X != "624.0" || c.Dot.Y != "110.0" {
		t.Errorf("dot %+v", c.Dot)
	}
	if len(c.XTicks) != 4 || c.XTicks[0].Label != "11-30 10:00" || c.XTicks[3].Label != "11-30 11:00" {
		t.Errorf("x ticks %+v", c.XTicks)
	}

	one := backlogChart([]Point{{t0, 7}})
	if one.Empty || len(strings.Fields(one.Line)) != 1 || len(one.XTicks) != 1 {
		t.Errorf("single sample %+v", one)
	}
}

func TestDownsampleKeepsPeaksAndTheLastSample(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	var pts []Point
	for i := range 10000 {
		v := float64(i % 7)
		if i == 4321 {
			v = 1e6
		}
		pts = append(pts, Point{At: t0.Add(time.Duration(i) * time.Second), Value: v})
	}
	out := downsample(pts, maxLinePts)
	if len(out) != maxLinePts {
		t.Fatalf("%d points", len(out))
	}
	if out[len(out)-1] != pts[len(pts)-1] {
		t.Error("last sample dropped")
	}
	peak := false
	for i, p := range out {
		peak = peak || p.Value == 1e6
		if i > 0 && !p.At.After(out[i-1].At) {
			t.Fatalf("points out of order at %d", i)
		}
	}
	if !peak {
		t.Error("peak dropped")
	}
}

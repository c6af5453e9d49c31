package web

import (
	"cmp"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// chartView is an SVG chart laid out in Go: the template only places the
// elements. Coordinates are in the viewBox (chartW × chartH); CSS scales the
// SVG to the width of its container.
type chartView struct {
	TestID    string
	ID        string // prefix of the title and desc element ids
	Title     string
	Desc      string // a text summary, for screen readers and tooltips
	ViewBox   string
	Empty     bool
	EmptyText string
	XAxis     lineView
	YAxis     lineView
	Grid      []lineView
	YTicks    []tickView
	XTicks    []tickView
	YLabel    string
	YLabelX   string
	YLabelY   string
	Bars      []barView
	Line      string // polyline points "x,y x,y …"
	Area      string // polygon points under the line
	Dot       *pointView
}

// Role is the ARIA role of the chart's svg: "img" for a picture, "group"
// when bars link to jobs (an image may not contain interactive elements;
// each link is then named by its bar's title, and the axes are hidden from
// assistive technology, the description summarizing them).
func (c chartView) Role() string {
	for _, b := range c.Bars {
		if b.URL != "" {
			return "group"
		}
	}
	return "img"
}

type lineView struct{ X1, Y1, X2, Y2 string }

type tickView struct {
	X, Y   string
	Label  string
	Anchor string // text-anchor: start, middle, end
}

type barView struct {
	X, Y, W, H string
	Class      string
	Title      string
	URL        string
}

type pointView struct{ X, Y string }

const (
	chartW      = 640.0
	chartH      = 240.0
	plotLeft    = 64.0
	plotRight   = chartW - 16
	plotTop     = 16.0
	plotBottom  = chartH - 36
	plotWidth   = plotRight - plotLeft
	plotHeight  = plotBottom - plotTop
	maxBars     = 60
	maxLinePts  = 320
	tickLabelDY = 18.0
)

func f1(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

func newChart(testID, title string) chartView {
	return chartView{
		TestID:  testID,
		ID:      testID,
		Title:   title,
		ViewBox: "0 0 " + f1(chartW) + " " + f1(chartH),
		XAxis:   lineView{X1: f1(plotLeft), Y1: f1(plotBottom), X2: f1(plotRight), Y2: f1(plotBottom)},
		YAxis:   lineView{X1: f1(plotLeft), Y1: f1(plotTop), X2: f1(plotLeft), Y2: f1(plotBottom)},
		YLabelX: "14",
		YLabelY: f1(plotTop + plotHeight/2),
	}
}

// yTicks places horizontal grid lines and labels at 0, step, … top.
func (c *chartView) yTicks(top, step float64, label func(float64) string) {
	for v := 0.0; v <= top+step/1e6; v += step {
		y := plotBottom - v/top*plotHeight
		c.YTicks = append(c.YTicks, tickView{X: f1(plotLeft - 6), Y: f1(y + 4), Label: label(v), Anchor: "end"})
		if v > 0 {
			c.Grid = append(c.Grid, lineView{X1: f1(plotLeft), Y1: f1(y), X2: f1(plotRight), Y2: f1(y)})
		}
	}
}

func anchorAt(i, n int) string {
	switch {
	case n == 1:
		return "middle"
	case i == 0:
		return "start"
	case i == n-1:
		return "end"
	default:
		return "middle"
	}
}

// durationChart draws the run time of the finished jobs (given newest first,
// as Source.Jobs returns them) as bars, oldest on the left.
func durationChart(jobs []Job) chartView {
	c := newChart("chart-durations", "Compaction durations")
	c.YLabel = "duration"
	var done []Job
	for _, j := range jobs {
		if !j.StartedAt.IsZero() && !j.FinishedAt.IsZero() {
			done = append(done, j)
		}
	}
	slices.SortStableFunc(done, func(a, b Job) int {
		return cmp.Or(a.StartedAt.Compare(b.StartedAt), cmp.Compare(a.ID, b.ID))
	})
	if len(done) > maxBars {
		done = done[len(done)-maxBars:]
	}
	if len(done) == 0 {
		c.Empty, c.EmptyText = true, "No finished compactions yet."
		c.Desc = c.EmptyText
		return c
	}
	var longest time.Duration
	var total time.Duration
	for _, j := range done {
		d := max(0, j.FinishedAt.Sub(j.StartedAt))
		longest = max(longest, d)
		total += d
	}
	step := durationStep(longest)
	top := step * max(1, (longest+step-1)/step)
	c.yTicks(float64(top), float64(step), func(v float64) string { return fmtDuration(time.Duration(v)) })

	n := len(done)
	slot := plotWidth / float64(n)
	barW := math.Min(40, math.Max(1, slot*0.7))
	for i, j := range done {
		d := max(0, j.FinishedAt.Sub(j.StartedAt))
		h := math.Max(1, float64(d)/float64(top)*plotHeight)
		x := plotLeft + float64(i)*slot + (slot-barW)/2
		c.Bars = append(c.Bars, barView{
			X: f1(x), Y: f1(plotBottom - h), W: f1(barW), H: f1(h),
			Class: "bar bar-" + strings.ToLower(j.State),
			Title: shortID(j.ID) + " · " + j.StartedAt.UTC().Format(timeLayout) + " · " + fmtDuration(d) + " · " + j.State,
			URL:   jobURL(j.ID),
		})
	}
	idx := []int{0, n / 2, n - 1}
	idx = slices.Compact(idx)
	for k, i := range idx {
		x := plotLeft + (float64(i)+0.5)*slot
		c.XTicks = append(c.XTicks, tickView{X: f1(x), Y: f1(plotBottom + tickLabelDY), Label: done[i].StartedAt.UTC().Format("01-02 15:04"), Anchor: anchorAt(k, len(idx))})
	}
	c.Desc = strconv.Itoa(n) + " finished jobs from " + done[0].StartedAt.UTC().Format(timeLayout) +
		" to " + done[n-1].StartedAt.UTC().Format(timeLayout) + "; longest " + fmtDuration(longest) +
		", mean " + fmtDuration(total/time.Duration(n)) + "."
	return c
}

// durationSteps are the round steps of a duration axis.
func durationSteps() []time.Duration {
	return []time.Duration{
		10 * time.Millisecond, 20 * time.Millisecond, 50 * time.Millisecond,
		100 * time.Millisecond, 200 * time.Millisecond, 500 * time.Millisecond,
		time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 15 * time.Second, 30 * time.Second,
		time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 30 * time.Minute,
		time.Hour, 2 * time.Hour, 3 * time.Hour, 6 * time.Hour, 12 * time.Hour, 24 * time.Hour,
	}
}

// durationStep picks a round tick step that divides max into at most 5.
func durationStep(longest time.Duration) time.Duration {
	for _, s := range durationSteps() {
		if longest <= 5*s {
			return s
		}
	}
	days := niceStep(float64(longest)/float64(24*time.Hour), 5)
	return time.Duration(days * float64(24*time.Hour))
}

// niceStep picks a step of 1, 2 or 5 times a power of ten, at least 1, that
// divides max into at most n steps.
func niceStep(maxV float64, n int) float64 {
	if maxV <= 0 || math.IsNaN(maxV) || math.IsInf(maxV, 0) {
		return 1
	}
	raw := maxV / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	var step float64
	switch norm := raw / mag; {
	case norm <= 1:
		step = mag
	case norm <= 2:
		step = 2 * mag
	case norm <= 5:
		step = 5 * mag
	default:
		step = 10 * mag
	}
	return math.Max(1, step)
}

// backlogChart draws backlog samples (oldest first) as a line over time.
func backlogChart(points []Point) chartView {
	c := newChart("chart-backlog", "Backlog over time")
	c.YLabel = "records"
	pts := slices.Clone(points)
	slices.SortStableFunc(pts, func(a, b Point) int { return a.At.Compare(b.At) })
	pts = slices.DeleteFunc(pts, func(p Point) bool { return math.IsNaN(p.Value) || math.IsInf(p.Value, 0) })
	if len(pts) == 0 {
		c.Empty, c.EmptyText = true, "No backlog samples yet."
		c.Desc = c.EmptyText
		return c
	}
	n := len(pts)
	pts = downsample(pts, maxLinePts)
	t0, t1 := pts[0].At, pts[len(pts)-1].At
	span := t1.Sub(t0)
	maxV, last := 0.0, pts[len(pts)-1].Value
	for _, p := range pts {
		maxV = math.Max(maxV, p.Value)
	}
	step := niceStep(maxV, 4)
	top := step * math.Max(1, math.Ceil(maxV/step))
	c.yTicks(top, step, func(v float64) string { return fmtCount(int64(math.Round(v))) })

	xOf := func(t time.Time) float64 {
		if span <= 0 {
			return plotLeft + plotWidth/2
		}
		return plotLeft + float64(t.Sub(t0))/float64(span)*plotWidth
	}
	yOf := func(v float64) float64 { return plotBottom - math.Max(0, v)/top*plotHeight }
	var line strings.Builder
	for i, p := range pts {
		if i > 0 {
			line.WriteByte(' ')
		}
		line.WriteString(f1(xOf(p.At)) + "," + f1(yOf(p.Value)))
	}
	c.Line = line.String()
	c.Area = f1(xOf(t0)) + "," + f1(plotBottom) + " " + c.Line + " " + f1(xOf(t1)) + "," + f1(plotBottom)
	c.Dot = &pointView{X: f1(xOf(t1)), Y: f1(yOf(last))}

	layout := "01-02 15:04"
	if span < time.Hour {
		layout = "15:04:05"
	}
	if span <= 0 {
		c.XTicks = []tickView{{X: f1(xOf(t0)), Y: f1(plotBottom + tickLabelDY), Label: t0.UTC().Format(layout), Anchor: "middle"}}
	} else {
		for k := range 4 {
			t := t0.Add(time.Duration(float64(span) * float64(k) / 3))
			c.XTicks = append(c.XTicks, tickView{X: f1(xOf(t)), Y: f1(plotBottom + tickLabelDY), Label: t.UTC().Format(layout), Anchor: anchorAt(k, 4)})
		}
	}
	c.Desc = strconv.Itoa(n) + " samples from " + t0.UTC().Format(timeLayout) + " to " + t1.UTC().Format(timeLayout) +
		"; highest " + fmtCount(int64(math.Round(maxV))) + ", latest " + fmtCount(int64(math.Round(last))) + " records."
	return c
}

// downsample keeps at most n points: the highest of each run of samples,
// so that peaks survive, and always the last sample.
func downsample(pts []Point, n int) []Point {
	if len(pts) <= n {
		return pts
	}
	out := make([]Point, 0, n)
	body := pts[:len(pts)-1]
	per := float64(len(body)) / float64(n-1)
	for b := range n - 1 {
		lo, hi := int(float64(b)*per), int(float64(b+1)*per)
		hi = min(max(hi, lo+1), len(body))
		best := body[lo]
		for _, p := range body[lo:hi] {
			if p.Value > best.Value {
				best = p
			}
		}
		out = append(out, best)
	}
	return append(out, pts[len(pts)-1])
}

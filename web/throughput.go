package web

import (
	"math"
	"strconv"
	"time"
)

// Throughput chart: a bar per minute over the last throughputWindow.
const (
	throughputWindow = time.Hour
	throughputBucket = time.Minute
)

// throughputChart draws the bytes written by compactions per minute over
// the hour up to now: each SUCCEEDED job's BytesWritten (blocks and
// manifest) counts in the minute it finished (a job's bytes are committed
// together, at its end). jobs may be in any order; the others are skipped.
func throughputChart(now time.Time, jobs []Job) chartView {
	c := newChart("chart-throughput", "Bytes written by compactions per minute")
	c.YLabel = "bytes/min"
	end := now.UTC().Truncate(throughputBucket).Add(throughputBucket) // the end of the current minute
	start := end.Add(-throughputWindow)
	n := int(throughputWindow / throughputBucket)
	buckets := make([]int64, n)
	var total int64
	var count int
	for _, j := range jobs {
		if j.State != StateSucceeded || j.BytesWritten <= 0 || j.FinishedAt.Before(start) || !j.FinishedAt.Before(end) {
			continue
		}
		buckets[int(j.FinishedAt.Sub(start)/throughputBucket)] += j.BytesWritten
		total += j.BytesWritten
		count++
	}
	if total == 0 {
		c.Empty, c.EmptyText = true, "No bytes written by compactions in the last hour."
		c.Desc = c.EmptyText
		return c
	}
	var peak int64
	for _, b := range buckets {
		peak = max(peak, b)
	}
	step := niceStep(float64(peak), 4)
	top := step * math.Max(1, math.Ceil(float64(peak)/step))
	c.yTicks(top, step, func(v float64) string { return fmtBytes(int64(math.Round(v))) })
	slot := plotWidth / float64(n)
	barW := math.Max(1, slot*0.8)
	for i, b := range buckets {
		if b == 0 {
			continue
		}
		at := start.Add(time.Duration(i) * throughputBucket)
		h := math.Max(1, float64(b)/top*plotHeight)
		c.Bars = append(c.Bars, barView{
			X: f1(plotLeft + float64(i)*slot + (slot-barW)/2), Y: f1(plotBottom - h), W: f1(barW), H: f1(h),
			Class: "bar bar-succeeded",
			Title: at.Format("15:04") + " · " + fmtBytes(b),
		})
	}
	for k, i := range []int{0, n / 2, n} {
		at := start.Add(time.Duration(i) * throughputBucket)
		c.XTicks = append(c.XTicks, tickView{X: f1(plotLeft + float64(i)*slot), Y: f1(plotBottom + tickLabelDY), Label: at.Format("15:04"), Anchor: anchorAt(k, 3)})
	}
	noun := " compactions from "
	if count == 1 {
		noun = " compaction from "
	}
	c.Desc = fmtBytes(total) + " written by " + strconv.Itoa(count) + noun + start.Format(timeLayout) +
		" to " + end.Format(timeLayout) + "; busiest minute " + fmtBytes(peak) + "."
	return c
}

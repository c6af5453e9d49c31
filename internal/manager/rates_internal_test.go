package manager

import (
	"testing"
	"time"

	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/jobtype"
)

// TestRateWindowMeasuresAsTheNewestSuccessesDo: a window loaded from the
// catalog and then fed the jobs that end gives the rates that measuring
// the newest successes afresh gives: only this node's successful jobs
// that wrote bytes and recorded their figures count, the last rateJobs of
// them, their index phase apart.
func TestRateWindowMeasuresAsTheNewestSuccessesDo(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	job := func(i int, node string, state catalog.JobState) catalog.Job {
		start := t0.Add(time.Duration(i) * time.Minute)
		return catalog.Job{State: state, Node: node, StartedAt: start, FinishedAt: start.Add(time.Duration(1+i%5) * time.Second),
			BytesWritten: int64(1000 * (1 + i%7)), Actual: &jobtype.Actual{IndexSeconds: float64(i%3) / 4, VectorsIndexed: int64(10 * (i % 3))}}
	}
	var all []catalog.Job // oldest first
	for i := range 60 {
		switch {
		case i%11 == 0:
			all = append(all, job(i, "other", catalog.JobSucceeded))
		case i%13 == 0:
			all = append(all, job(i, "n1", catalog.JobFailed))
		case i%17 == 0:
			j := job(i, "n1", catalog.JobSucceeded)
			j.Actual = nil
			all = append(all, j)
		default:
			all = append(all, job(i, "n1", catalog.JobSucceeded))
		}
	}
	fresh := func(jobs []catalog.Job) Rates { // the newest rateJobs samples
		var s []rateSample
		for i := len(jobs) - 1; i >= 0 && len(s) < rateJobs; i-- {
			if x, ok := sampleOf(jobs[i], "n1"); ok {
				s = append(s, x)
			}
		}
		return ratesOf(s)
	}
	for _, loadedAt := range []int{0, 5, 30} {
		var w rateWindow
		for i := range all[:loadedAt] {
			if x, ok := sampleOf(all[i], "n1"); ok {
				w.addLocked(x)
			}
		}
		w.loaded = true
		for i := loadedAt; i < len(all); i++ {
			w.ended(all[i], "n1")
			if got, want := ratesOf(w.samples), fresh(all[:i+1]); got != want {
				t.Fatalf("loaded with %d jobs, after job %d: %+v, want %+v", loadedAt, i, got, want)
			}
		}
	}
	var unloaded rateWindow
	unloaded.ended(all[1], "n1")
	if len(unloaded.samples) != 0 {
		t.Fatalf("a window not loaded yet kept a sample: %+v", unloaded.samples)
	}
}

package cli

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/vbauerster/mpb/v8"
	"google.golang.org/protobuf/types/known/durationpb"

	compactorv1 "github.com/compactorhq/compactor/gen/compactor/v1"
)

// testBarOptions render into a buffer: a fixed width, and no refresh but
// the last one when the view closes (the buffer is no terminal).
func testBarOptions() []mpb.ContainerOption {
	return []mpb.ContainerOption{mpb.WithWidth(120), mpb.WithManualRefresh(make(chan any))}
}

// TestBarViewShowsPhaseFractionAndETA draws the terminal view into a
// buffer: per unfinished job its collection, phase, the whole job's
// fraction (Progress.fraction; records read of total from a server that
// sends no fraction) and its ETA, "ETA unknown" when the server sends none;
// finished jobs and notes above the bars.
func TestBarViewShowsPhaseFractionAndETA(t *testing.T) {
	var buf bytes.Buffer
	v := newBarView(&buf, testBarOptions()...)

	writing := fakeJob(fakeJob1, "one", compactorv1.JobState_JOB_STATE_RUNNING)
	// Every record read, but the job is 60% done: the bar follows the job.
	writing.Progress = &compactorv1.Progress{RecordsRead: 1000, RecordsTotal: 1000, Phase: "writing blocks", Fraction: 0.6}
	older := fakeJob("33333333-3333-4333-8333-333333333333", "three", compactorv1.JobState_JOB_STATE_RUNNING)
	older.Progress = &compactorv1.Progress{RecordsRead: 250, RecordsTotal: 1000, Phase: "reading log", Eta: durationpb.New(42 * time.Second)}
	queued := fakeJob(fakeJob2, "two", compactorv1.JobState_JOB_STATE_QUEUED)
	v.update(queued)
	v.update(writing)
	v.update(older)
	failed := fakeJob(fakeJob2, "two", compactorv1.JobState_JOB_STATE_FAILED)
	failed.Error = "disk on fire"
	v.update(failed)
	v.update(failed) // the same state again prints nothing more
	v.note("watch: %s", "reconnecting")
	v.close()

	out := buf.String()
	lines := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		for _, coll := range []string{"one", "three"} {
			if strings.HasPrefix(strings.TrimSpace(l), coll+" ") {
				lines[coll] = l
			}
		}
	}
	for coll, want := range map[string][]string{
		"one":   {"writing blocks", "60%", "ETA unknown"},
		"three": {"reading log", "25%", "ETA 42s"},
	} {
		for _, w := range want {
			if !strings.Contains(lines[coll], w) {
				t.Errorf("the bar of %s %q lacks %q; output:\n%s", coll, lines[coll], w, out)
			}
		}
	}
	if strings.Contains(out, "ETA 0") {
		t.Errorf("an ETA of 0 is shown:\n%s", out)
	}
	if n := strings.Count(out, "✗ two  job "+fakeJob2+"  FAILED: disk on fire"); n != 1 {
		t.Errorf("the failed job is printed %d times, want once:\n%s", n, out)
	}
	if !strings.Contains(out, "watch: reconnecting") {
		t.Errorf("the note is missing:\n%s", out)
	}
	if !strings.Contains(out, "jobs: 2 running, 1 failed") {
		t.Errorf("no status line counting the jobs:\n%s", out)
	}
}

// TestBarViewDropsTheBarOfAFinishedJob: a job that ends leaves a line, not
// a bar.
func TestBarViewDropsTheBarOfAFinishedJob(t *testing.T) {
	var buf bytes.Buffer
	v := newBarView(&buf, testBarOptions()...)
	running := fakeJob(fakeJob1, "one", compactorv1.JobState_JOB_STATE_RUNNING)
	running.Progress = &compactorv1.Progress{Phase: "committing", Fraction: 0.97}
	v.update(running)
	done := fakeJob(fakeJob1, "one", compactorv1.JobState_JOB_STATE_SUCCEEDED)
	done.RecordsRead, done.RecordsWritten, done.VersionAfter = 100, 90, 1
	v.update(done)
	v.close()
	out := buf.String()
	if !strings.Contains(out, "✓ one  job "+fakeJob1+"  SUCCEEDED: 100 records read, 90 written, version 0 -> 1") {
		t.Errorf("no line for the finished job:\n%s", out)
	}
	if strings.Contains(out, "committing") {
		t.Errorf("the finished job's bar is still drawn:\n%s", out)
	}
}

// TestBarViewPrintsJobsFinishedBeforeAnyBar: the lines of jobs that had
// finished when the wait began are printed, though no bar was ever drawn.
func TestBarViewPrintsJobsFinishedBeforeAnyBar(t *testing.T) {
	var buf bytes.Buffer
	v := newBarView(&buf, testBarOptions()...)
	v.update(fakeJob(fakeJob1, "one", compactorv1.JobState_JOB_STATE_CANCELLED))
	v.close()
	if out := buf.String(); !strings.Contains(out, "✗ one  job "+fakeJob1+"  CANCELLED") {
		t.Errorf("want the finished job's line:\n%s", out)
	}
}

func TestLineViewPrintsOneLinePerStateChange(t *testing.T) {
	var buf bytes.Buffer
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	v := &lineView{w: &buf, now: func() time.Time { return now }, states: map[string]compactorv1.JobState{}}
	running := fakeJob(fakeJob1, "one", compactorv1.JobState_JOB_STATE_RUNNING)
	v.update(fakeJob(fakeJob1, "one", compactorv1.JobState_JOB_STATE_QUEUED))
	v.update(running)
	running.Progress = &compactorv1.Progress{Fraction: 0.5}
	v.update(running) // progress only: no line
	v.update(fakeJob(fakeJob1, "one", compactorv1.JobState_JOB_STATE_CANCELLED))
	want := "2025-06-01T12:00:00Z  job " + fakeJob1 + "  one  QUEUED\n" +
		"2025-06-01T12:00:00Z  job " + fakeJob1 + "  one  RUNNING\n" +
		"2025-06-01T12:00:00Z  job " + fakeJob1 + "  one  CANCELLED\n"
	if buf.String() != want {
		t.Errorf("got\n%s\nwant\n%s", buf.String(), want)
	}
}

func TestPushBarCountsBytesOrLines(t *testing.T) {
	var buf bytes.Buffer
	b := newPushBar(&buf, 2048, "in.jsonl", testBarOptions()...)
	r := b.reader(strings.NewReader(strings.Repeat("x", 2048)))
	if _, err := r.Read(make([]byte, 4096)); err != nil {
		t.Fatal(err)
	}
	b.note("push: %s", "a note")
	b.finish(true)
	out := buf.String()
	for _, want := range []string{"push in.jsonl", "2.0 KiB / 2.0 KiB", "100 %", "push: a note"} {
		if !strings.Contains(out, want) {
			t.Errorf("byte bar lacks %q:\n%s", want, out)
		}
	}

	buf.Reset()
	b = newPushBar(&buf, -1, "<stdin>", testBarOptions()...)
	for range 3 {
		b.line()
	}
	b.finish(false)
	if out := buf.String(); !strings.Contains(out, "push <stdin>") || !strings.Contains(out, "3 lines") {
		t.Errorf("line bar:\n%s", out)
	}
}

// An ETA counts down from when its report arrived; once it has run out
// while the job still runs, it says so instead of "ETA <1s".
func TestETACountsDownAndSaysWhenItHasRunOut(t *testing.T) {
	p := &compactorv1.Progress{Eta: durationpb.New(5 * time.Second)}
	for _, c := range []struct {
		age  time.Duration
		want string
	}{
		{0, "ETA 5.0s"},
		{3 * time.Second, "ETA 2.0s"},
		{4500 * time.Millisecond, "ETA <1s"},
		{5500 * time.Millisecond, "ETA <1s"},
		{39 * time.Second, "ETA overdue by 34s"},
	} {
		if got := etaTextAged(p, c.age); got != c.want {
			t.Errorf("ETA 5s received %s ago: %q, want %q", c.age, got, c.want)
		}
	}
	if got := etaTextAged(&compactorv1.Progress{}, time.Minute); got != "ETA unknown" {
		t.Errorf("no ETA: %q", got)
	}

	// The terminal view: no newer report for 34 s after "ETA <1s".
	var buf bytes.Buffer
	v := newBarView(&buf, testBarOptions()...)
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	v.now = func() time.Time { return now }
	j := fakeJob(fakeJob1, "one", compactorv1.JobState_JOB_STATE_RUNNING)
	j.Progress = &compactorv1.Progress{Phase: "committing", Fraction: 0.96, Eta: durationpb.New(500 * time.Millisecond)}
	v.update(j)
	if got := v.eta(fakeJob1); got != "ETA <1s" {
		t.Errorf("at once: %q", got)
	}
	now = now.Add(34 * time.Second)
	if got := v.eta(fakeJob1); got != "ETA overdue by 34s" {
		t.Errorf("34 s later: %q, want ETA overdue by 34s", got)
	}
	v.close()
}

// watch --progress prints one line when a running job's ETA runs out with
// no newer report, and none when a newer report came first.
func TestWatchSaysWhenARunningJobsETAHasRunOut(t *testing.T) {
	type pending struct {
		d time.Duration
		f func()
	}
	var timers []pending
	after := func(d time.Duration, f func()) func() bool {
		timers = append(timers, pending{d, f})
		return func() bool { return true }
	}
	var lines []string
	w := newETAWatch(after, func(j *compactorv1.Job, by time.Duration) {
		lines = append(lines, fmt.Sprintf("%s overdue by %s", j.GetId(), by))
	})
	j := fakeJob(fakeJob1, "one", compactorv1.JobState_JOB_STATE_RUNNING)
	j.Progress = &compactorv1.Progress{Phase: "committing", Eta: durationpb.New(time.Second)}
	printed := 0
	w.seen(j, func() { printed++ })
	if printed != 1 || len(timers) != 1 || timers[0].d != time.Second+etaGrace {
		t.Fatalf("printed %d, timers %v; want the line and one timer at the ETA plus %s", printed, timers, etaGrace)
	}
	timers[0].f()
	if len(lines) != 1 || lines[0] != fakeJob1+" overdue by "+etaGrace.String() {
		t.Fatalf("lines %q, want one saying the ETA ran out", lines)
	}

	// A newer report supersedes the timer: when the old one fires anyway
	// (it was already running), nothing is printed.
	w.seen(j, func() {})
	w.seen(j, func() {})
	timers[1].f()
	if len(lines) != 1 {
		t.Errorf("a superseded timer printed %q", lines[1:])
	}
	done := fakeJob(fakeJob1, "one", compactorv1.JobState_JOB_STATE_SUCCEEDED)
	w.seen(done, func() {})
	timers[2].f()
	if len(lines) != 1 || len(timers) != 3 {
		t.Errorf("after the job ended: lines %q, %d timers", lines, len(timers))
	}
	w.stop()
}

package cli

import (
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
	"golang.org/x/term"

	compactorv1 "github.com/compactorhq/compactor/gen/compactor/v1"
	"github.com/compactorhq/compactor/internal/format"
)

// jobView shows the progress of waited-for jobs on stderr.
type jobView interface {
	update(j *compactorv1.Job)
	note(format string, args ...any)
	close()
}

// isTerminal reports whether w is a terminal (progress bars are drawn only
// there).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// newJobView draws progress bars when stderr is a terminal; otherwise it
// prints a line per state change with -o table, and nothing but notes with
// -o json.
func (s *session) newJobView() jobView {
	switch {
	case isTerminal(s.out.errw):
		return newBarView(s.out.errw)
	case !s.out.json:
		return &lineView{w: s.out.errw, now: s.out.now, states: map[string]compactorv1.JobState{}}
	}
	return quietView{w: s.out.errw}
}

// finishedText describes a finished job: "SUCCEEDED in 1.2s: 5217 records
// read, 5000 written, version 0 -> 1", with its note in parentheses.
func finishedText(j *compactorv1.Job) string {
	var d string
	if j.GetStartTime() != nil && j.GetFinishTime() != nil {
		d = " in " + format.Duration(j.GetFinishTime().AsTime().Sub(j.GetStartTime().AsTime()))
	}
	var s string
	switch j.GetState() {
	case compactorv1.JobState_JOB_STATE_SUCCEEDED:
		if j.GetKind() == compactorv1.JobKind_JOB_KIND_INDEX_REBUILD {
			s = fmt.Sprintf("SUCCEEDED%s: version %d -> %d", d, j.GetVersionBefore(), j.GetVersionAfter())
			if ip := j.GetIndexRebuild(); ip.GetM() > 0 || ip.GetEfConstruction() > 0 {
				s += fmt.Sprintf(", m %d, ef_construction %d", ip.GetM(), ip.GetEfConstruction())
			}
		} else {
			s = fmt.Sprintf("SUCCEEDED%s: %d records read, %d written, version %d -> %d", d, j.GetRecordsRead(), j.GetRecordsWritten(),
				j.GetVersionBefore(), j.GetVersionAfter())
		}
	case compactorv1.JobState_JOB_STATE_FAILED:
		return "FAILED" + d + ": " + safeText(j.GetError())
	default:
		s = stateName(j.GetState()) + d
	}
	if n := j.GetNote(); n != "" {
		s += " (" + safeText(n) + ")"
	}
	return s
}

// quietView prints only notes.
type quietView struct{ w io.Writer }

func (quietView) update(*compactorv1.Job) {}
func (v quietView) note(format string, args ...any) {
	fmt.Fprintf(v.w, format+"\n", args...)
}
func (quietView) close() {}

// lineView prints one line per state change (for logs, not terminals).
type lineView struct {
	w      io.Writer
	now    func() time.Time
	states map[string]compactorv1.JobState
}

func (v *lineView) update(j *compactorv1.Job) {
	if prev, ok := v.states[j.GetId()]; ok && prev == j.GetState() {
		return
	}
	v.states[j.GetId()] = j.GetState()
	text := stateName(j.GetState())
	if jobDone(j.GetState()) {
		text = finishedText(j)
	}
	fmt.Fprintf(v.w, "%s  job %s  %s  %s\n", v.now().UTC().Format("2006-01-02T15:04:05Z"), j.GetId(), collectionLabel(j), text)
}

func (v *lineView) note(format string, args ...any) {
	fmt.Fprintf(v.w, format+"\n", args...)
}

func (v *lineView) close() {}

// barScale is the total of a job's bar: the fraction done in thousandths.
const barScale = 1000

// barView draws, with mpb, one live bar per unfinished job: its collection,
// its phase, a bar of the fraction of the whole job done, the percentage
// and the ETA ("ETA unknown" while the server cannot estimate it). Finished
// jobs and notes are printed above the bars and stay.
type barView struct {
	p      *mpb.Progress
	status *mpb.Bar                    // the last line, "jobs: 1 running, 2 queued"; it keeps the view rendering until close
	mu     sync.Mutex                  // guards jobs and seen, read by mpb's goroutine through the decorators
	jobs   map[string]*compactorv1.Job // latest state of each job
	seen   map[string]time.Time        // when each job's latest state arrived: its ETA counts down from then
	bars   map[string]*mpb.Bar         // of the unfinished jobs
	now    func() time.Time            // the clock of the countdown (time.Now; tests set it)
}

// newBarView draws on w; opts are for tests (an output that is not a
// terminal renders when the view closes, or on a manual refresh).
func newBarView(w io.Writer, opts ...mpb.ContainerOption) *barView {
	opts = append([]mpb.ContainerOption{mpb.WithOutput(w), mpb.WithRefreshRate(150 * time.Millisecond)}, opts...)
	v := &barView{p: mpb.New(opts...), jobs: map[string]*compactorv1.Job{}, seen: map[string]time.Time{}, bars: map[string]*mpb.Bar{}, now: time.Now}
	// Without a total, it never completes; a bar's priority is its place,
	// the highest last.
	v.status = v.p.New(0, mpb.NopStyle(), mpb.BarPriority(math.MaxInt),
		mpb.PrependDecorators(decor.Any(func(decor.Statistics) string { return v.summary() })))
	return v
}

// summary counts the jobs by state: "jobs: 1 running, 2 queued, 1 succeeded".
func (v *barView) summary() string {
	v.mu.Lock()
	defer v.mu.Unlock()
	counts := map[compactorv1.JobState]int{}
	for _, j := range v.jobs {
		counts[j.GetState()]++
	}
	var parts []string
	for _, st := range []compactorv1.JobState{compactorv1.JobState_JOB_STATE_RUNNING, compactorv1.JobState_JOB_STATE_QUEUED,
		compactorv1.JobState_JOB_STATE_SUCCEEDED, compactorv1.JobState_JOB_STATE_FAILED, compactorv1.JobState_JOB_STATE_CANCELLED} {
		if n := counts[st]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, strings.ToLower(stateName(st))))
		}
	}
	return "jobs: " + strings.Join(parts, ", ")
}

func (v *barView) job(id string) *compactorv1.Job {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.jobs[id]
}

func (v *barView) update(j *compactorv1.Job) {
	id := j.GetId()
	v.mu.Lock()
	prev, known := v.jobs[id]
	v.jobs[id] = j
	v.seen[id] = v.now()
	v.mu.Unlock()
	bar := v.bars[id]
	if jobDone(j.GetState()) {
		if known && prev.GetState() == j.GetState() {
			return
		}
		mark := "✓"
		if j.GetState() != compactorv1.JobState_JOB_STATE_SUCCEEDED {
			mark = "✗"
		}
		fmt.Fprintf(v.p, "%s %s  job %s  %s\n", mark, collectionLabel(j), id, finishedText(j))
		if bar != nil {
			bar.Abort(true)
			delete(v.bars, id)
		}
		return
	}
	if bar == nil {
		bar = v.p.New(barScale, mpb.BarStyle().Lbound("[").Rbound("]"),
			mpb.PrependDecorators(
				decor.Name(ellipsize(collectionLabel(j), 24), decor.WC{W: 25, C: decor.DindentRight}),
				decor.Any(func(decor.Statistics) string { return v.phase(id) }, decor.WC{W: 16, C: decor.DindentRight}),
			),
			mpb.AppendDecorators(
				decor.Any(func(decor.Statistics) string { return v.percent(id) }, decor.WC{W: 5}),
				decor.Any(func(decor.Statistics) string { return "  " + v.eta(id) }),
			),
		)
		v.bars[id] = bar
	}
	if f, ok := jobFraction(j.GetProgress()); ok && j.GetState() == compactorv1.JobState_JOB_STATE_RUNNING {
		// Below the total: a bar that reaches it completes, and the job
		// ends only when the server says so.
		bar.SetCurrent(min(int64(f*barScale), barScale-1))
	}
}

// phase is what job id is doing: "queued", "reading log", "writing
// blocks", with "(cancel requested)".
func (v *barView) phase(id string) string {
	j := v.job(id)
	s := strings.ToLower(stateName(j.GetState()))
	if p := j.GetProgress().GetPhase(); p != "" && j.GetState() == compactorv1.JobState_JOB_STATE_RUNNING {
		s = safeText(p)
	}
	if j.GetCancelRequested() {
		s += " (cancel requested)"
	}
	return s
}

// eta is the ETA of job id counted down from when its latest state arrived.
func (v *barView) eta(id string) string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return etaTextAged(v.jobs[id].GetProgress(), v.now().Sub(v.seen[id]))
}

// percent is the fraction of job id done, "45%", or "" while unknown.
func (v *barView) percent(id string) string {
	if f, ok := jobFraction(v.job(id).GetProgress()); ok {
		return fmt.Sprintf("%d%%", int(f*100))
	}
	return ""
}

func (v *barView) note(format string, args ...any) {
	fmt.Fprintf(v.p, format+"\n", args...)
}

// close stops the bars of jobs still unfinished (kept on screen as they
// were), removes the status line and waits for the last render, which
// prints what was written above the bars since the one before.
func (v *barView) close() {
	for id, bar := range v.bars {
		bar.Abort(false)
		delete(v.bars, id)
	}
	v.status.Abort(true)
	v.p.Wait()
}

// pushBar shows, with mpb, how far a push has read its input: bytes of
// FILE when its size is known, else lines (stdin). Notes are printed above
// it.
type pushBar struct {
	p     *mpb.Progress
	bar   *mpb.Bar
	lines bool // counts lines, not bytes
}

// newPushBar draws on w; opts are for tests, as for newBarView.
func newPushBar(w io.Writer, size int64, name string, opts ...mpb.ContainerOption) *pushBar {
	opts = append([]mpb.ContainerOption{mpb.WithOutput(w), mpb.WithRefreshRate(150 * time.Millisecond)}, opts...)
	b := &pushBar{p: mpb.New(opts...), lines: size <= 0}
	label := decor.Name("push "+ellipsize(safeText(name), 40), decor.WC{C: decor.DindentRight | decor.DextraSpace})
	if b.lines {
		b.bar = b.p.New(0, mpb.SpinnerStyle(), mpb.PrependDecorators(label), mpb.AppendDecorators(decor.CurrentNoUnit("%d lines")))
		return b
	}
	// Created without a total, so that reading the whole file does not
	// complete the bar (notes printed while the last batches are sent would
	// be lost): finish completes it.
	b.bar = b.p.New(0, mpb.BarStyle().Lbound("[").Rbound("]"),
		mpb.PrependDecorators(label, decor.Counters(decor.SizeB1024(0), "% .1f / % .1f")),
		mpb.AppendDecorators(decor.Percentage(decor.WC{W: 5})),
	)
	b.bar.SetTotal(size, false)
	return b
}

// reader counts the bytes read from r, when the bar counts bytes.
func (b *pushBar) reader(r io.Reader) io.Reader {
	if b.lines {
		return r
	}
	pr, err := b.bar.ProxyReader(r)
	if err != nil { // only for a nil r
		return r
	}
	return pr
}

// line counts one input line, when the bar counts lines.
func (b *pushBar) line() {
	if b.lines {
		b.bar.Increment()
	}
}

func (b *pushBar) note(format string, args ...any) {
	fmt.Fprintf(b.p, format+"\n", args...)
}

// finish completes the bar (done) or stops it where it is, and waits for the
// last render.
func (b *pushBar) finish(done bool) {
	if done {
		b.bar.SetTotal(-1, true)
	} else {
		b.bar.Abort(false)
	}
	b.p.Wait()
}

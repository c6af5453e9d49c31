package manager

import (
	"time"

	"github.com/compactorhq/compactor/internal/jobtype"
)

// phaseWeight is one phase's expected share of a job's time.
type phaseWeight struct {
	phase  jobtype.Phase
	weight float64
}

// compactionWeights are the phases of a compaction in job order with their
// shares, which sum to 1. They come from measured jobs (reading the log was
// 0.9 s of a 9.7 s job; writing blocks dominates, reading the blocks a
// change touches while materializing comes second; building the vector
// index of a version is a fraction of writing it for an incremental build,
// about as long for a full one) and only shape the fraction and the ETA
// before the job has timed a phase of its own.
var compactionWeights = []phaseWeight{
	{jobtype.PhaseReading, 0.15},
	{jobtype.PhaseMaterializing, 0.15},
	{jobtype.PhaseWriting, 0.50},
	{jobtype.PhaseIndexing, 0.15},
	{jobtype.PhaseCommitting, 0.05},
}

// compactionNoIndexWeights are compactionWeights of a collection with
// indexing off: without the indexing phase, its share spread over the
// others in proportion, so that the fraction still reaches 1 only at the
// end, without a jump where the index would have been built.
var compactionNoIndexWeights = without(compactionWeights, jobtype.PhaseIndexing)

// indexRebuildWeights are the phases of an index rebuild: building the
// graph from every vector of the version (its counter: vectors inserted),
// then the commit of the new manifest.
var indexRebuildWeights = []phaseWeight{
	{jobtype.PhaseIndexing, 0.95},
	{jobtype.PhaseCommitting, 0.05},
}

// verifyWeights are the phases of a verify job: re-reading the version's
// blobs (its counter: blobs checked), then, with replay, re-materializing
// the version from the log (operation records read). A job without replay
// ends after the first.
var verifyWeights = []phaseWeight{
	{jobtype.PhaseVerifying, 0.6},
	{jobtype.PhaseReplaying, 0.4},
}

// without returns ws without phase, the other shares scaled to sum to 1.
func without(ws []phaseWeight, phase jobtype.Phase) []phaseWeight {
	var out []phaseWeight
	total := 0.0
	for _, w := range ws {
		if w.phase != phase {
			out = append(out, w)
			total += w.weight
		}
	}
	for i := range out {
		out[i].weight /= total
	}
	return out
}

// weightsOf returns the phases of a job of kind k, and whether it indexes.
func weightsOf(k jobtype.Kind, noIndexing bool) []phaseWeight {
	switch {
	case k == jobtype.KindIndexRebuild:
		return indexRebuildWeights
	case k == jobtype.KindVerify:
		return verifyWeights
	case noIndexing:
		return compactionNoIndexWeights
	}
	return compactionWeights
}

// Thresholds of the ETA: a phase's rate is trusted once the phase has done
// etaMinFraction of its work over at least etaMinElapsed.
const (
	etaMinFraction = 0.05
	etaMinElapsed  = 200 * time.Millisecond
)

// phaseIndex returns the position of phase in ws, -1 for
// jobtype.PhaseStarting and any phase ws does not have.
func phaseIndex(ws []phaseWeight, phase jobtype.Phase) int {
	for i, w := range ws {
		if w.phase == phase {
			return i
		}
	}
	return -1
}

// withinPhase is how far p's phase has got by its own counter, from 0 to 1,
// and whether the phase has one: records read while reading the log, blocks
// written while writing blocks, vectors inserted while indexing (when the
// job counts them). Materializing and committing have none.
func withinPhase(p Progress) (float64, bool) {
	switch p.Phase {
	case jobtype.PhaseReading, jobtype.PhaseReplaying:
		if p.OpRecordsTotal > 0 {
			return min(1, float64(p.OpRecordsRead)/float64(p.OpRecordsTotal)), true
		}
	case jobtype.PhaseWriting, jobtype.PhaseVerifying:
		if p.BlocksTotal > 0 {
			return min(1, float64(p.BlocksWritten)/float64(p.BlocksTotal)), true
		}
	case jobtype.PhaseIndexing:
		if p.VectorsTotal > 0 {
			return min(1, float64(p.VectorsIndexed)/float64(p.VectorsTotal)), true
		}
	}
	return 0, false
}

// tracker follows one running job's phases to estimate its fraction and
// ETA from the rates observed in that job. It is not safe for concurrent
// use (the run registry guards it).
type tracker struct {
	kind       jobtype.Kind  // the job's kind: its phases and their weights
	weights    []phaseWeight // of kind, and of whether the job indexes
	last       Progress
	lastAt     time.Time                       // when last was reported
	phaseStart time.Time                       // when the current phase began
	spent      map[jobtype.Phase]time.Duration // time each phase took, once ended
}

// observe records report p made at time at.
func (t *tracker) observe(p Progress, at time.Time) {
	if t.spent == nil {
		t.spent = map[jobtype.Phase]time.Duration{}
		t.phaseStart = at
	}
	t.weights = weightsOf(t.kind, p.NoIndexing || t.last.NoIndexing)
	if p.Phase != t.last.Phase {
		if phaseIndex(t.weights, t.last.Phase) >= 0 {
			t.spent[t.last.Phase] = at.Sub(t.phaseStart)
		}
		// Phases skipped between two reports took no time of their own.
		t.phaseStart = at
	}
	p.NoIndexing = p.NoIndexing || t.last.NoIndexing
	t.last, t.lastAt = p, at
}

// estimate returns the job's fraction done (0 to 1, below 1 while it runs:
// the phases before the current one by their weights, the current one by
// its weight times its own counter) and the time left at now, with known
// false while it cannot be estimated: no phase timed yet, the current phase
// not far enough along (etaMinFraction over etaMinElapsed), or a phase
// without a counter that has overrun what the timed phases predicted. A
// known ETA is positive: the phases after the current one still remain.
func (t *tracker) estimate(now time.Time) (fraction float64, eta time.Duration, known bool) {
	ws := t.weights
	cur := phaseIndex(ws, t.last.Phase)
	if cur < 0 {
		return 0, 0, false
	}
	within, counted := withinPhase(t.last)
	for i := range cur {
		fraction += ws[i].weight
	}
	fraction += ws[cur].weight * within
	fraction = min(fraction, 0.999)

	// Seconds per unit of weight, from the phases this job has timed: the
	// ended ones as they took, the current one extrapolated from its rate.
	var timed, weight float64
	for i := range cur {
		timed += t.spent[ws[i].phase].Seconds()
		weight += ws[i].weight
	}
	elapsed := now.Sub(t.phaseStart)
	var curLeft float64 // seconds left in the current phase
	rated := counted && within >= etaMinFraction && t.lastAt.Sub(t.phaseStart) >= etaMinElapsed
	if rated {
		phaseTotal := t.lastAt.Sub(t.phaseStart).Seconds() / within
		timed += phaseTotal
		weight += ws[cur].weight
		// A phase past its extrapolated end is about to end: the phases
		// after it remain.
		curLeft = max(0, phaseTotal-elapsed.Seconds())
	}
	if weight == 0 || timed <= 0 {
		return fraction, 0, false
	}
	perWeight := timed / weight
	if !rated {
		curLeft = perWeight*ws[cur].weight - elapsed.Seconds()
		if curLeft <= 0 {
			// Overran what the timed phases predicted: they say nothing
			// more about this one.
			return fraction, 0, false
		}
	}
	left := curLeft
	for i := cur + 1; i < len(ws); i++ {
		left += perWeight * ws[i].weight
	}
	eta = time.Duration(left * float64(time.Second)).Round(time.Millisecond)
	if eta <= 0 {
		return fraction, 0, false
	}
	return fraction, eta, true
}

// endTime is the time run r ends at, as its row records it: its start plus
// the time since its claim by the monotonic clock, so that its duration
// (finished - started) is what elapsed, whatever the wall clock did
// meanwhile (a step back never records a negative duration).
func (g *runRegistry) endTime(r *run) time.Time {
	g.mu.Lock()
	started := r.job.StartedAt
	g.mu.Unlock()
	return started.Add(max(g.mono()-r.claimed, 0)).UTC().Truncate(time.Millisecond)
}

// persistedProgress is the progress another replica persisted with its
// job's lease (its counters, fraction and ETA; the plan is on the row), as
// seen at now: its ETA counts down from when it was persisted, and is
// unknown once that count has run out.
func persistedProgress(jp Progress, now time.Time) Progress {
	p := Progress{
		Phase: jp.Phase, OpRecordsRead: jp.OpRecordsRead, OpRecordsTotal: jp.OpRecordsTotal, BytesWritten: jp.BytesWritten,
		BlocksWritten: jp.BlocksWritten, BlocksTotal: jp.BlocksTotal, Fraction: jp.Fraction,
		VectorsIndexed: jp.VectorsIndexed, VectorsTotal: jp.VectorsTotal,
	}
	if jp.ETAKnown {
		left := jp.ETA
		if !jp.UpdatedAt.IsZero() && now.After(jp.UpdatedAt) {
			left -= now.Sub(jp.UpdatedAt)
		}
		if left > 0 {
			p.ETA, p.ETAKnown = left.Round(time.Millisecond), true
		}
	}
	return p
}

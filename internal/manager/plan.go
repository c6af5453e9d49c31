package manager

import (
	"context"
	"fmt"
	"time"

	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/jobtype"
)

// Decision says what the scheduler does with a collection on its next run.
type Decision string

// Decisions of the scheduler. Every collection gets exactly one.
const (
	DecideRun           Decision = "run"    // a SCHEDULED job is queued
	DecideSchedPaused   Decision = "paused" // automatic compaction is paused everywhere
	DecidePaused        Decision = "collection-paused"
	DecideDeadLettered  Decision = "dead-lettered"  // too many consecutive failures
	DecideBackingOff    Decision = "backing-off"    // a failure's retry delay has not passed
	DecideOutsideWindow Decision = "outside-window" // it would run, but its compaction windows are closed
	DecideRunning       Decision = "running"        // a job of it is running
	DecideQueued        Decision = "queued"         // a compaction of it is queued already
	DecideBelow         Decision = "below-thresholds"
	DecideEmpty         Decision = "empty" // nothing to compact
)

// Estimator is implemented by an Executor that can estimate a job without
// running it (Plan uses it for the collections it would compact).
type Estimator interface {
	Estimate(ctx context.Context, collectionID string) (Estimate, error)
}

// PlanEntry is the scheduler's decision for one collection, and why.
type PlanEntry struct {
	Collection catalog.Collection
	Decision   Decision
	// Reason in words: the threshold reached for DecideRun, what holds the
	// collection back otherwise.
	Reason string
	// The effective thresholds (overrides, else the server's flags).
	MinCompactionSize int64
	MaxUncompactedAge time.Duration
	// RetryAfter, for DecideBackingOff: when the backoff ends.
	RetryAfter time.Time
	// Priority is the collection's priority class.
	Priority catalog.PriorityClass
	// Freshness is the collection against its freshness objectives.
	Freshness Freshness
	// Window is the collection against its compaction windows: whether
	// one is open, and the next window.
	Window WindowState
	// Estimate of the job priced with this node's measured throughput,
	// for DecideRun when the executor estimates and Plan was asked to; nil
	// otherwise. EstimateError says why it is missing.
	Estimate      *Prediction
	EstimateError string
	// IndexRebuild is the collection's index rebuild job, queued or
	// running; nil for none.
	IndexRebuild *catalog.Job
}

// PlanTotals sums the estimates of a plan's entries (jobtype.PlanTotals).
type PlanTotals = jobtype.PlanTotals

// Plan is what the scheduler would do on its next run.
type Plan struct {
	At    time.Time
	Pause PauseState // the global pause
	// Entries: the collections it would compact, in the order it would
	// queue them (priority class, then freshness debt, then oldest backlog
	// first), then the others by name.
	Entries []PlanEntry
	// queued are the QUEUED compactions the plan was made with.
	queued []catalog.Job
	// Totals of the estimates (zero without them).
	Totals PlanTotals
	// Workers is how many jobs run at once (--workers).
	Workers int
}

// maxEstimates bounds the estimates of one Plan: each reads a manifest and
// a log slice.
const maxEstimates = 50

// Plan returns what the scheduler would do on its next run and why, for
// every collection, without writing anything. With estimate set, the
// collections it would compact (up to 50) carry an estimate from their
// manifest and log when the executor implements Estimator, priced in time
// with the throughput this node measured over its last 20 successful jobs
// and the cap in force (see Prediction), and Totals sums them.
func (m *Manager) Plan(ctx context.Context, estimate bool) (Plan, error) {
	p, err := m.sched.plan(ctx)
	if err != nil {
		return Plan{}, err
	}
	p.Workers = m.cfg.Workers
	est, ok := m.exec.(Estimator)
	if !estimate || !ok {
		return p, nil
	}
	priceOf := m.pricer(ctx)
	n := 0
	for i := range p.Entries {
		e := &p.Entries[i]
		if e.Decision != DecideRun || n >= maxEstimates {
			continue
		}
		n++
		if x, err := est.Estimate(ctx, e.Collection.ID); err != nil {
			e.EstimateError = err.Error()
		} else {
			pr := priceOf(x)
			// Only jobs the scheduler would start now are priced: inside
			// an open window, say until when it stays open.
			if w := e.Window; len(w.Windows) > 0 && w.Open && !w.NextEnd.IsZero() {
				pr.Window = "now, in a window open until " + w.NextEnd.UTC().Format(time.RFC3339)
			}
			e.Estimate = &pr
			p.Totals.Add(&pr)
		}
	}
	return p, nil
}

// plan decides, for every collection, what the scheduler does: the one
// place its rules are written (Schedule and Plan both use it).
func (s *scheduler) plan(ctx context.Context) (Plan, error) {
	pause, err := readPause(ctx, s.store)
	if err != nil {
		return Plan{}, err
	}
	colls, err := s.store.ListCollections(ctx)
	if err != nil {
		return Plan{}, fmt.Errorf("list collections: %w", err)
	}
	active, err := s.store.ListJobs(ctx, catalog.JobFilter{States: []catalog.JobState{catalog.JobQueued, catalog.JobRunning}})
	if err != nil {
		return Plan{}, fmt.Errorf("list active jobs: %w", err)
	}
	now := s.clock().UTC().Truncate(time.Millisecond)
	p := Plan{At: now, Pause: pause}
	// A running job of any kind holds the collection (one runs at a time);
	// only a queued compaction makes another one redundant.
	state := make(map[string]catalog.JobState, len(active))
	running := make(map[string]jobtype.Kind, len(active))
	rebuilds := make(map[string]catalog.Job)
	for _, j := range active {
		if kindOf(j) == jobtype.KindIndexRebuild {
			if _, ok := rebuilds[j.CollectionID]; !ok || j.State == catalog.JobRunning {
				rebuilds[j.CollectionID] = j
			}
		}
		if j.State == catalog.JobRunning {
			running[j.CollectionID] = kindOf(j)
		}
		if state[j.CollectionID] != catalog.JobRunning && (j.State == catalog.JobRunning || kindOf(j) == jobtype.KindCompaction) {
			state[j.CollectionID] = j.State
		}
		if j.State == catalog.JobQueued && kindOf(j) == jobtype.KindCompaction {
			p.queued = append(p.queued, j)
		}
	}
	// Entries are built in place and ordered by index: a PlanEntry is
	// about 650 bytes, and 10,000 of them copied through appends and a
	// stable sort cost as much as deciding them.
	entries := make([]PlanEntry, len(colls))
	var run, rest []int
	for i := range colls {
		c := &colls[i]
		e := &entries[i]
		*e = PlanEntry{Collection: *c, Priority: c.Policy.Priority, Freshness: freshnessOf(*c, now)}
		if j, ok := rebuilds[c.ID]; ok {
			e.IndexRebuild = &j
		}
		e.MinCompactionSize, e.MaxUncompactedAge = s.thresholds(*c)
		if e.Window, err = s.windowState(*c, now); err != nil {
			s.logger.Warn("read compaction windows", "collection", c.ID, "err", err)
		}
		age := time.Duration(0)
		if !c.OldestUncompactedAt.IsZero() {
			age = now.Sub(c.OldestUncompactedAt)
		}
		switch {
		case c.Backlog() <= 0:
			e.Decision, e.Reason = DecideEmpty, "nothing to compact"
		case state[c.ID] == catalog.JobRunning:
			e.Decision, e.Reason = DecideRunning, "a job of it is running"
			if k := running[c.ID]; k != jobtype.KindCompaction {
				e.Reason = fmt.Sprintf("a job of it is running (%s)", k)
			}
		case state[c.ID] == catalog.JobQueued:
			e.Decision, e.Reason = DecideQueued, "a compaction of it is queued"
		case pause.Paused:
			e.Decision, e.Reason = DecideSchedPaused, "automatic compaction is paused: "+cmpText(pause.Reason)
		case c.Paused():
			e.Decision, e.Reason = DecidePaused, "its automatic compaction is paused: "+cmpText(c.PauseReason)
		case c.DeadLettered():
			e.Decision, e.Reason = DecideDeadLettered, fmt.Sprintf("dead-lettered after %d consecutive failures", c.FailureCount)
		case now.Before(c.RetryAfter):
			e.Decision, e.RetryAfter = DecideBackingOff, c.RetryAfter
			e.Reason = fmt.Sprintf("backing off after %d failures until %s", c.RetryCount, c.RetryAfter.UTC().Format(time.RFC3339))
		case c.Backlog() >= e.MinCompactionSize:
			e.Decision, e.Reason = DecideRun, fmt.Sprintf("backlog of %d records (minimum %d)", c.Backlog(), e.MinCompactionSize)
		case age >= e.MaxUncompactedAge:
			e.Decision, e.Reason = DecideRun, fmt.Sprintf("oldest record waited %s (maximum %s)", age.Round(time.Second), e.MaxUncompactedAge)
		default:
			e.Decision = DecideBelow
			e.Reason = fmt.Sprintf("backlog of %d records under the minimum %d, oldest record waited %s of %s",
				c.Backlog(), e.MinCompactionSize, age.Round(time.Second), e.MaxUncompactedAge)
		}
		if e.Decision == DecideRun && !e.Window.Open {
			e.Decision = DecideOutsideWindow
			e.Reason += "; outside its compaction windows until " + e.Window.NextStart.UTC().Format(time.RFC3339)
		}
		if e.Decision == DecideRun {
			run = append(run, i)
		} else {
			rest = append(rest, i)
		}
	}
	sortRun(entries, run)
	permute(entries, append(run, rest...))
	p.Entries = entries
	return p, nil
}

// permute reorders entries in place so that entries[k] is the entry that
// was at order[k] (order, a permutation of the indices, is consumed):
// each entry moves once, following the permutation's cycles.
func permute(entries []PlanEntry, order []int) {
	for k := range order {
		if order[k] < 0 {
			continue // placed on an earlier cycle
		}
		first, j := entries[k], k
		for {
			src := order[j]
			order[j] = -1
			if src == k {
				entries[j] = first
				break
			}
			entries[j] = entries[src]
			j = src
		}
	}
}

// cmpText is s, or "no reason given".
func cmpText(s string) string {
	if s == "" {
		return "no reason given"
	}
	return s
}

// thresholds returns the scheduler's effective thresholds for c: its
// overrides, else the server's.
func (s *scheduler) thresholds(c catalog.Collection) (minSize int64, maxAge time.Duration) {
	minSize, maxAge = s.cfg.MinCompactionSize, s.cfg.MaxAge
	if c.Settings.MinCompactionSize > 0 {
		minSize = c.Settings.MinCompactionSize
	}
	if c.Settings.MaxUncompactedAge > 0 {
		maxAge = c.Settings.MaxUncompactedAge
	}
	return minSize, maxAge
}

package manager

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/jobtype"
)

// Decision says what the scheduler does with a collection on its next run.
type Decision string

// Decisions of the scheduler. Every collection gets exactly one.
const (
	DecideRun          Decision = "run"    // a SCHEDULED job is queued
	DecideSchedPaused  Decision = "paused" // automatic compaction is paused everywhere
	DecidePaused       Decision = "collection-paused"
	DecideDeadLettered Decision = "dead-lettered" // too many consecutive failures
	DecideBackingOff   Decision = "backing-off"   // a failure's retry delay has not passed
	DecideRunning      Decision = "running"       // a job of it is running
	DecideQueued       Decision = "queued"        // a compaction of it is queued already
	DecideBelow        Decision = "below-thresholds"
	DecideEmpty        Decision = "empty" // nothing to compact
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
	// Estimate of the job, for DecideRun when the executor estimates and
	// Plan was asked to; nil otherwise. EstimateError says why it is missing.
	Estimate      *Estimate
	EstimateError string
	// IndexRebuild is the collection's index rebuild job, queued or
	// running; nil for none.
	IndexRebuild *catalog.Job
}

// Plan is what the scheduler would do on its next run.
type Plan struct {
	At    time.Time
	Pause PauseState // the global pause
	// Entries: the collections it would compact, in the order it would
	// queue them (oldest backlog first), then the others by name.
	Entries []PlanEntry
}

// maxEstimates bounds the estimates of one Plan: each reads a manifest and
// a log slice.
const maxEstimates = 50

// Plan returns what the scheduler would do on its next run and why, for
// every collection, without writing anything. With estimate set, the
// collections it would compact (up to 50) carry an Estimate from their
// manifest and log when the executor implements Estimator.
func (m *Manager) Plan(ctx context.Context, estimate bool) (Plan, error) {
	p, err := m.sched.plan(ctx)
	if err != nil {
		return Plan{}, err
	}
	est, ok := m.exec.(Estimator)
	if !estimate || !ok {
		return p, nil
	}
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
			e.Estimate = &x
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
	}
	now := s.clock().UTC().Truncate(time.Millisecond)
	p := Plan{At: now, Pause: pause}
	var run, rest []PlanEntry
	for _, c := range colls {
		e := PlanEntry{Collection: c}
		if j, ok := rebuilds[c.ID]; ok {
			e.IndexRebuild = &j
		}
		e.MinCompactionSize, e.MaxUncompactedAge = s.thresholds(c)
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
		if e.Decision == DecideRun {
			run = append(run, e)
		} else {
			rest = append(rest, e)
		}
	}
	slices.SortStableFunc(run, func(a, b PlanEntry) int {
		return cmpTime(a.Collection.OldestUncompactedAt, b.Collection.OldestUncompactedAt)
	})
	p.Entries = append(run, rest...)
	return p, nil
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

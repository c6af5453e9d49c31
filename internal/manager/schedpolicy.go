package manager

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/window"
)

// The scheduling policy an operator states (README "Scheduling policy",
// docs/semantics.md): priority classes with aging (the claim order in the
// catalog: catalog.ClaimJob), compaction windows (scheduled jobs start
// only inside them; the catalog's claim honours each queued job's start
// bounds, which the scheduler keeps in step with the windows), and
// freshness objectives (the claim order's freshness debt, gauges, and the
// shipped burn-rate alerts).

// Window-close policies: what happens to a scheduled job running when its
// compaction window closes (Config.WindowClose).
const (
	// WindowCloseFinish lets the job finish (the default: a compaction
	// that stopped would rewrite what it wrote in the next window).
	WindowCloseFinish = "finish"
	// WindowCloseRequeue stops it at its next batch boundary (it ends
	// CANCELLED with NoteWindowClosed, committing nothing) and queues a
	// scheduled job for the next window.
	WindowCloseRequeue = "requeue"
)

// NoteWindowClosed is the note of a job stopped by WindowCloseRequeue.
const NoteWindowClosed = "stopped: its compaction window closed; queued again for the next window"

// errWindowClosed is the cause of a job stopped by WindowCloseRequeue.
var errWindowClosed = errors.New("compaction window closed")

// AtRiskDebt is the freshness debt from which a collection is shown at
// risk of breaking its objective (1 and more: broken).
const AtRiskDebt = 0.8

// Freshness is a collection's freshness against its objectives at one time.
type Freshness struct {
	// MaxAge and MaxBacklog are the objectives (0: none).
	MaxAge     time.Duration
	MaxBacklog int64
	// Age of the oldest uncompacted record (0: none) and the backlog
	// (records).
	Age     time.Duration
	Backlog int64
	// Debt is the larger of Age/MaxAge and Backlog/MaxBacklog over the
	// objectives set; 0 without objectives, 1 and more when an objective
	// is broken. The claim order ranks by it within a priority rank.
	Debt float64
}

// Objective reports whether the collection has a freshness objective.
func (f Freshness) Objective() bool { return f.MaxAge > 0 || f.MaxBacklog > 0 }

// Breached reports whether an objective is broken.
func (f Freshness) Breached() bool { return f.Objective() && f.Debt >= 1 }

// AtRisk reports whether the debt has reached AtRiskDebt.
func (f Freshness) AtRisk() bool { return f.Objective() && f.Debt >= AtRiskDebt }

// FreshnessOf is c's freshness against its objectives at now.
func FreshnessOf(c catalog.Collection, now time.Time) Freshness { return freshnessOf(c, now) }

// freshnessOf is c's freshness at now.
func freshnessOf(c catalog.Collection, now time.Time) Freshness {
	f := Freshness{MaxAge: c.Policy.ObjectiveMaxAge, MaxBacklog: c.Policy.ObjectiveMaxBacklog, Backlog: max(c.Backlog(), 0)}
	if !c.OldestUncompactedAt.IsZero() && now.After(c.OldestUncompactedAt) {
		f.Age = now.Sub(c.OldestUncompactedAt)
	}
	if f.MaxAge > 0 {
		f.Debt = max(f.Debt, float64(f.Age)/float64(f.MaxAge))
	}
	if f.MaxBacklog > 0 {
		f.Debt = max(f.Debt, float64(f.Backlog)/float64(f.MaxBacklog))
	}
	return f
}

// WindowState is where a collection stands against its compaction windows.
type WindowState struct {
	// Windows in force: the collection's own, else the server's
	// (--compaction-window); empty: scheduled jobs start at any time.
	Windows []string
	// Own: Windows are the collection's own.
	Own bool
	// Open: scheduled jobs may start now (always true without windows).
	Open bool
	// NextStart and NextEnd: the window open now (NextStart = the plan's
	// time, NextEnd = when it closes) or the next one; zero without
	// windows.
	NextStart, NextEnd time.Time
}

// Restricted reports whether windows apply.
func (w WindowState) Restricted() bool { return len(w.Windows) > 0 }

// windowsOf returns the windows in force for c: its own, else the
// server's. A stored window that no longer parses (not possible through
// the API, which parses first) is an error naming the collection, and the
// server's windows apply meanwhile, so that one bad row does not stop the
// scheduling of every collection.
func (s *scheduler) windowsOf(c catalog.Collection) (window.Set, bool, error) {
	if len(c.Policy.Windows) == 0 {
		return s.windows, false, nil
	}
	set, err := window.ParseSet(c.Policy.Windows)
	if err != nil {
		return s.windows, false, fmt.Errorf("collection %s: stored compaction windows: %w; the server's apply", c.ID, err)
	}
	return set, true, nil
}

// windowState is c's WindowState at now; its error is windowsOf's, with
// the state of the server's windows.
func (s *scheduler) windowState(c catalog.Collection, now time.Time) (WindowState, error) {
	set, own, err := s.windowsOf(c)
	w := WindowState{Windows: set.Strings(), Own: own, Open: true}
	if set.Always() {
		return w, err
	}
	w.NextStart, w.NextEnd, _ = set.Next(now)
	w.Open = !w.NextStart.After(now)
	return w, err
}

// startBounds are the bounds a queued scheduled job of a collection in
// window state w gets: before the end of the window open now, or inside
// the next one; none without windows.
func startBounds(w WindowState) (after, before time.Time) {
	switch {
	case !w.Restricted():
		return time.Time{}, time.Time{}
	case w.Open:
		return time.Time{}, w.NextEnd
	}
	return w.NextStart, w.NextEnd
}

// sortRun orders run, indices into entries of the entries the scheduler
// queues, as the claim order ranks a fresh job: priority rank, then
// freshness debt (largest first), then the oldest backlog; a stable sort,
// so ties keep their order in entries (by name).
func sortRun(entries []PlanEntry, run []int) {
	slices.SortStableFunc(run, func(i, j int) int {
		a, b := &entries[i], &entries[j]
		return cmp.Or(
			cmp.Compare(a.Priority.Rank(), b.Priority.Rank()),
			cmp.Compare(b.Freshness.Debt, a.Freshness.Debt),
			cmpTime(a.Collection.OldestUncompactedAt, b.Collection.OldestUncompactedAt))
	})
}

// keepWindows moves the start bounds of queued scheduled jobs in step with
// their collections' windows at the plan's time: a job whose window closed
// before it was claimed waits for the next one (the catalog's claim honours
// the bounds), a job queued without bounds (a continuation) gets those of
// the window open now, and a collection whose windows were removed frees
// its job. Expedited and one-off jobs are left alone.
func (s *scheduler) keepWindows(ctx context.Context, p Plan) error {
	states := make(map[string]WindowState, len(p.Entries))
	for _, e := range p.Entries {
		states[e.Collection.ID] = e.Window
	}
	var errs []error
	for _, j := range p.queued {
		w, ok := states[j.CollectionID]
		if !ok || j.Trigger != catalog.TriggerScheduled || j.Expedited {
			continue
		}
		after, before := startBounds(w)
		if j.StartAfter.Equal(after) && j.StartBefore.Equal(before) {
			continue
		}
		if _, err := s.store.RescheduleJob(ctx, j.ID, after, before); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// windowClosed reports whether run r must stop because its window closed
// (Config.WindowClose requeue, a scheduled job past its start bound).
func (m *Manager) windowClosed(r *run) bool {
	j, _, _ := m.runs.job(r)
	return m.cfg.WindowClose == WindowCloseRequeue && j.Trigger == catalog.TriggerScheduled && !j.Expedited &&
		!j.StartBefore.IsZero() && !m.now().Before(j.StartBefore)
}

// requeueForWindow queues the scheduled job of a job stopped because its
// window closed, bounded to the collection's next window.
func (m *Manager) requeueForWindow(ctx context.Context, e *jobEnd) {
	if e.row.State != catalog.JobCancelled || e.row.Note != NoteWindowClosed {
		return
	}
	c, err := m.store.GetCollection(ctx, e.row.CollectionID)
	if err != nil {
		e.log.Warn("read collection to requeue for its next window", "err", err)
		return
	}
	w, err := m.sched.windowState(c, m.now())
	if err != nil {
		e.log.Warn("read compaction windows", "err", err)
	}
	after, before := startBounds(w)
	next, created, err := m.store.EnqueueJob(ctx, catalog.JobRequest{
		CollectionID: e.row.CollectionID, Kind: e.row.Kind, Trigger: catalog.TriggerScheduled, OldestAt: c.OldestUncompactedAt,
		Reason:     fmt.Sprintf("queued again: job %.8s stopped when its compaction window closed", e.row.ID),
		StartAfter: after, StartBefore: before, TraceParent: e.row.TraceParent,
	})
	if err != nil {
		e.log.Error("queue job for the next window", "err", err)
	} else if created {
		m.changedJob(next)
	}
}

// SetCollectionPolicy changes a collection's scheduling policy (the fields
// of u that are set) and returns the collection. Windows are parsed first:
// an invalid one is ErrInvalidArgument naming its bad part, and nothing
// changes. Errors: ErrInvalidArgument, ErrNotFound, store errors.
func (m *Manager) SetCollectionPolicy(ctx context.Context, collectionID string, u catalog.PolicyUpdate) (catalog.Collection, error) {
	if u.Windows != nil {
		set, err := window.ParseSet(*u.Windows)
		if err != nil {
			return catalog.Collection{}, fmt.Errorf("collection %s: %w: %w", collectionID, err, ErrInvalidArgument)
		}
		texts := set.Strings() // normalized spacing
		u.Windows = &texts
	}
	c, err := m.store.UpdateCollectionPolicy(ctx, collectionID, u)
	if err != nil {
		return catalog.Collection{}, fmt.Errorf("set scheduling policy of collection %s: %w", collectionID, err)
	}
	m.logger.Info("scheduling policy changed", "collection", collectionID, "priority", c.Policy.Priority.String(),
		"windows", c.Policy.Windows, "objective_max_age", c.Policy.ObjectiveMaxAge, "objective_max_backlog", c.Policy.ObjectiveMaxBacklog)
	return c, nil
}

// ServerWindows returns the server's compaction windows
// (--compaction-window) and the window-close policy.
func (m *Manager) ServerWindows() (windows []string, onClose string) {
	return m.sched.windows.Strings(), m.cfg.WindowClose
}

// Package webtest provides an in-memory web.Source for tests of the status
// page (and for trying the page without a manager), with a fixed data set
// whose names and texts include hostile content.
package webtest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/compactorhq/compactor/web"
)

// CompactCall records one call of Source.Compact.
type CompactCall struct {
	CollectionID string
	Reason       string
}

// Source is an in-memory web.Source. Its data are set with the exported
// methods; every call is recorded. The zero value is empty and usable.
type Source struct {
	mu          sync.Mutex
	jobs        []web.Job
	collections []web.Collection
	nodes       []web.Node
	controls    web.Controls
	plan        []web.PlanEntry
	deadLetters map[string][]web.DeadLetterEvent
	pauses      []PauseCall
	history     map[string][]web.Point
	errs        map[string]error // method name → error to return
	queries     []web.JobQuery
	compacts    []CompactCall
	cancels     []string
	nextJob     int

	subMu sync.Mutex
	subs  map[*subscriber]struct{}
}

type subscriber struct {
	ctx context.Context
	ch  chan struct{}
}

// New returns a Source holding copies of jobs and collections.
func New(jobs []web.Job, collections []web.Collection) *Source {
	s := &Source{}
	s.SetJobs(jobs)
	s.SetCollections(collections)
	return s
}

// SetJobs replaces the jobs.
func (s *Source) SetJobs(jobs []web.Job) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.jobs = slices.Clone(jobs)
}

// SetCollections replaces the collections.
func (s *Source) SetCollections(cs []web.Collection) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.collections = slices.Clone(cs)
}

// SetBacklogHistory sets the backlog samples of a collection.
func (s *Source) SetBacklogHistory(collectionID string, pts []web.Point) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.history == nil {
		s.history = map[string][]web.Point{}
	}
	s.history[collectionID] = slices.Clone(pts)
}

// FailWith makes the named method ("Jobs", "Job", "Collections",
// "Collection", "BacklogHistory", "Subscribe", "Compact", "Cancel") return
// err; nil clears it.
func (s *Source) FailWith(method string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.errs == nil {
		s.errs = map[string]error{}
	}
	if err == nil {
		delete(s.errs, method)
		return
	}
	s.errs[method] = err
}

// Queries returns the JobQuery of every Jobs call so far.
func (s *Source) Queries() []web.JobQuery {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.queries)
}

// CompactCalls returns the Compact calls so far.
func (s *Source) CompactCalls() []CompactCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.compacts)
}

// CancelCalls returns the job ids of the Cancel calls so far.
func (s *Source) CancelCalls() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.cancels)
}

func (s *Source) err(method string) error { return s.errs[method] }

// Jobs filters like the catalog: states, collection, trigger; newest first.
func (s *Source) Jobs(_ context.Context, q web.JobQuery) ([]web.Job, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queries = append(s.queries, web.JobQuery{States: slices.Clone(q.States), CollectionID: q.CollectionID, Trigger: q.Trigger, Limit: q.Limit})
	if err := s.err("Jobs"); err != nil {
		return nil, err
	}
	var out []web.Job
	for _, j := range s.jobs {
		if len(q.States) > 0 && !slices.Contains(q.States, j.State) {
			continue
		}
		if q.CollectionID != "" && j.CollectionID != q.CollectionID {
			continue
		}
		if q.Trigger != "" && j.Trigger != q.Trigger {
			continue
		}
		out = append(out, j)
	}
	slices.SortStableFunc(out, func(a, b web.Job) int { return b.CreatedAt.Compare(a.CreatedAt) })
	if q.Limit > 0 && len(out) > q.Limit {
		out = out[:q.Limit]
	}
	return out, nil
}

// Queue returns the QUEUED jobs in the order SetJobs gave them: the test
// sets the run order.
func (s *Source) Queue(context.Context) ([]web.Job, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.err("Queue"); err != nil {
		return nil, err
	}
	var out []web.Job
	for _, j := range s.jobs {
		if j.State == web.StateQueued {
			out = append(out, j)
		}
	}
	return out, nil
}

// PauseCall is one Pause or Resume call.
type PauseCall struct {
	CollectionID string // "" for the global pause
	Paused       bool   // Pause (true) or Resume (false)
	Reason, By   string
}

// SetPlan replaces what Plan returns.
func (s *Source) SetPlan(entries []web.PlanEntry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.plan = slices.Clone(entries)
}

// Plan returns what SetPlan gave (estimates included as given, whatever
// estimate says).
func (s *Source) Plan(context.Context, bool) ([]web.PlanEntry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.err("Plan"); err != nil {
		return nil, err
	}
	return slices.Clone(s.plan), nil
}

// Controls returns the global pause, as Pause and Resume left it.
// SetControls replaces the global controls (pause and throughput cap).
func (s *Source) SetControls(c web.Controls) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.controls = c
}

func (s *Source) Controls(context.Context) (web.Controls, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.err("Controls"); err != nil {
		return web.Controls{}, err
	}
	return s.controls, nil
}

// Pause records the call and pauses globally or the collection (ErrNotFound
// for an unknown one).
func (s *Source) Pause(_ context.Context, collectionID, reason, by string) error {
	return s.setPause(collectionID, true, reason, by)
}

// Resume records the call and resumes.
func (s *Source) Resume(_ context.Context, collectionID, by string) error {
	return s.setPause(collectionID, false, "", by)
}

func (s *Source) setPause(collectionID string, paused bool, reason, by string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pauses = append(s.pauses, PauseCall{CollectionID: collectionID, Paused: paused, Reason: reason, By: by})
	if err := s.err("Pause"); err != nil {
		return err
	}
	if collectionID == "" {
		s.controls = web.Controls{Paused: paused}
		if paused {
			s.controls = web.Controls{Paused: true, Reason: reason, By: by, Since: Now}
		}
		return nil
	}
	for i, c := range s.collections {
		if c.ID == collectionID {
			c.Paused, c.PauseReason, c.PausedBy, c.PausedAt = paused, reason, by, Now
			if !paused {
				c.PauseReason, c.PausedBy, c.PausedAt = "", "", time.Time{}
			}
			s.collections[i] = c
			return nil
		}
	}
	return fmt.Errorf("collection %s: %w", collectionID, web.ErrNotFound)
}

// PauseCalls returns the Pause and Resume calls so far.
func (s *Source) PauseCalls() []PauseCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.pauses)
}

// SetNodes replaces the nodes.
func (s *Source) SetNodes(nodes []web.Node) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nodes = slices.Clone(nodes)
}

// Nodes returns the nodes SetNodes gave.
func (s *Source) Nodes(context.Context) ([]web.Node, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.err("Nodes"); err != nil {
		return nil, err
	}
	return slices.Clone(s.nodes), nil
}

// Job returns the job with that id.
func (s *Source) Job(_ context.Context, id string) (web.Job, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.err("Job"); err != nil {
		return web.Job{}, err
	}
	for _, j := range s.jobs {
		if j.ID == id {
			return j, nil
		}
	}
	return web.Job{}, fmt.Errorf("job %q: %w", id, web.ErrNotFound)
}

// CollectionsPage returns a page of the collections in q's order
// (web.CompareCursors), as a catalog cuts it. FailWith("Collections", err)
// makes it fail.
func (s *Source) CollectionsPage(_ context.Context, q web.CollectionQuery) (web.CollectionPage, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.err("Collections"); err != nil {
		return web.CollectionPage{}, err
	}
	if q.Limit <= 0 {
		return web.CollectionPage{}, fmt.Errorf("page of %d collections", q.Limit)
	}
	key := func(c web.Collection) web.CollectionCursor { return web.CursorOf(c, q.Sort) }
	all := slices.Clone(s.collections)
	slices.SortFunc(all, func(a, b web.Collection) int { return web.CompareCursors(key(a), key(b), q.Sort, q.Desc) })
	var in []web.Collection
	for _, c := range all {
		switch {
		case q.After != nil && web.CompareCursors(key(c), *q.After, q.Sort, q.Desc) <= 0:
		case q.Before != nil && web.CompareCursors(key(c), *q.Before, q.Sort, q.Desc) >= 0:
		default:
			in = append(in, c)
		}
	}
	p := web.CollectionPage{Total: len(all), More: len(in) > q.Limit}
	if q.Before != nil {
		p.Collections = in[max(0, len(in)-q.Limit):]
	} else {
		p.Collections = in[:min(len(in), q.Limit)]
	}
	return p, nil
}

// CollectionSummary summarizes the collections as web.CollectionSummary
// says. FailWith("Collections", err) makes it fail.
func (s *Source) CollectionSummary(_ context.Context, q web.SummaryQuery) (web.CollectionSummary, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.err("Collections"); err != nil {
		return web.CollectionSummary{}, err
	}
	sum := web.CollectionSummary{Count: len(s.collections)}
	var largest []web.Collection
	for _, c := range s.collections {
		sum.Backlog += c.Backlog
		if c.DeadLettered || c.ObjectiveMaxAge > 0 || c.ObjectiveMaxBacklog > 0 {
			sum.Notable = append(sum.Notable, c)
		}
		if c.Backlog > 0 {
			largest = append(largest, c)
		}
	}
	byBacklog := func(c web.Collection) web.CollectionCursor { return web.CursorOf(c, web.SortBacklog) }
	slices.SortFunc(largest, func(a, b web.Collection) int {
		return web.CompareCursors(byBacklog(a), byBacklog(b), web.SortBacklog, true)
	})
	sum.Largest = largest[:min(len(largest), q.Largest)]
	names := slices.Clone(s.collections)
	slices.SortFunc(names, func(a, b web.Collection) int {
		return web.CompareCursors(web.CursorOf(a, web.SortName), web.CursorOf(b, web.SortName), web.SortName, false)
	})
	sum.Names = names[:min(len(names), q.Names)]
	return sum, nil
}

// Collection returns the collection with that id.
func (s *Source) Collection(_ context.Context, id string) (web.Collection, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.err("Collection"); err != nil {
		return web.Collection{}, err
	}
	for _, c := range s.collections {
		if c.ID == id {
			return c, nil
		}
	}
	return web.Collection{}, fmt.Errorf("collection %q: %w", id, web.ErrNotFound)
}

// BacklogHistory returns the samples set for the collection.
func (s *Source) BacklogHistory(_ context.Context, id string) ([]web.Point, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.err("BacklogHistory"); err != nil {
		return nil, err
	}
	return slices.Clone(s.history[id]), nil
}

// Compact records the call and queues a job for a known collection; like
// the manager, an already queued job of the collection is returned instead.
func (s *Source) Compact(_ context.Context, collectionID, reason string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.compacts = append(s.compacts, CompactCall{CollectionID: collectionID, Reason: reason})
	if err := s.err("Compact"); err != nil {
		return "", err
	}
	var c *web.Collection
	for i := range s.collections {
		if s.collections[i].ID == collectionID {
			c = &s.collections[i]
		}
	}
	if c == nil {
		return "", fmt.Errorf("collection %q: %w", collectionID, web.ErrNotFound)
	}
	for _, j := range s.jobs {
		if j.CollectionID == collectionID && j.State == web.StateQueued {
			return j.ID, nil
		}
	}
	s.nextJob++
	id := fmt.Sprintf("new-job-%d", s.nextJob)
	s.jobs = append(s.jobs, web.Job{
		ID: id, CollectionID: collectionID, CollectionName: c.Name, Trigger: web.TriggerOneOff,
		State: web.StateQueued, Reason: reason, Attempt: 1, CreatedAt: time.Now().UTC(),
	})
	return id, nil
}

// Cancel records the call; a queued job ends cancelled, a running one is
// left to its worker, a finished one is a conflict.
func (s *Source) Cancel(_ context.Context, jobID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cancels = append(s.cancels, jobID)
	if err := s.err("Cancel"); err != nil {
		return err
	}
	for i := range s.jobs {
		j := &s.jobs[i]
		if j.ID != jobID {
			continue
		}
		switch j.State {
		case web.StateQueued:
			j.State = web.StateCancelled
			j.FinishedAt = time.Now().UTC()
			return nil
		case web.StateRunning:
			return nil
		default:
			return fmt.Errorf("job %q is %s: %w", jobID, j.State, web.ErrConflict)
		}
	}
	return fmt.Errorf("job %q: %w", jobID, web.ErrNotFound)
}

// Subscribe returns a channel that Tick sends on; it is closed after ctx
// ends.
func (s *Source) Subscribe(ctx context.Context) (<-chan struct{}, error) {
	s.mu.Lock()
	err := s.err("Subscribe")
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	sub := &subscriber{ctx: ctx, ch: make(chan struct{})}
	s.subMu.Lock()
	if s.subs == nil {
		s.subs = map[*subscriber]struct{}{}
	}
	s.subs[sub] = struct{}{}
	s.subMu.Unlock()
	go func() {
		<-ctx.Done()
		s.subMu.Lock() // Tick holds it while sending: no send after close
		delete(s.subs, sub)
		close(sub.ch)
		s.subMu.Unlock()
	}()
	return sub.ch, nil
}

// Subscribers returns the number of live subscriptions.
func (s *Source) Subscribers() int {
	s.subMu.Lock()
	defer s.subMu.Unlock()
	return len(s.subs)
}

// Tick delivers one change notice to every subscriber, waiting until each
// has received it (or its context has ended), and returns how many
// received it. Because it waits, a test knows the handler has seen the tick
// when Tick returns.
func (s *Source) Tick() int {
	s.subMu.Lock()
	defer s.subMu.Unlock()
	n := 0
	for sub := range s.subs {
		select {
		case sub.ch <- struct{}{}:
			n++
		case <-sub.ctx.Done():
		}
	}
	return n
}

// SetDeadLetterHistory replaces what DeadLetterHistory returns for a
// collection.
func (s *Source) SetDeadLetterHistory(collectionID string, evs []web.DeadLetterEvent) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.deadLetters == nil {
		s.deadLetters = map[string][]web.DeadLetterEvent{}
	}
	s.deadLetters[collectionID] = slices.Clone(evs)
}

// DeadLetterHistory returns what SetDeadLetterHistory gave.
func (s *Source) DeadLetterHistory(_ context.Context, collectionID string) ([]web.DeadLetterEvent, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.err("DeadLetterHistory"); err != nil {
		return nil, err
	}
	return slices.Clone(s.deadLetters[collectionID]), nil
}

package manager

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/compactorhq/compactor/internal/catalog"
)

// memStore is an in-memory Store for manager tests.
type memStore struct {
	mu    sync.Mutex
	colls map[string]*catalog.Collection
	jobs  map[string]catalog.Job
	order []string // job ids in insertion order
	fail  error    // when set, every call fails with it
	// insertGate, when set, holds every InsertJob until it is closed (a
	// slow catalog write).
	insertGate chan struct{}
}

func newMemStore() *memStore {
	return &memStore{colls: map[string]*catalog.Collection{}, jobs: map[string]catalog.Job{}}
}

// addCollection adds a collection with a backlog of n records appended at t.
func (s *memStore) addCollection(id string, n int64, t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := &catalog.Collection{ID: id, Name: "name-" + id, LogPosition: n, CreatedAt: t}
	if n > 0 {
		c.OldestUncompactedAt = t
	}
	s.colls[id] = c
}

func (s *memStore) append(id string, n int64, t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.colls[id]
	if c.Backlog() == 0 {
		c.OldestUncompactedAt = t
	}
	c.LogPosition += n
}

func (s *memStore) collection(id string) catalog.Collection {
	s.mu.Lock()
	defer s.mu.Unlock()
	return *s.colls[id]
}

func (s *memStore) GetCollection(_ context.Context, id string) (catalog.Collection, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return catalog.Collection{}, s.fail
	}
	c, ok := s.colls[id]
	if !ok {
		return catalog.Collection{}, fmt.Errorf("collection %s: %w", id, catalog.ErrNotFound)
	}
	return *c, nil
}

func (s *memStore) ListCollections(context.Context) ([]catalog.Collection, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return nil, s.fail
	}
	var out []catalog.Collection
	for _, c := range s.colls {
		out = append(out, *c)
	}
	slices.SortFunc(out, func(a, b catalog.Collection) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

func (s *memStore) InsertJob(_ context.Context, j catalog.Job) error {
	s.mu.Lock()
	gate := s.insertGate
	s.mu.Unlock()
	if gate != nil {
		<-gate
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return s.fail
	}
	if _, ok := s.jobs[j.ID]; ok {
		return catalog.ErrAlreadyExists
	}
	s.jobs[j.ID] = j
	s.order = append(s.order, j.ID)
	return nil
}

func (s *memStore) UpdateJob(_ context.Context, j catalog.Job) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.jobs[j.ID]; !ok {
		return catalog.ErrNotFound
	}
	s.jobs[j.ID] = j
	return nil
}

func (s *memStore) GetJob(_ context.Context, id string) (catalog.Job, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	j, ok := s.jobs[id]
	if !ok {
		return catalog.Job{}, fmt.Errorf("job %s: %w", id, catalog.ErrNotFound)
	}
	return j, nil
}

func (s *memStore) ListJobs(_ context.Context, f catalog.JobFilter) ([]catalog.Job, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []catalog.Job
	for _, j := range s.jobs {
		if f.CollectionID != "" && j.CollectionID != f.CollectionID {
			continue
		}
		if len(f.States) > 0 && !slices.Contains(f.States, j.State) {
			continue
		}
		if f.Trigger != "" && j.Trigger != f.Trigger {
			continue
		}
		out = append(out, j)
	}
	slices.SortFunc(out, func(a, b catalog.Job) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return cmp.Compare(b.ID, a.ID)
	})
	if !f.Before.IsZero() { // like the catalog: strictly before the cursor
		out = slices.DeleteFunc(out, func(j catalog.Job) bool {
			c := j.CreatedAt.Compare(f.Before.CreatedAt)
			return c > 0 || c == 0 && j.ID >= f.Before.ID
		})
	}
	if limit := f.Limit; limit <= 0 || limit > 1000 {
		f.Limit = 1000
	}
	if len(out) > f.Limit {
		out = out[:f.Limit]
	}
	return out, nil
}

func (s *memStore) MarkInterrupted(context.Context) ([]catalog.Job, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []catalog.Job
	for id, j := range s.jobs {
		if j.State == catalog.JobRunning {
			j.State, j.Error, j.FinishedAt = catalog.JobFailed, "interrupted: the process stopped while the job ran", time.Now().UTC()
			s.jobs[id] = j
			out = append(out, j)
		}
	}
	return out, nil
}

func (s *memStore) PruneJobs(context.Context, int, time.Time) (int, error) { return 0, nil }

func (s *memStore) RecordFailure(_ context.Context, id string, n int) (int, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.colls[id]
	c.FailureCount++
	if c.FailureCount >= n && c.DeadLetteredAt.IsZero() {
		c.DeadLetteredAt = time.Now().UTC()
	}
	return c.FailureCount, c.DeadLettered(), nil
}

func (s *memStore) RecordSuccess(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.colls[id]
	c.FailureCount, c.DeadLetteredAt = 0, time.Time{}
	return nil
}

// jobsOf returns the jobs of a collection in insertion order.
func (s *memStore) jobsOf(id string) []catalog.Job {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []catalog.Job
	for _, jid := range s.order {
		if j := s.jobs[jid]; j.CollectionID == id {
			out = append(out, j)
		}
	}
	return out
}

// fakeExec compacts the memStore's backlogs: each job takes at most max
// records. Behaviour per collection is set through the maps.
type fakeExec struct {
	store *memStore
	max   int64

	mu      sync.Mutex
	gate    map[string]chan struct{} // when set, Execute waits for it (or ctx)
	errs    map[string][]error       // errors returned by successive calls
	panics  map[string]bool
	commits map[string]bool // when set, a gated job ignores cancellation (a commit in flight)
	calls   map[string]int
	started chan string // receives the collection id of every Execute (buffered)
}

var errTransient = errors.New("storage unavailable")

func newFakeExec(s *memStore, max int64) *fakeExec {
	return &fakeExec{store: s, max: max, gate: map[string]chan struct{}{}, errs: map[string][]error{},
		panics: map[string]bool{}, commits: map[string]bool{}, calls: map[string]int{}, started: make(chan string, 100)}
}

func (f *fakeExec) Execute(ctx context.Context, id string, progress func(Progress), finish func(Outcome) catalog.Job) (Outcome, error) {
	f.mu.Lock()
	f.calls[id]++
	gate := f.gate[id]
	var err error
	if errs := f.errs[id]; len(errs) > 0 {
		err, f.errs[id] = errs[0], errs[1:]
	}
	panics, committing := f.panics[id], f.commits[id]
	f.mu.Unlock()
	select {
	case f.started <- id: // for the tests that follow starts
	default:
	}
	c, gerr := f.store.GetCollection(ctx, id)
	if gerr != nil {
		return Outcome{}, gerr
	}
	n := min(c.Backlog(), f.max)
	progress(Progress{Phase: "reading log", RecordsTotal: n})
	if gate != nil && committing {
		<-gate
	} else if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return Outcome{}, ctx.Err()
		}
	}
	if panics {
		panic("boom")
	}
	if err != nil {
		return Outcome{}, err
	}
	o := Outcome{OffsetStart: c.CompactionOffset, OffsetEnd: c.CompactionOffset + n, RecordsRead: n,
		VersionBefore: c.SegmentVersion, VersionAfter: c.SegmentVersion, Remaining: c.Backlog() - n}
	if n == 0 {
		o.Note = "nothing to compact"
		return o, nil
	}
	o.VersionAfter++
	progress(Progress{Phase: "committing", RecordsRead: n, RecordsTotal: n})
	// The commit: offset, version and the finished job in one step.
	j := finish(o)
	f.store.mu.Lock()
	cc := f.store.colls[id]
	cc.CompactionOffset += n
	cc.SegmentVersion++
	cc.FailureCount, cc.DeadLetteredAt = 0, time.Time{}
	if cc.Backlog() == 0 {
		cc.OldestUncompactedAt = time.Time{}
	}
	f.store.jobs[j.ID] = j
	f.store.mu.Unlock()
	return o, nil
}

func (f *fakeExec) Transient(err error) bool {
	return errors.Is(err, errTransient) || errors.Is(err, context.Canceled)
}

func (f *fakeExec) GC(context.Context, string) error { return nil }

func (f *fakeExec) setGate(id string) chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	ch := make(chan struct{})
	f.gate[id] = ch
	return ch
}

func (f *fakeExec) callsOf(id string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[id]
}

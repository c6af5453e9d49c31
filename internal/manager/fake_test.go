package manager

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/jobtype"
)

// memStore is an in-memory Store for manager tests.
type memStore struct {
	mu    sync.Mutex
	colls map[string]*catalog.Collection
	jobs  map[string]catalog.Job
	order []string // job ids in insertion order
	fail  error    // when set, every call fails with it
	// insertGate, when set, holds every EnqueueJob until it is closed (a
	// slow catalog write).
	insertGate chan struct{}
	batches    []int // calls of each EnqueueJobs
	seq        int
	seqOf      map[string]int // job id -> enqueue order
	nodes      map[string]catalog.Node
	leases     map[string]memLease
	settings   map[string]catalog.Setting
}

func newMemStore() *memStore {
	return &memStore{colls: map[string]*catalog.Collection{}, jobs: map[string]catalog.Job{}, seqOf: map[string]int{},
		nodes: map[string]catalog.Node{}, leases: map[string]memLease{}, settings: map[string]catalog.Setting{}}
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

// insertLocked adds job j; s.mu must be held.
func (s *memStore) insertLocked(j catalog.Job) {
	s.seq++
	j.ID = cmp.Or(j.ID, fmt.Sprint("job-", s.seq))
	s.jobs[j.ID] = j
	s.seqOf[j.ID] = s.seq
	s.order = append(s.order, j.ID)
}

// put stores job j as it is (a row a previous process left).
func (s *memStore) put(j catalog.Job) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.insertLocked(j)
}

// activeOfLocked returns the collection's job in state st; s.mu must be held.
func (s *memStore) activeOfLocked(collectionID string, st catalog.JobState) (catalog.Job, bool) {
	for _, j := range s.jobs {
		if j.CollectionID == collectionID && j.State == st {
			return j, true
		}
	}
	return catalog.Job{}, false
}

// queuedOfLocked returns the collection's QUEUED job of kind k ("" is a
// compaction); s.mu must be held.
func (s *memStore) queuedOfLocked(collectionID string, k jobtype.Kind) (catalog.Job, bool) {
	for _, j := range s.jobs {
		if j.CollectionID == collectionID && j.State == catalog.JobQueued && kindOf(j) == cmp.Or(k, jobtype.KindCompaction) {
			return j, true
		}
	}
	return catalog.Job{}, false
}

func (s *memStore) EnqueueJob(_ context.Context, r catalog.JobRequest) (catalog.Job, bool, error) {
	s.mu.Lock()
	gate := s.insertGate
	s.mu.Unlock()
	if gate != nil {
		<-gate
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return catalog.Job{}, false, s.fail
	}
	return s.enqueueLocked(r)
}

// EnqueueJobs is EnqueueJob for each call, all or nothing per call.
func (s *memStore) EnqueueJobs(_ context.Context, calls []catalog.EnqueueCall) ([]catalog.EnqueueOutcome, error) {
	s.mu.Lock()
	gate := s.insertGate
	s.mu.Unlock()
	if gate != nil {
		<-gate
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return nil, s.fail
	}
	s.batches = append(s.batches, len(calls))
	out := make([]catalog.EnqueueOutcome, len(calls))
	for i, call := range calls {
		var missing []string
		for _, r := range call.Requests {
			if _, ok := s.colls[r.CollectionID]; !ok {
				missing = append(missing, r.CollectionID)
			}
		}
		if len(missing) > 0 && !call.SkipMissing {
			out[i].Err = &catalog.MissingCollectionsError{IDs: missing}
			continue
		}
		for _, r := range call.Requests {
			if _, ok := s.colls[r.CollectionID]; !ok {
				continue
			}
			j, created, err := s.enqueueLocked(r)
			if err != nil {
				return nil, err
			}
			out[i].Jobs = append(out[i].Jobs, catalog.Enqueued{Job: j, Created: created})
		}
	}
	return out, nil
}

// enqueueLocked is EnqueueJob; s.mu must be held.
func (s *memStore) enqueueLocked(r catalog.JobRequest) (catalog.Job, bool, error) {
	c, ok := s.colls[r.CollectionID]
	if !ok {
		return catalog.Job{}, false, fmt.Errorf("collection %s: %w", r.CollectionID, catalog.ErrNotFound)
	}
	if q, ok := s.queuedOfLocked(r.CollectionID, r.Kind); ok {
		if r.Trigger == catalog.TriggerOneOff && q.Trigger != catalog.TriggerOneOff {
			q.Expedited = true
			s.jobs[q.ID] = q
		}
		return q, false, nil
	}
	j := catalog.Job{ID: r.ID, CollectionID: r.CollectionID, Kind: cmp.Or(r.Kind, jobtype.KindCompaction), Trigger: r.Trigger, State: catalog.JobQueued, Reason: r.Reason,
		Attempt: c.RetryCount + 1, CreatedAt: time.Now().UTC().Truncate(time.Millisecond), Continues: r.Continues, OldestAt: r.OldestAt}
	s.insertLocked(j)
	return s.jobs[s.order[len(s.order)-1]], true, nil
}

// queueLocked returns the QUEUED jobs in claim order; s.mu must be held.
func (s *memStore) queueLocked() []catalog.Job {
	var q []catalog.Job
	for _, j := range s.jobs {
		if j.State == catalog.JobQueued {
			q = append(q, j)
		}
	}
	slices.SortFunc(q, func(a, b catalog.Job) int {
		pa, pb := a.Trigger == catalog.TriggerOneOff || a.Expedited, b.Trigger == catalog.TriggerOneOff || b.Expedited
		if pa != pb {
			if pa {
				return -1
			}
			return 1
		}
		return cmp.Or(cmpTime(a.OldestAt, b.OldestAt), cmp.Compare(s.seqOf[a.ID], s.seqOf[b.ID]))
	})
	return q
}

func (s *memStore) ListQueue(_ context.Context, _ int) ([]catalog.Job, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queueLocked(), nil
}

func (s *memStore) ClaimJob(_ context.Context, node string, lease time.Duration) (catalog.Job, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return catalog.Job{}, s.fail
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	for _, j := range s.queueLocked() {
		if _, busy := s.activeOfLocked(j.CollectionID, catalog.JobRunning); busy {
			continue
		}
		if c := s.colls[j.CollectionID]; j.Trigger == catalog.TriggerScheduled && !j.Expedited && now.Before(c.RetryAfter) {
			continue
		}
		name, _, _ := strings.Cut(node, "/")
		j.State, j.StartedAt, j.Node, j.LeaseOwner, j.LeaseExpiresAt = catalog.JobRunning, now, name, node, now.Add(lease)
		j.Progress = catalog.JobProgress{Phase: "starting", UpdatedAt: now}
		s.jobs[j.ID] = j
		return j, nil
	}
	return catalog.Job{}, catalog.ErrNoJob
}

func (s *memStore) RenewLease(_ context.Context, id, node string, lease time.Duration, p catalog.JobProgress) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now().UTC().Truncate(time.Millisecond)
	j, ok := s.jobs[id]
	if !ok || j.State != catalog.JobRunning || j.LeaseOwner != node || j.LeaseExpiresAt.Before(now) {
		return false, catalog.ErrLeaseLost
	}
	p.UpdatedAt = now
	j.LeaseExpiresAt, j.Progress = now.Add(lease), p
	if p.Planned {
		j.OffsetStart, j.OffsetEnd, j.VersionBefore, j.VersionAfter, j.RecordsRead = p.OffsetStart, p.OffsetEnd, p.VersionBefore, p.VersionBefore, p.OpRecordsRead
	}
	s.jobs[id] = j
	return j.CancelRequested, nil
}

// finishLocked is the fenced end of a job; s.mu must be held.
func (s *memStore) finishLocked(node string, j catalog.Job) error {
	cur, ok := s.jobs[j.ID]
	if !ok || cur.State != catalog.JobRunning || cur.LeaseOwner != node || cur.LeaseExpiresAt.Before(time.Now().UTC().Truncate(time.Millisecond)) {
		return catalog.ErrLeaseLost
	}
	j.LeaseOwner, j.LeaseExpiresAt = "", time.Time{}
	s.jobs[j.ID] = j
	return nil
}

func (s *memStore) FinishJob(_ context.Context, node string, j catalog.Job) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.finishLocked(node, j)
}

func (s *memStore) CancelJob(_ context.Context, id, note string) (catalog.Job, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	j, ok := s.jobs[id]
	if !ok {
		return catalog.Job{}, fmt.Errorf("job %s: %w", id, catalog.ErrNotFound)
	}
	switch j.State {
	case catalog.JobQueued:
		j.State, j.FinishedAt, j.Note = catalog.JobCancelled, time.Now().UTC().Truncate(time.Millisecond), note
	case catalog.JobRunning:
		j.CancelRequested = true
	default:
		return j, catalog.ErrJobFinished
	}
	s.jobs[id] = j
	return j, nil
}

// interruptLocked ends a running job as interrupted and queues its
// follow-up; s.mu must be held.
func (s *memStore) interruptLocked(j catalog.Job, why string) catalog.Job {
	j.State, j.FinishedAt, j.Error = catalog.JobFailed, time.Now().UTC().Truncate(time.Millisecond), why
	j.VersionAfter, j.RecordsRead = j.VersionBefore, max(j.RecordsRead, j.Progress.OpRecordsRead)
	j.LeaseOwner, j.LeaseExpiresAt = "", time.Time{}
	s.jobs[j.ID] = j
	if _, queued := s.queuedOfLocked(j.CollectionID, j.Kind); !queued {
		s.insertLocked(catalog.Job{CollectionID: j.CollectionID, Kind: kindOf(j), Trigger: j.Trigger, State: catalog.JobQueued, Reason: j.Reason,
			Attempt: j.Attempt + 1, CreatedAt: j.FinishedAt, Continues: j.ID, Expedited: j.Expedited, OldestAt: j.OldestAt})
	}
	return j
}

func (s *memStore) ExpireLeases(_ context.Context, renewing []string) ([]catalog.Job, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now().UTC().Truncate(time.Millisecond)
	var out []catalog.Job
	for _, j := range s.jobs {
		if j.State == catalog.JobRunning && j.LeaseExpiresAt.Before(now) && !slices.Contains(renewing, j.ID) {
			out = append(out, s.interruptLocked(j, "interrupted: lease of node "+j.Node+" expired"))
		}
	}
	return out, nil
}

func (s *memStore) ReleaseNode(_ context.Context, node string) ([]catalog.Job, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []catalog.Job
	for _, id := range slices.Clone(s.order) {
		if j := s.jobs[id]; j.State == catalog.JobRunning && (j.LeaseOwner == node || strings.HasPrefix(j.LeaseOwner, node+"/") || j.Node == node) {
			out = append(out, s.interruptLocked(j, "interrupted: the process stopped while the job ran"))
		}
	}
	return out, nil
}

func (s *memStore) SetRetry(_ context.Context, id string, retries int, after time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.colls[id]
	if !ok {
		return catalog.ErrNotFound
	}
	c.RetryCount, c.RetryAfter = retries, after
	return nil
}

func (s *memStore) Heartbeat(_ context.Context, n catalog.Node) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	n.HeartbeatAt = time.Now().UTC().Truncate(time.Millisecond)
	s.nodes[n.Name] = n
	return nil
}

func (s *memStore) ListNodes(context.Context) ([]catalog.Node, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []catalog.Node
	now := time.Now()
	for _, n := range s.nodes {
		n.Silence = max(now.Sub(n.HeartbeatAt), 0)
		out = append(out, n)
	}
	slices.SortFunc(out, func(a, b catalog.Node) int { return cmp.Compare(a.Name, b.Name) })
	return out, nil
}

func (s *memStore) AcquireLeaderLease(_ context.Context, name, owner string, ttl time.Duration) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if l, ok := s.leases[name]; ok && l.owner != owner && now.Before(l.expires) {
		return false, nil
	}
	s.leases[name] = memLease{owner: owner, expires: now.Add(ttl)}
	return true, nil
}

func (s *memStore) ReleaseLeaderLease(_ context.Context, name, owner string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l, ok := s.leases[name]; ok && l.owner == owner {
		delete(s.leases, name)
	}
	return nil
}

type memLease struct {
	owner   string
	expires time.Time
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
		if len(f.Kinds) > 0 && !slices.Contains(f.Kinds, kindOf(j)) {
			continue
		}
		if !f.FinishedSince.IsZero() && (j.FinishedAt.IsZero() || j.FinishedAt.Before(f.FinishedSince)) {
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
	c.FailureCount, c.DeadLetteredAt, c.RetryCount, c.RetryAfter = 0, time.Time{}, 0, time.Time{}
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
	cap     int64       // the throughput cap applied (Throttler)
}

func (f *fakeExec) SetMaxThroughput(bps int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cap = bps
}

func (f *fakeExec) throughput() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cap
}

var errTransient = errors.New("storage unavailable")

func newFakeExec(s *memStore, max int64) *fakeExec {
	return &fakeExec{store: s, max: max, gate: map[string]chan struct{}{}, errs: map[string][]error{},
		panics: map[string]bool{}, commits: map[string]bool{}, calls: map[string]int{}, started: make(chan string, 100)}
}

func (f *fakeExec) Prepare(ctx context.Context, job catalog.Job, progress func(Progress)) (Prepared, error) {
	id := job.CollectionID
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
		return nil, gerr
	}
	n := min(c.Backlog(), f.max)
	progress(Progress{Phase: "reading log", OpRecordsTotal: n})
	if gate != nil && !committing {
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if panics {
		panic("boom")
	}
	if err != nil {
		return nil, err
	}
	o := Outcome{OffsetStart: c.CompactionOffset, OffsetEnd: c.CompactionOffset + n, OpRecordsRead: n,
		VersionBefore: c.SegmentVersion, VersionAfter: c.SegmentVersion, Remaining: c.Backlog() - n}
	if n == 0 {
		o.Note = "nothing to compact"
		return &fakePrepared{o: o}, nil
	}
	o.VersionAfter++
	progress(Progress{Phase: "committing", OpRecordsRead: n, OpRecordsTotal: n})
	return &fakePrepared{o: o, commit: func(j catalog.Job) error {
		if gate != nil { // a commit in flight: cancellation does not stop it
			<-gate
		}
		// The commit: offset, version and the finished job in one step.
		f.store.mu.Lock()
		defer f.store.mu.Unlock()
		if err := f.store.finishLocked(j.LeaseOwner, j); err != nil {
			return err
		}
		cc := f.store.colls[id]
		cc.CompactionOffset += n
		cc.SegmentVersion++
		cc.FailureCount, cc.DeadLetteredAt, cc.RetryCount, cc.RetryAfter = 0, time.Time{}, 0, time.Time{}
		if cc.Backlog() == 0 {
			cc.OldestUncompactedAt = time.Time{}
		}
		return nil
	}}, nil
}

// fakePrepared is a Prepared of the test executors: commit (nil when
// nothing is to be committed) commits it.
type fakePrepared struct {
	o      Outcome
	commit func(catalog.Job) error
}

func (p *fakePrepared) Outcome() Outcome { return p.o }

func (p *fakePrepared) Commit(_ context.Context, j catalog.Job) error {
	if p.commit == nil {
		return nil
	}
	if err := p.commit(j); err != nil {
		p.o.VersionAfter = p.o.VersionBefore
		return err
	}
	return nil
}

func (p *fakePrepared) Abort(context.Context) error {
	p.o.VersionAfter = p.o.VersionBefore
	return nil
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

func (s *memStore) SetCollectionPause(_ context.Context, id string, paused bool, reason, by string) (catalog.Collection, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.colls[id]
	if !ok {
		return catalog.Collection{}, fmt.Errorf("collection %s: %w", id, catalog.ErrNotFound)
	}
	if paused {
		c.PausedAt, c.PauseReason, c.PausedBy = time.Now().UTC().Truncate(time.Millisecond), reason, by
	} else {
		c.PausedAt, c.PauseReason, c.PausedBy = time.Time{}, "", ""
	}
	return *c, nil
}

func (s *memStore) SetCollectionSettings(_ context.Context, id string, st catalog.CollectionSettings) (catalog.Collection, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.colls[id]
	if !ok {
		return catalog.Collection{}, fmt.Errorf("collection %s: %w", id, catalog.ErrNotFound)
	}
	c.Settings = st
	return *c, nil
}

func (s *memStore) PutSetting(_ context.Context, st catalog.Setting) (catalog.Setting, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st.UpdatedAt = time.Now().UTC().Truncate(time.Millisecond)
	s.settings[st.Name] = st
	return st, nil
}

func (s *memStore) GetSetting(_ context.Context, name string) (catalog.Setting, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.settings[name]
	if !ok {
		return catalog.Setting{}, catalog.ErrNotFound
	}
	return st, nil
}

package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/compactorhq/compactor/internal/audit"
	"github.com/compactorhq/compactor/internal/buildinfo"
	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/jobtype"
	"github.com/compactorhq/compactor/internal/manager"
	"github.com/compactorhq/compactor/internal/redact"
	"github.com/compactorhq/compactor/internal/segment"
	"github.com/compactorhq/compactor/web"
)

// webSource adapts the manager and catalog to the status page's Source.
// Each of its reads is a bounded number of catalog queries, whatever the
// number of collections and jobs: job listings carry their collection's
// name (joined in SQL), so a page is never a query per row.
type webSource struct {
	mgr     *manager.Manager
	cat     webCatalog
	audit   webAudit // nil: the audit view has nothing to show
	backlog *backlogSampler
	// seg reads the current version's manifest for the collection page's
	// index figures; nil: the page shows the index settings only.
	seg *segment.Store
	// throttle is the cap this node's compactions write under (nil: none
	// known); the setting behind it is read only while it caps.
	throttle *segment.Throttle
	// now is the process's clock, which the collections' freshness is
	// measured at (the catalog's rows take their times from it too).
	now func() time.Time
}

// webCatalog is what the page reads of the catalog directly.
type webCatalog interface {
	ListCollectionsSorted(ctx context.Context, q catalog.CollectionPageQuery) (catalog.CollectionPage, error)
	CountCollections(ctx context.Context) (int, error)
	SummarizeCollections(ctx context.Context) (catalog.CollectionSummary, error)
	GetCollection(ctx context.Context, id string) (catalog.Collection, error)
	StorageFiguresOf(ctx context.Context, ids []string) (map[string]catalog.StorageFigures, error)
	ListVersions(ctx context.Context, id string) ([]catalog.Version, error)
}

// webAudit is the audit log the page's audit view reads.
type webAudit interface {
	ListAuditEvents(ctx context.Context, f catalog.AuditFilter) ([]audit.Event, error)
}

var (
	_ web.Source      = (*webSource)(nil)
	_ web.AuditSource = (*webSource)(nil)
)

func webJob(j manager.Job) web.Job {
	w := web.Job{
		ID: j.ID, CollectionID: j.CollectionID, CollectionName: j.CollectionName, Kind: string(cmp.Or(j.Kind, jobtype.KindCompaction)),
		Trigger: string(j.Trigger), State: string(j.State), Reason: j.Reason, Error: redact.Paths(j.Error), Note: j.Note, Node: j.Node, TriggeredBy: j.TriggeredBy,
		Attempt: j.Attempt, CreatedAt: j.CreatedAt, StartedAt: j.StartedAt, FinishedAt: j.FinishedAt,
		OffsetStart: j.OffsetStart, OffsetEnd: j.OffsetEnd, RecordsRead: j.RecordsRead, RecordsWritten: j.RecordsWritten,
		BytesWritten: j.BytesWritten, VersionBefore: j.VersionBefore, VersionAfter: j.VersionAfter,
		FailureClass: string(j.FailureClass), Predicted: j.Predicted, Actual: j.Actual,
	}
	if p := j.Progress; p != nil {
		w.RecordsRead, w.RecordsTotal, w.BytesWritten = p.OpRecordsRead, p.OpRecordsTotal, p.BytesWritten
		w.Phase, w.Fraction, w.ETA, w.ETAKnown = string(p.Phase), p.Fraction, p.ETA, p.ETAKnown
		w.BlocksWritten, w.BlocksTotal = p.BlocksWritten, p.BlocksTotal
		w.VectorsIndexed, w.VectorsTotal = p.VectorsIndexed, p.VectorsTotal
	}
	return w
}

// webCollection is the page's view of c at now (its freshness debt).
func webCollection(c catalog.Collection, f catalog.StorageFigures, now time.Time) web.Collection {
	return web.Collection{
		ID: c.ID, Name: c.Name, Dimension: c.Dimension, Backlog: c.Backlog(), RecordCount: c.RecordCount,
		SegmentVersion: c.SegmentVersion, LogPosition: c.LogPosition, CompactionOffset: c.CompactionOffset,
		FailureCount: c.FailureCount, DeadLettered: c.DeadLettered(), DeadLetteredAt: c.DeadLetteredAt,
		OldestUncompactedAt: c.OldestUncompactedAt, LastCompactedAt: c.LastCompactedAt, CreatedAt: c.CreatedAt,
		Paused: c.Paused(), PauseReason: c.PauseReason, PausedBy: c.PausedBy, PausedAt: c.PausedAt,
		MinCompactionSize: c.Settings.MinCompactionSize, MaxUncompactedAge: c.Settings.MaxUncompactedAge,
		SegmentBytes: f.SegmentBytes, BlockCount: f.BlockCount, VersionsKept: f.VersionsKept,
		Index:    webIndexSettings(c.Index),
		Priority: c.Policy.Priority.String(), Windows: c.Policy.Windows,
		ObjectiveMaxAge: c.Policy.ObjectiveMaxAge, ObjectiveMaxBacklog: c.Policy.ObjectiveMaxBacklog, ThroughputShare: c.Policy.ThroughputShare,
		FreshnessDebt: manager.FreshnessOf(c, now).Debt,
	}
}

func (s *webSource) Jobs(ctx context.Context, q web.JobQuery) ([]web.Job, error) {
	f := catalog.JobFilter{CollectionID: q.CollectionID, Trigger: catalog.Trigger(q.Trigger), Limit: q.Limit}
	for _, st := range q.States {
		f.States = append(f.States, catalog.JobState(st))
	}
	if f.Limit == 0 {
		f.Limit = 1000
	}
	jobs, err := s.mgr.List(ctx, f)
	if err != nil {
		return nil, err
	}
	out := make([]web.Job, len(jobs))
	for i, j := range jobs {
		out[i] = webJob(j)
	}
	return out, nil
}

func (s *webSource) Job(ctx context.Context, id string) (web.Job, error) {
	j, err := s.mgr.Get(ctx, id)
	if errors.Is(err, catalog.ErrNotFound) {
		return web.Job{}, fmt.Errorf("job %s: %w", id, web.ErrNotFound)
	}
	if err != nil {
		return web.Job{}, err
	}
	return webJob(j), nil
}

// Queue returns the queued jobs of every replica in claim order.
func (s *webSource) Queue(ctx context.Context) ([]web.Job, error) {
	queued, err := s.mgr.Queue(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]web.Job, len(queued))
	for i, j := range queued {
		out[i] = webJob(j)
	}
	return out, nil
}

// Controls returns the global pause.
func (s *webSource) Controls(ctx context.Context) (web.Controls, error) {
	p, err := s.mgr.SchedulerPause(ctx)
	if err != nil {
		return web.Controls{}, err
	}
	c := web.Controls{Paused: p.Paused, Reason: p.Reason, By: p.By, Since: p.Since}
	if s.throttle == nil || s.throttle.Limit() <= 0 {
		return c, nil // no cap in force: no query for who set none
	}
	t, err := s.mgr.MaxThroughput(ctx)
	if err != nil {
		return web.Controls{}, err
	}
	c.MaxThroughput, c.ThroughputOverride, c.ThroughputBy, c.ThroughputSince = t.BytesPerSecond, t.Override > 0, t.By, t.Since
	return c, nil
}

// Plan returns the scheduler's plan, with priced estimates when asked.
func (s *webSource) Plan(ctx context.Context, estimate bool) ([]web.PlanEntry, error) {
	p, err := s.mgr.Plan(ctx, estimate)
	if err != nil {
		return nil, err
	}
	out := make([]web.PlanEntry, len(p.Entries))
	for i, e := range p.Entries {
		out[i] = web.PlanEntry{CollectionID: e.Collection.ID, CollectionName: e.Collection.Name, Decision: string(e.Decision), Reason: e.Reason, Backlog: e.Collection.Backlog(),
			Priority: e.Priority.String(), FreshnessDebt: e.Freshness.Debt, Windows: e.Window.Windows, WindowOpen: e.Window.Open,
			NextWindowStart: e.Window.NextStart, NextWindowEnd: e.Window.NextEnd,
			Estimate: e.Estimate, EstimateError: redact.Paths(e.EstimateError)}
	}
	return out, nil
}

// DeadLetterHistory returns a collection's 20 newest dead-letter events.
func (s *webSource) DeadLetterHistory(ctx context.Context, collectionID string) ([]web.DeadLetterEvent, error) {
	evs, err := s.mgr.DeadLetterHistory(ctx, collectionID, 20)
	if err != nil {
		return nil, err
	}
	out := make([]web.DeadLetterEvent, len(evs))
	for i, e := range evs {
		out[i] = web.DeadLetterEvent{At: e.At, Event: e.Event, Cause: e.Cause, Build: e.Build, Actor: e.Actor,
			Reason: redact.Paths(e.Reason), JobID: e.JobID, Failures: e.Failures}
	}
	return out, nil
}

// Pause pauses automatic compaction of a collection, or of every one.
func (s *webSource) Pause(ctx context.Context, collectionID, reason, by string) error {
	return notFoundForWeb(s.mgr.Pause(ctx, collectionID, reason, by))
}

// Resume ends a pause.
func (s *webSource) Resume(ctx context.Context, collectionID, by string) error {
	return notFoundForWeb(s.mgr.Resume(ctx, collectionID, by))
}

// notFoundForWeb marks a catalog ErrNotFound for the page (404).
func notFoundForWeb(err error) error {
	if errors.Is(err, catalog.ErrNotFound) {
		return fmt.Errorf("%w: %w", web.ErrNotFound, err)
	}
	return err
}

// Nodes returns the registered replicas.
func (s *webSource) Nodes(ctx context.Context) ([]web.Node, error) {
	nodes, err := s.mgr.Nodes(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]web.Node, len(nodes))
	for i, n := range nodes {
		out[i] = web.Node{Name: n.Name, Address: n.Address, Version: n.Version, StartedAt: n.StartedAt, HeartbeatAt: n.HeartbeatAt, Alive: n.Alive, Self: n.Self}
	}
	return out, nil
}

// CollectionsPage reads one page in SQL (a keyset cursor), the count and
// the page's storage figures: three queries whatever the number of
// collections.
func (s *webSource) CollectionsPage(ctx context.Context, q web.CollectionQuery) (web.CollectionPage, error) {
	p, err := s.cat.ListCollectionsSorted(ctx, catalog.CollectionPageQuery{
		Sort: catalog.CollectionSort(q.Sort), Desc: q.Desc, After: q.After, Before: q.Before, Limit: q.Limit,
	})
	if err != nil {
		return web.CollectionPage{}, err
	}
	total, err := s.cat.CountCollections(ctx)
	if err != nil {
		return web.CollectionPage{}, err
	}
	cs, err := s.withFigures(ctx, p.Collections)
	if err != nil {
		return web.CollectionPage{}, err
	}
	return web.CollectionPage{Collections: cs, Total: total, More: p.More}, nil
}

// withFigures converts cs with their storage figures (one query).
func (s *webSource) withFigures(ctx context.Context, cs []catalog.Collection) ([]web.Collection, error) {
	ids := make([]string, len(cs))
	for i, c := range cs {
		ids[i] = c.ID
	}
	figures, err := s.cat.StorageFiguresOf(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := make([]web.Collection, len(cs))
	now := s.now()
	for i, c := range cs {
		out[i] = webCollection(c, figures[c.ID], now)
	}
	return out, nil
}

// CollectionSummary counts in SQL and reads the notable collections, the
// largest backlogs and the first names: four queries whatever the number of
// collections (the lists carry no storage figures: the dashboard shows
// none).
func (s *webSource) CollectionSummary(ctx context.Context, q web.SummaryQuery) (web.CollectionSummary, error) {
	sum, err := s.cat.SummarizeCollections(ctx)
	if err != nil {
		return web.CollectionSummary{}, err
	}
	out := web.CollectionSummary{Count: sum.Count, Backlog: sum.Backlog, Notable: webCollections(sum.Notable, s.now())}
	if q.Largest > 0 {
		p, err := s.cat.ListCollectionsSorted(ctx, catalog.CollectionPageQuery{Sort: catalog.SortByBacklog, Desc: true, Limit: q.Largest})
		if err != nil {
			return web.CollectionSummary{}, err
		}
		out.Largest = webCollections(p.Collections, s.now())
	}
	if q.Names > 0 {
		p, err := s.cat.ListCollectionsSorted(ctx, catalog.CollectionPageQuery{Sort: catalog.SortByName, Limit: q.Names})
		if err != nil {
			return web.CollectionSummary{}, err
		}
		out.Names = webCollections(p.Collections, s.now())
	}
	return out, nil
}

// webCollections converts cs without storage figures, at now.
func webCollections(cs []catalog.Collection, now time.Time) []web.Collection {
	out := make([]web.Collection, len(cs))
	for i, c := range cs {
		out[i] = webCollection(c, catalog.StorageFigures{}, now)
	}
	return out
}

func (s *webSource) Collection(ctx context.Context, id string) (web.Collection, error) {
	c, err := s.cat.GetCollection(ctx, id)
	if errors.Is(err, catalog.ErrNotFound) {
		return web.Collection{}, fmt.Errorf("collection %s: %w", id, web.ErrNotFound)
	}
	if err != nil {
		return web.Collection{}, err
	}
	figures, err := s.cat.StorageFiguresOf(ctx, []string{c.ID})
	if err != nil {
		return web.Collection{}, err
	}
	wc := webCollection(c, figures[c.ID], s.now())
	vs, err := s.cat.ListVersions(ctx, id)
	if err != nil && !errors.Is(err, catalog.ErrNotFound) {
		return web.Collection{}, err
	}
	wc.Versions = webVersions(c, vs)
	if s.seg != nil && c.SegmentVersion > 0 && !c.Index.Disabled {
		// One manifest read: the page shows the current version's index.
		m, err := s.seg.ReadManifest(ctx, c.ManifestKey)
		if err != nil {
			return web.Collection{}, fmt.Errorf("collection %s: %w", id, err)
		}
		if ix := m.Index; ix != nil {
			wc.Index.Built = true
			wc.Index.Vectors, wc.Index.Tombstones, wc.Index.Dropped = ix.Vectors, ix.Tombstones, ix.Dropped
			wc.Index.Bytes, wc.Index.Build, wc.Index.BuiltAt, wc.Index.BuildSeconds = ix.Bytes(), ix.Build, ix.BuiltAt, ix.BuildSeconds
		}
	}
	return wc, nil
}

// webVersions is the page's version history of c (vs newest first).
func webVersions(c catalog.Collection, vs []catalog.Version) []web.CollectionVersion {
	out := make([]web.CollectionVersion, len(vs))
	for i, v := range vs {
		out[i] = web.CollectionVersion{
			Version: v.Version, CreatedAt: v.CreatedAt, OffsetStart: v.OffsetStart, CompactionOffset: v.CompactionOffset,
			JobID: v.JobID, RecordCount: v.RecordCount, SegmentBytes: v.SegmentBytes, BlockCount: v.BlockCount,
			Current: v.Version == c.SegmentVersion, Kept: v.Kept(), RollbackOf: v.RollbackOf, Reason: v.Reason, CreatedBy: v.CreatedBy,
			Digest: v.Digest, Verification: webVerification(v),
		}
	}
	return out
}

// webVerification is "verified", "failed: <what>" or "" (never verified).
func webVerification(v catalog.Version) string {
	switch {
	case v.VerifiedAt.IsZero():
		return ""
	case v.VerifyError != "":
		return "failed: " + redact.Paths(v.VerifyError)
	}
	return "verified"
}

// webIndexSettings is the page's view of a collection's index settings.
func webIndexSettings(s catalog.IndexSettings) web.CollectionIndex {
	s = s.WithDefaults()
	return web.CollectionIndex{Disabled: s.Disabled, Distance: s.Distance.String(), M: s.M, EfConstruction: s.EfConstruction, EfSearch: s.EfSearch}
}

func (s *webSource) BacklogHistory(_ context.Context, collectionID string) ([]web.Point, error) {
	return s.backlog.history(collectionID), nil
}

// Subscribe ticks on every job change or progress report.
func (s *webSource) Subscribe(ctx context.Context) (<-chan struct{}, error) {
	sub, _, err := s.mgr.Watch(ctx)
	if err != nil {
		return nil, err
	}
	ticks := make(chan struct{}, 1)
	go func() {
		defer close(ticks)
		for range sub.Events() {
			select {
			case ticks <- struct{}{}:
			default: // a tick is pending already
			}
		}
	}()
	return ticks, nil
}

func (s *webSource) Compact(ctx context.Context, collectionID, reason string) (string, error) {
	enq, err := s.mgr.Compact(ctx, []string{collectionID}, false, reason)
	var nf *manager.NotFoundError
	switch {
	case errors.As(err, &nf):
		return "", fmt.Errorf("collection %s: %w", collectionID, web.ErrNotFound)
	case errors.Is(err, manager.ErrStopped):
		return "", fmt.Errorf("%w: %w", web.ErrConflict, err)
	case err != nil:
		return "", err
	}
	return enq[0].Job.ID, nil
}

func (s *webSource) Cancel(ctx context.Context, jobID string) error {
	_, err := s.mgr.Cancel(ctx, jobID)
	switch {
	case errors.Is(err, manager.ErrFinished):
		return fmt.Errorf("%w: %w", web.ErrConflict, err)
	case errors.Is(err, catalog.ErrNotFound):
		return fmt.Errorf("job %s: %w", jobID, web.ErrNotFound)
	}
	return err
}

// backlogSampler keeps, per collection, the backlog sampled at every
// scheduler interval and whenever a job is queued or ends (at most once a
// second): at most backlogSamples points, in memory (the chart starts afresh
// after a restart).
type backlogSampler struct {
	cat *catalog.Catalog
	now func() time.Time // the process's clock: the samples' times

	mu      sync.Mutex
	samples map[string][]web.Point
}

const backlogSamples = 360

func (b *backlogSampler) sample(ctx context.Context) error {
	colls, err := b.cat.ListCollections(ctx)
	if err != nil {
		return err
	}
	now := b.now().UTC()
	b.mu.Lock()
	defer b.mu.Unlock()
	live := make(map[string][]web.Point, len(colls))
	for _, c := range colls {
		pts := append(b.samples[c.ID], web.Point{At: now, Value: float64(c.Backlog())})
		if len(pts) > backlogSamples {
			pts = pts[len(pts)-backlogSamples:]
		}
		live[c.ID] = pts
	}
	b.samples = live // deleted collections drop out
	return nil
}

func (b *backlogSampler) history(id string) []web.Point {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]web.Point(nil), b.samples[id]...)
}

// run samples every interval, and on job changes from events (nil: none),
// until ctx ends.
func (b *backlogSampler) run(ctx context.Context, every time.Duration, events <-chan manager.Event, log func(error)) {
	t := time.NewTicker(every)
	defer t.Stop()
	// A change within a second of the last sample is sampled a second after
	// it, so bursts of jobs cost one sample a second.
	soon := time.NewTimer(0)
	defer soon.Stop()
	var last time.Time
	pending := true // the first sample, at once
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-soon.C:
			if !pending {
				continue
			}
		case ev, ok := <-events:
			if !ok {
				events = nil // the manager stopped: ticks only
				continue
			}
			if ev.Kind != manager.EventChanged || !(ev.Job.State == catalog.JobQueued || ev.Job.State.Finished()) {
				continue
			}
			if wait := time.Second - time.Since(last); wait > 0 {
				if !pending {
					pending = true
					soon.Reset(wait)
				}
				continue
			}
		}
		if err := b.sample(ctx); err != nil && ctx.Err() == nil {
			log(err)
		}
		last, pending = time.Now(), false
	}
}

// RecentAuditEvents implements web.AuditSource.
func (s *webSource) RecentAuditEvents(ctx context.Context, collectionID string, limit int) ([]audit.Event, error) {
	if s.audit == nil {
		return nil, nil
	}
	return s.audit.ListAuditEvents(ctx, catalog.AuditFilter{CollectionID: collectionID, Limit: limit, Newest: true})
}

// mountWeb mounts the status page at "/".
func (a *App) mountWeb() error {
	a.backlog = &backlogSampler{cat: a.Catalog, now: a.clock.Now}
	cfg := a.cfg.Web
	cfg.Auth, cfg.ProtectReads = a.Auth, a.cfg.ProtectReads
	cfg.Now = a.clock.Now                // relative times and ETAs on the page, as the rows' times
	cfg.Logger, cfg.Done = a.log, a.done // the page adds component=web
	bi := buildinfo.Get()
	cfg.Build = web.Build{Version: bi.Version, Revision: bi.Revision, Time: bi.Time, Modified: bi.Modified}
	h, err := web.NewHandler(&webSource{mgr: a.Manager, cat: a.Catalog, audit: a.Catalog, backlog: a.backlog, seg: a.Segments, throttle: a.throttle, now: a.clock.Now}, cfg)
	if err != nil {
		return fmt.Errorf("status page: %w", err)
	}
	a.mux.Handle("/", a.bodies.Wrap(h))
	return nil
}

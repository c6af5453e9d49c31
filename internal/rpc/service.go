// Package rpc adapts the compactor's core to its Connect API: the
// CompactionService, CollectionService, LogService, ControlService and
// AuditService handlers, the mapping of domain errors to Connect codes, and
// the middleware and interceptors (authentication and roles, logging,
// metrics). It translates and validates; the
// semantics live in internal/manager and internal/compaction.
package rpc

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"connectrpc.com/connect"
	"github.com/google/uuid"

	compactorv1 "github.com/compactorhq/compactor/gen/compactor/v1"
	"github.com/compactorhq/compactor/gen/compactor/v1/compactorv1connect"
	"github.com/compactorhq/compactor/internal/audit"
	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/compaction"
	"github.com/compactorhq/compactor/internal/jobtype"
	"github.com/compactorhq/compactor/internal/manager"
	"github.com/compactorhq/compactor/internal/materialize"
	"github.com/compactorhq/compactor/internal/segment"
)

// Limits of one request.
const (
	MaxCompactIDs    = 10_000 // collection ids in one Compact
	MaxPushRecords   = 10_000 // operation records in one PushLogs
	MaxReasonBytes   = 1_024
	DefaultPageSize  = 100
	MaxPageSize      = 1_000
	maxWatchJobIDs   = 1_000
	collectionsField = "collection_ids"
)

// Manager is what the handlers need of the compaction manager.
type Manager interface {
	Compact(ctx context.Context, ids []string, all bool, reason string) ([]manager.Enqueued, error)
	Get(ctx context.Context, jobID string) (manager.Job, error)
	List(ctx context.Context, f catalog.JobFilter) ([]manager.Job, error)
	Nodes(ctx context.Context) ([]manager.NodeStatus, error)
	Watch(ctx context.Context) (*manager.Subscription, []manager.Job, error)
	Cancel(ctx context.Context, jobID string) (manager.Job, error)
	RebuildIndex(ctx context.Context, collectionID, params, reason string) (manager.Enqueued, error)
	Verify(ctx context.Context, collectionID string, params jobtype.VerifyParams, reason string) (manager.Enqueued, error)
}

// Catalog is what the handlers need of the catalog.
type Catalog interface {
	CreateCollection(ctx context.Context, name string, dimension int) (catalog.Collection, error)
	CreateCollectionSpec(ctx context.Context, spec catalog.CollectionSpec) (catalog.Collection, error)
	GetCollection(ctx context.Context, id string) (catalog.Collection, error)
	// ListCollectionsPage returns up to limit collections named after
	// after, by name (the page is cut in SQL).
	ListCollectionsPage(ctx context.Context, after string, limit int) ([]catalog.Collection, error)
	CountPausedCollections(ctx context.Context) (int, error)
	// AppendLogKeyed appends ops, once per idempotency key (key "": no key).
	AppendLogKeyed(ctx context.Context, collectionID, key string, ops []materialize.OperationRecord, lim catalog.AppendLimits) (first, last int64, replayed bool, err error)
	// JobIDsWithPrefix returns up to limit job ids starting with prefix
	// (lowercase), in id order.
	JobIDsWithPrefix(ctx context.Context, prefix string, limit int) ([]string, error)
}

// Records is the read path (reads by id, pages, nearest-neighbour
// queries) and collection deletion (manager.Deleter: the
// use case cancels the collection's jobs, deletes its storage and drops its
// gauges).
type Records interface {
	GetRecords(ctx context.Context, collectionID string, ids []string) (compaction.ReadResult, error)
	ListRecords(ctx context.Context, collectionID, after string, limit int) (compaction.ReadResult, error)
	QueryRecords(ctx context.Context, collectionID string, q compaction.Query) (compaction.QueryResult, error)
	// Reads of one kept version alone, the history, and rollback.
	GetRecordsAt(ctx context.Context, collectionID string, version int64, ids []string) (compaction.ReadResult, error)
	ListRecordsAt(ctx context.Context, collectionID string, version int64, after string, limit int) (compaction.ReadResult, error)
	ListVersions(ctx context.Context, collectionID string) ([]compaction.VersionInfo, error)
	Rollback(ctx context.Context, collectionID string, req compaction.RollbackRequest) (compaction.RollbackResult, error)
	DeleteCollection(ctx context.Context, collectionID string) (catalog.Collection, error)
	// CurrentIndex is the vector index of the collection's current
	// version (nil: none).
	CurrentIndex(ctx context.Context, coll catalog.Collection) (*segment.IndexRef, error)
}

// Service implements the three Connect services.
type Service struct {
	mgr    Manager
	ctl    Controller
	cat    Catalog
	recs   Records
	audit  AuditLog
	limits catalog.AppendLimits
	log    *slog.Logger
	// indexes caches GetCollection's index figures by manifest key.
	indexes indexCache

	draining  chan struct{} // closed by Drain
	drainOnce sync.Once
}

var (
	_ compactorv1connect.CompactionServiceHandler = (*Service)(nil)
	_ compactorv1connect.CollectionServiceHandler = (*Service)(nil)
	_ compactorv1connect.LogServiceHandler        = (*Service)(nil)
)

// NewService returns the handlers of the five services (ctl serves
// ControlService; cat, when it implements AuditLog, AuditService). limits
// bound PushLogs (backlog and record limits); logger nil discards logs.
func NewService(mgr Manager, ctl Controller, cat Catalog, recs Records, limits catalog.AppendLimits, logger *slog.Logger) *Service {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	al, _ := cat.(AuditLog)
	if al == nil {
		al = noAuditLog{}
	}
	return &Service{mgr: mgr, ctl: ctl, cat: cat, recs: recs, audit: al, limits: limits, log: logger, draining: make(chan struct{})}
}

// noAuditLog serves AuditService for a catalog without an audit log: the
// calls fail with UNIMPLEMENTED.
type noAuditLog struct{}

func (noAuditLog) ListAuditEvents(context.Context, catalog.AuditFilter) ([]audit.Event, error) {
	return nil, connect.NewError(connect.CodeUnimplemented, errors.New("this server's catalog keeps no audit log"))
}

func (noAuditLog) VerifyAuditChain(context.Context) (catalog.AuditVerification, error) {
	return catalog.AuditVerification{}, connect.NewError(connect.CodeUnimplemented, errors.New("this server's catalog keeps no audit log"))
}

// Drain ends the open WatchCompactions streams with UNAVAILABLE (the client
// may watch again, elsewhere or after the restart) and refuses new ones.
// The server calls it when shutdown starts: a stream never ends by itself,
// so it would hold the HTTP shutdown for its whole grace period and then be
// cut without a status.
func (s *Service) Drain() { s.drainOnce.Do(func() { close(s.draining) }) }

func errDraining() error {
	return connect.NewError(connect.CodeUnavailable, errors.New("server shutting down; watch again"))
}

func (s *Service) fail(ctx context.Context, procedure string, err error) error {
	return toConnect(ctx, s.log, procedure, err)
}

// checkID validates a UUID-shaped id of the given field.
func checkID(field, id string) error {
	if id == "" {
		return invalidArgument(field, "is required")
	}
	if _, err := uuid.Parse(id); err != nil {
		return invalidArgument(field, "%q is not a valid id (a UUID such as 0b6a3c0e-8f1e-4a55-9f0e-5c1d2f3a4b5c)", echo(id))
	}
	return nil
}

// MinJobIDPrefix is the shortest start of a job id that GetCompaction and
// CancelCompaction accept in place of the whole id (the status page and the
// CLI's tables show the first 8 characters).
const MinJobIDPrefix = 4

// maxPrefixMatches is how many ids an ambiguous prefix's error lists.
const maxPrefixMatches = 5

// resolveJobID returns the job id that ref names: ref itself when it is a
// whole id, else the one job whose id starts with ref (at least
// MinJobIDPrefix hex digits or dashes, any case). No such job: NOT_FOUND;
// several: INVALID_ARGUMENT listing some of them; anything else that is
// not an id: INVALID_ARGUMENT naming job_id.
func (s *Service) resolveJobID(ctx context.Context, procedure, ref string) (string, error) {
	if _, err := uuid.Parse(ref); err == nil {
		return ref, nil
	}
	if !isIDPrefix(ref) {
		if ref == "" {
			return "", invalidArgument("job_id", "is required")
		}
		return "", invalidArgument("job_id", "%q is not a job id (a UUID such as 0b6a3c0e-8f1e-4a55-9f0e-5c1d2f3a4b5c) nor its first %d or more characters", echo(ref), MinJobIDPrefix)
	}
	prefix := strings.ToLower(ref)
	ids, err := s.cat.JobIDsWithPrefix(ctx, prefix, maxPrefixMatches+1)
	if err != nil {
		return "", s.fail(ctx, procedure, err)
	}
	switch len(ids) {
	case 0:
		return "", connect.NewError(connect.CodeNotFound, fmt.Errorf("job_id: no job id starts with %q", prefix))
	case 1:
		return ids[0], nil
	}
	more := ""
	if len(ids) > maxPrefixMatches {
		ids, more = ids[:maxPrefixMatches], " and more"
	}
	return "", invalidArgument("job_id", "%q is ambiguous: it starts the ids of several jobs (%s%s); give more characters", prefix, strings.Join(ids, ", "), more)
}

// isIDPrefix reports whether ref can be the start of an id: at least
// MinJobIDPrefix and fewer than 36 characters, each a hex digit or a dash.
func isIDPrefix(ref string) bool {
	if len(ref) < MinJobIDPrefix || len(ref) >= 36 {
		return false
	}
	for _, r := range ref {
		if !('0' <= r && r <= '9' || 'a' <= r && r <= 'f' || 'A' <= r && r <= 'F' || r == '-') {
			return false
		}
	}
	return true
}

func pageSize(n int32) (int, error) {
	switch {
	case n < 0:
		return 0, invalidArgument("page_size", "must not be negative, got %d", n)
	case n == 0:
		return DefaultPageSize, nil
	case n > MaxPageSize:
		return MaxPageSize, nil
	}
	return int(n), nil
}

// Compact implements CompactionService.Compact.
func (s *Service) Compact(ctx context.Context, req *connect.Request[compactorv1.CompactRequest]) (*connect.Response[compactorv1.CompactResponse], error) {
	const proc = compactorv1connect.CompactionServiceCompactProcedure
	m := req.Msg
	switch {
	case m.GetAll() && len(m.GetCollectionIds()) > 0:
		return nil, invalidArgument(collectionsField, "give collection ids or all, not both")
	case !m.GetAll() && len(m.GetCollectionIds()) == 0:
		return nil, invalidArgument(collectionsField, "give at least one collection id, or all")
	case len(m.GetCollectionIds()) > MaxCompactIDs:
		return nil, invalidArgument(collectionsField, "%d ids, more than the limit of %d", len(m.GetCollectionIds()), MaxCompactIDs)
	case checkReason(m.GetReason()) != nil:
		return nil, checkReason(m.GetReason())
	}
	for i, id := range m.GetCollectionIds() {
		if err := checkID(fmt.Sprintf("collection_ids[%d]", i), id); err != nil {
			return nil, err
		}
	}
	enq, err := s.mgr.Compact(ctx, m.GetCollectionIds(), m.GetAll(), strings.TrimSpace(m.GetReason()))
	if err != nil {
		return nil, s.fail(ctx, proc, err)
	}
	out := &compactorv1.CompactResponse{Jobs: make([]*compactorv1.CompactResult, len(enq))}
	for i, e := range enq {
		out.Jobs[i] = &compactorv1.CompactResult{Job: jobToProto(e.Job), Created: e.Created}
	}
	return connect.NewResponse(out), nil
}

// RebuildIndex implements CompactionService.RebuildIndex: the parameters
// are checked against the collection here, so that a bad request fails at
// once instead of as a job.
func (s *Service) RebuildIndex(ctx context.Context, req *connect.Request[compactorv1.RebuildIndexRequest]) (*connect.Response[compactorv1.RebuildIndexResponse], error) {
	const proc = compactorv1connect.CompactionServiceRebuildIndexProcedure
	m := req.Msg
	if err := checkCollectionJob(m.GetCollectionId(), m.GetReason()); err != nil {
		return nil, err
	}
	switch {
	case m.GetM() < 0:
		return nil, invalidArgument("m", "must not be negative, got %d (0: the collection's)", m.GetM())
	case m.GetEfConstruction() < 0:
		return nil, invalidArgument("ef_construction", "must not be negative, got %d (0: the collection's)", m.GetEfConstruction())
	}
	coll, err := s.cat.GetCollection(ctx, m.GetCollectionId())
	if err != nil {
		return nil, s.fail(ctx, proc, err)
	}
	params := jobtype.IndexRebuildParams{M: int(m.GetM()), EfConstruction: int(m.GetEfConstruction())}
	if _, err := compaction.RebuildSettings(coll, params); err != nil {
		var bad *catalog.IndexSettingsError
		switch {
		case errors.As(err, &bad):
			return nil, invalidArgument(bad.Field, "%s", bad.Problem)
		case errors.Is(err, compaction.ErrIndexDisabled):
			return nil, connect.NewError(connect.CodeFailedPrecondition, err)
		}
		return nil, s.fail(ctx, proc, err)
	}
	e, err := s.mgr.RebuildIndex(ctx, coll.ID, params.Encode(), strings.TrimSpace(m.GetReason()))
	if err != nil {
		return nil, s.fail(ctx, proc, err)
	}
	return connect.NewResponse(&compactorv1.RebuildIndexResponse{Job: jobToProto(e.Job), Created: e.Created}), nil
}

// VerifyCollection implements CompactionService.VerifyCollection.
func (s *Service) VerifyCollection(ctx context.Context, req *connect.Request[compactorv1.VerifyCollectionRequest]) (*connect.Response[compactorv1.VerifyCollectionResponse], error) {
	const proc = compactorv1connect.CompactionServiceVerifyCollectionProcedure
	m := req.Msg
	if err := checkCollectionJob(m.GetCollectionId(), m.GetReason()); err != nil {
		return nil, err
	}
	if m.GetVersion() < 0 {
		return nil, invalidArgument("version", "must not be negative, got %d (0: the current version)", m.GetVersion())
	}
	coll, err := s.cat.GetCollection(ctx, m.GetCollectionId())
	if err != nil {
		return nil, s.fail(ctx, proc, err)
	}
	switch {
	case coll.SegmentVersion == 0:
		return nil, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("collection %s has no segment version yet: nothing is compacted to verify", coll.ID))
	case m.GetVersion() > coll.SegmentVersion:
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("collection %s has no version %d: its current version is %d", coll.ID, m.GetVersion(), coll.SegmentVersion))
	}
	if v := m.GetVersion(); v > 0 && v < coll.SegmentVersion {
		// A version no longer kept would fail as a job (and count toward
		// the collection's dead-letter state): refuse it here.
		if err := keptVersion(ctx, s.recs, coll.ID, v); err != nil {
			return nil, s.fail(ctx, proc, err)
		}
	}
	params := jobtype.VerifyParams{Version: m.GetVersion(), Replay: m.GetReplay()}
	e, err := s.mgr.Verify(ctx, coll.ID, params, strings.TrimSpace(m.GetReason()))
	if err != nil {
		return nil, s.fail(ctx, proc, err)
	}
	return connect.NewResponse(&compactorv1.VerifyCollectionResponse{Job: jobToProto(e.Job), Created: e.Created}), nil
}

// GetCompaction implements CompactionService.GetCompaction.
func (s *Service) GetCompaction(ctx context.Context, req *connect.Request[compactorv1.GetCompactionRequest]) (*connect.Response[compactorv1.GetCompactionResponse], error) {
	j, err := s.onJob(ctx, compactorv1connect.CompactionServiceGetCompactionProcedure, req.Msg.GetJobId(), s.mgr.Get)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&compactorv1.GetCompactionResponse{Job: j}), nil
}

// onJob resolves ref, a job id or its start (resolveJobID), and runs op
// (the manager's Get or Cancel) on the job it names. It returns the job as
// op left it, or the Connect error of either step (procedure names the
// RPC for the log).
func (s *Service) onJob(ctx context.Context, procedure, ref string, op func(context.Context, string) (manager.Job, error)) (*compactorv1.Job, error) {
	id, err := s.resolveJobID(ctx, procedure, ref)
	if err != nil {
		return nil, err
	}
	j, err := op(ctx, id)
	if err != nil {
		return nil, s.fail(ctx, procedure, err)
	}
	return jobToProto(j), nil
}

// ListNodes implements CompactionService.ListNodes.
func (s *Service) ListNodes(ctx context.Context, _ *connect.Request[compactorv1.ListNodesRequest]) (*connect.Response[compactorv1.ListNodesResponse], error) {
	nodes, err := s.mgr.Nodes(ctx)
	if err != nil {
		return nil, s.fail(ctx, compactorv1connect.CompactionServiceListNodesProcedure, err)
	}
	out := &compactorv1.ListNodesResponse{Nodes: make([]*compactorv1.Node, len(nodes))}
	for i, n := range nodes {
		out.Nodes[i] = &compactorv1.Node{
			Name: n.Name, Address: n.Address, Version: n.Version,
			StartTime: ts(n.StartedAt), HeartbeatTime: ts(n.HeartbeatAt), Alive: n.Alive, Self: n.Self,
		}
	}
	return connect.NewResponse(out), nil
}

// ListCompactions implements CompactionService.ListCompactions.
func (s *Service) ListCompactions(ctx context.Context, req *connect.Request[compactorv1.ListCompactionsRequest]) (*connect.Response[compactorv1.ListCompactionsResponse], error) {
	m := req.Msg
	f := catalog.JobFilter{CollectionID: m.GetCollectionId(), Trigger: triggerFilter(m.GetTrigger())}
	if f.CollectionID != "" {
		if err := checkID("collection_id", f.CollectionID); err != nil {
			return nil, err
		}
	}
	for i, st := range m.GetStates() {
		state, ok := jobStates.fromProto(st)
		if !ok {
			return nil, invalidArgument(fmt.Sprintf("states[%d]", i), "%s is not a job state", st)
		}
		f.States = append(f.States, state)
	}
	kinds, err := kindsFromProto("kinds", m.GetKinds())
	if err != nil {
		return nil, err
	}
	f.Kinds = kinds
	size, err := pageSize(m.GetPageSize())
	if err != nil {
		return nil, err
	}
	if f.Before, err = decodeJobCursor(m.GetPageToken()); err != nil {
		return nil, err
	}
	f.Limit = size + 1
	jobs, err := s.mgr.List(ctx, f)
	if err != nil {
		return nil, s.fail(ctx, compactorv1connect.CompactionServiceListCompactionsProcedure, err)
	}
	out := &compactorv1.ListCompactionsResponse{}
	if len(jobs) > size {
		jobs = jobs[:size]
		out.NextPageToken = encodeJobCursor(jobs[size-1].Job)
	}
	out.Jobs = make([]*compactorv1.Job, len(jobs))
	for i, j := range jobs {
		out.Jobs[i] = jobToProto(j)
	}
	return connect.NewResponse(out), nil
}

// WatchCompactions implements CompactionService.WatchCompactions: a
// snapshot of the active jobs (or of the jobs named in job_ids), a
// SNAPSHOT_COMPLETE marker, then every change until the client goes away.
func (s *Service) WatchCompactions(ctx context.Context, req *connect.Request[compactorv1.WatchCompactionsRequest], stream *connect.ServerStream[compactorv1.WatchCompactionsResponse]) error {
	const proc = compactorv1connect.CompactionServiceWatchCompactionsProcedure
	m := req.Msg
	if c := m.GetCollectionId(); c != "" {
		if err := checkID("collection_id", c); err != nil {
			return err
		}
		if _, err := s.cat.GetCollection(ctx, c); err != nil {
			return s.fail(ctx, proc, err)
		}
	}
	if len(m.GetJobIds()) > maxWatchJobIDs {
		return invalidArgument("job_ids", "%d ids, more than the limit of %d", len(m.GetJobIds()), maxWatchJobIDs)
	}
	wanted := make(map[string]bool, len(m.GetJobIds()))
	for i, id := range m.GetJobIds() {
		if err := checkID(fmt.Sprintf("job_ids[%d]", i), id); err != nil {
			return err
		}
		wanted[id] = true
	}
	kinds, err := kindsFromProto("kinds", m.GetKinds())
	if err != nil {
		return err
	}
	match := func(j manager.Job) bool {
		if len(wanted) > 0 && !wanted[j.ID] {
			return false
		}
		if len(kinds) > 0 && !slices.Contains(kinds, cmp.Or(j.Kind, jobtype.KindCompaction)) {
			return false
		}
		return m.GetCollectionId() == "" || j.CollectionID == m.GetCollectionId()
	}
	select {
	case <-s.draining:
		return errDraining()
	default:
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sub, active, err := s.mgr.Watch(ctx)
	if err != nil {
		return s.fail(ctx, proc, err)
	}
	snapshot := active
	if len(wanted) > 0 {
		// Subscribed first, so a job that ends meanwhile is not missed.
		snapshot = snapshot[:0:0]
		for _, id := range m.GetJobIds() {
			j, err := s.mgr.Get(ctx, id)
			if err != nil {
				return s.fail(ctx, proc, err)
			}
			snapshot = append(snapshot, j)
		}
	}
	for _, j := range snapshot {
		if !match(j) {
			continue
		}
		if err := stream.Send(&compactorv1.WatchCompactionsResponse{Type: compactorv1.WatchEventType_WATCH_EVENT_TYPE_SNAPSHOT, Job: jobToProto(j)}); err != nil {
			return err
		}
	}
	if err := stream.Send(&compactorv1.WatchCompactionsResponse{Type: compactorv1.WatchEventType_WATCH_EVENT_TYPE_SNAPSHOT_COMPLETE}); err != nil {
		return err
	}
	events := sub.Events()
	for {
		var ev manager.Event
		var ok bool
		select {
		case ev, ok = <-events:
		case <-s.draining:
			return errDraining()
		}
		if !ok {
			break
		}
		if !match(ev.Job) {
			continue
		}
		typ := compactorv1.WatchEventType_WATCH_EVENT_TYPE_CHANGED
		if ev.Kind == manager.EventProgress {
			if !m.GetIncludeProgress() {
				continue
			}
			typ = compactorv1.WatchEventType_WATCH_EVENT_TYPE_PROGRESS
		}
		if err := stream.Send(&compactorv1.WatchCompactionsResponse{Type: typ, Job: jobToProto(ev.Job)}); err != nil {
			return err
		}
	}
	switch {
	case ctx.Err() != nil:
		return nil // the client went away
	case sub.Lagged():
		return connect.NewError(connect.CodeUnavailable, fmt.Errorf("watcher fell more than its buffer behind; watch again"))
	}
	return connect.NewError(connect.CodeUnavailable, manager.ErrStopped)
}

// CancelCompaction implements CompactionService.CancelCompaction.
func (s *Service) CancelCompaction(ctx context.Context, req *connect.Request[compactorv1.CancelCompactionRequest]) (*connect.Response[compactorv1.CancelCompactionResponse], error) {
	j, err := s.onJob(ctx, compactorv1connect.CompactionServiceCancelCompactionProcedure, req.Msg.GetJobId(), s.mgr.Cancel)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&compactorv1.CancelCompactionResponse{Job: j}), nil
}

// CreateCollection implements CollectionService.CreateCollection.
func (s *Service) CreateCollection(ctx context.Context, req *connect.Request[compactorv1.CreateCollectionRequest]) (*connect.Response[compactorv1.CreateCollectionResponse], error) {
	// Validated here too, so that each error names its field in a
	// BadRequest detail and never repeats the (possibly huge) name.
	if err := catalog.ValidateCollectionName(req.Msg.GetName()); err != nil {
		return nil, invalidArgument("name", "%s", strings.TrimSuffix(err.Error(), ": "+catalog.ErrInvalidArgument.Error()))
	}
	if d := req.Msg.GetDimension(); d < 0 || d > catalog.MaxDimension {
		return nil, invalidArgument("dimension", "%d is outside 0..%d (0: fixed by the first write)", d, catalog.MaxDimension)
	}
	spec, err := collectionSpec(req.Msg)
	if err != nil {
		return nil, err
	}
	c, err := s.cat.CreateCollectionSpec(ctx, spec)
	if err != nil {
		return nil, s.fail(ctx, compactorv1connect.CollectionServiceCreateCollectionProcedure, err)
	}
	return connect.NewResponse(&compactorv1.CreateCollectionResponse{Collection: collectionToProto(c)}), nil
}

// GetCollection implements CollectionService.GetCollection.
func (s *Service) GetCollection(ctx context.Context, req *connect.Request[compactorv1.GetCollectionRequest]) (*connect.Response[compactorv1.GetCollectionResponse], error) {
	if err := checkID("id", req.Msg.GetId()); err != nil {
		return nil, err
	}
	c, err := s.cat.GetCollection(ctx, req.Msg.GetId())
	if err != nil {
		return nil, s.fail(ctx, compactorv1connect.CollectionServiceGetCollectionProcedure, err)
	}
	ix, err := s.indexes.currentIndex(ctx, c, s.recs.CurrentIndex)
	if err != nil {
		return nil, s.fail(ctx, compactorv1connect.CollectionServiceGetCollectionProcedure, err)
	}
	out := collectionToProto(c)
	out.IndexFigures = indexFiguresToProto(ix)
	return connect.NewResponse(&compactorv1.GetCollectionResponse{Collection: out}), nil
}

// ListCollections implements CollectionService.ListCollections: by name,
// paged with the last name as cursor.
func (s *Service) ListCollections(ctx context.Context, req *connect.Request[compactorv1.ListCollectionsRequest]) (*connect.Response[compactorv1.ListCollectionsResponse], error) {
	size, err := pageSize(req.Msg.GetPageSize())
	if err != nil {
		return nil, err
	}
	after, err := decodeToken(tokenCollections, req.Msg.GetPageToken())
	if err != nil {
		return nil, err
	}
	// One more than the page tells whether another page follows.
	colls, err := s.cat.ListCollectionsPage(ctx, after, size+1)
	if err != nil {
		return nil, s.fail(ctx, compactorv1connect.CollectionServiceListCollectionsProcedure, err)
	}
	out := &compactorv1.ListCollectionsResponse{}
	if len(colls) > size {
		colls = colls[:size]
		out.NextPageToken = encodeToken(tokenCollections, colls[size-1].Name)
	}
	out.Collections = make([]*compactorv1.Collection, len(colls))
	for i, c := range colls {
		out.Collections[i] = collectionToProto(c)
	}
	return connect.NewResponse(out), nil
}

// DeleteCollection implements CollectionService.DeleteCollection: the
// collection's active jobs are cancelled first (manager.Deleter).
func (s *Service) DeleteCollection(ctx context.Context, req *connect.Request[compactorv1.DeleteCollectionRequest]) (*connect.Response[compactorv1.DeleteCollectionResponse], error) {
	const proc = compactorv1connect.CollectionServiceDeleteCollectionProcedure
	id := req.Msg.GetId()
	if err := checkID("id", id); err != nil {
		return nil, err
	}
	c, err := s.recs.DeleteCollection(ctx, id)
	if err != nil {
		return nil, s.fail(ctx, proc, err)
	}
	return connect.NewResponse(&compactorv1.DeleteCollectionResponse{Collection: collectionToProto(c)}), nil
}

// GetRecords implements CollectionService.GetRecords: by ids, or paged in id
// order.
func (s *Service) GetRecords(ctx context.Context, req *connect.Request[compactorv1.GetRecordsRequest]) (*connect.Response[compactorv1.GetRecordsResponse], error) {
	const proc = compactorv1connect.CollectionServiceGetRecordsProcedure
	m := req.Msg
	if err := checkID("collection_id", m.GetCollectionId()); err != nil {
		return nil, err
	}
	var res compaction.ReadResult
	var err error
	kind := tokenRecords
	if m.Version != nil {
		if m.GetVersion() < 1 {
			return nil, invalidArgument("version", "%d: versions start at 1 (leave it unset to read the current view)", m.GetVersion())
		}
		kind = fmt.Sprintf("%s@%d", tokenRecords, m.GetVersion())
	}
	if len(m.GetIds()) > 0 {
		if m.GetPageSize() != 0 || m.GetPageToken() != "" {
			return nil, invalidArgument("ids", "give ids or page_size/page_token, not both")
		}
		if len(m.GetIds()) > compaction.MaxReadIDs {
			return nil, invalidArgument("ids", "%d ids, more than the limit of %d", len(m.GetIds()), compaction.MaxReadIDs)
		}
		if m.Version != nil {
			res, err = s.recs.GetRecordsAt(ctx, m.GetCollectionId(), m.GetVersion(), m.GetIds())
		} else {
			res, err = s.recs.GetRecords(ctx, m.GetCollectionId(), m.GetIds())
		}
	} else {
		size, perr := pageSize(m.GetPageSize())
		if perr != nil {
			return nil, perr
		}
		after, terr := decodeToken(kind, m.GetPageToken())
		if terr != nil {
			return nil, terr
		}
		if m.Version != nil {
			res, err = s.recs.ListRecordsAt(ctx, m.GetCollectionId(), m.GetVersion(), after, size)
		} else {
			res, err = s.recs.ListRecords(ctx, m.GetCollectionId(), after, size)
		}
	}
	if err != nil {
		return nil, s.fail(ctx, proc, collectionNotFound(m.GetCollectionId(), err))
	}
	out := &compactorv1.GetRecordsResponse{NextPageToken: encodeToken(kind, res.Next), SegmentVersion: res.SegmentVersion, LogPosition: res.LogPosition}
	for _, r := range res.Records {
		p, err := recordToProto(r)
		if err != nil {
			return nil, s.fail(ctx, proc, err)
		}
		out.Records = append(out.Records, p)
	}
	return connect.NewResponse(out), nil
}

// PushLogs implements LogService.PushLogs.
func (s *Service) PushLogs(ctx context.Context, req *connect.Request[compactorv1.PushLogsRequest]) (*connect.Response[compactorv1.PushLogsResponse], error) {
	m := req.Msg
	if err := checkID("collection_id", m.GetCollectionId()); err != nil {
		return nil, err
	}
	switch n := len(m.GetRecords()); {
	case n == 0:
		return nil, invalidArgument("records", "give at least one record")
	case n > MaxPushRecords:
		return nil, invalidArgument("records", "%d records, more than the limit of %d per request", n, MaxPushRecords)
	}
	if key := m.GetIdempotencyKey(); key != "" {
		if err := catalog.ValidatePushKey(key); err != nil {
			return nil, invalidArgument("idempotency_key", "%s", strings.TrimSuffix(err.Error(), ": "+catalog.ErrInvalidArgument.Error()))
		}
	}
	ops := make([]materialize.OperationRecord, len(m.GetRecords()))
	for i, p := range m.GetRecords() {
		o, err := operationFromProto(i, p)
		if err != nil {
			return nil, err
		}
		ops[i] = o
	}
	first, last, replayed, err := s.cat.AppendLogKeyed(ctx, m.GetCollectionId(), m.GetIdempotencyKey(), ops, s.limits)
	if err != nil {
		return nil, s.fail(ctx, compactorv1connect.LogServicePushLogsProcedure, err)
	}
	return connect.NewResponse(&compactorv1.PushLogsResponse{FirstOffset: first, LastOffset: last, Count: int32(last - first + 1), Replayed: replayed}), nil
}

// collectionNotFound replaces a read's catalog.ErrNotFound, which names the
// step of the read that met it ("read log tail of collection …"), with the
// one thing a caller can act on: the collection does not exist. A read's
// only lookup that can miss is the collection's; other errors pass.
func collectionNotFound(id string, err error) error {
	var version *catalog.VersionNotFoundError
	if errors.As(err, &version) {
		return connect.NewError(connect.CodeNotFound, version)
	}
	if errors.Is(err, catalog.ErrNotFound) {
		return connect.NewError(connect.CodeNotFound, fmt.Errorf("collection %s not found", echo(id)))
	}
	return err
}

// checkCollectionJob checks the fields every request that starts a job on
// one collection carries: the collection's id (checkID) and the operator's
// reason (checkReason). Errors: INVALID_ARGUMENT naming the field.
func checkCollectionJob(collectionID, reason string) error {
	if err := checkID("collection_id", collectionID); err != nil {
		return err
	}
	return checkReason(reason)
}

// checkReason checks an operator's reason: at most MaxReasonBytes bytes of
// valid UTF-8. Errors: INVALID_ARGUMENT naming the field "reason".
func checkReason(reason string) error {
	switch {
	case len(reason) > MaxReasonBytes:
		return invalidArgument("reason", "is %d bytes, longer than the limit of %d", len(reason), MaxReasonBytes)
	case !utf8.ValidString(reason):
		return invalidArgument("reason", "is not valid UTF-8")
	}
	return nil
}

// keptVersion returns nil when version of collectionID is kept (readable,
// verifiable), else NOT_FOUND naming the oldest kept version.
func keptVersion(ctx context.Context, recs Records, collectionID string, version int64) error {
	vs, err := recs.ListVersions(ctx, collectionID)
	if err != nil {
		return collectionNotFound(collectionID, err)
	}
	oldest := int64(0)
	for _, v := range vs {
		if !v.Kept() {
			continue
		}
		if v.Version.Version == version {
			return nil
		}
		oldest = v.Version.Version
	}
	return connect.NewError(connect.CodeNotFound, fmt.Errorf("collection %s no longer keeps version %d: the oldest kept version is %d (--versions-to-keep)", collectionID, version, oldest))
}

package rpc

import (
	"context"
	"strings"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	compactorv1 "github.com/compactorhq/compactor/gen/compactor/v1"
	"github.com/compactorhq/compactor/gen/compactor/v1/compactorv1connect"
	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/manager"
	"github.com/compactorhq/compactor/internal/redact"
	"github.com/compactorhq/compactor/internal/window"
)

// Controller is what the ControlService handlers need of the manager.
type Controller interface {
	Pause(ctx context.Context, collectionID, reason, by string) error
	Resume(ctx context.Context, collectionID, by string) error
	SchedulerPause(ctx context.Context) (manager.PauseState, error)
	Plan(ctx context.Context, estimate bool) (manager.Plan, error)
	SetCollectionSettings(ctx context.Context, collectionID string, s catalog.CollectionSettings) (catalog.Collection, error)
	MaxThroughput(ctx context.Context) (manager.Throughput, error)
	SetMaxThroughput(ctx context.Context, bytesPerSecond int64, by string) (manager.Throughput, error)
	SetCollectionPolicy(ctx context.Context, collectionID string, u catalog.PolicyUpdate) (catalog.Collection, error)
	ServerWindows() (windows []string, onClose string)
	ClearDeadLetter(ctx context.Context, collectionID, actor, reason string) (catalog.Collection, bool, error)
	DeadLetterHistory(ctx context.Context, collectionID string, limit int) ([]catalog.DeadLetterEvent, error)
}

var _ compactorv1connect.ControlServiceHandler = (*Service)(nil)

// PauseCompactions implements ControlService.PauseCompactions.
func (s *Service) PauseCompactions(ctx context.Context, req *connect.Request[compactorv1.PauseCompactionsRequest]) (*connect.Response[compactorv1.PauseCompactionsResponse], error) {
	const proc = compactorv1connect.ControlServicePauseCompactionsProcedure
	m := req.Msg
	if err := checkControlTarget(m.GetCollectionId(), m.GetReason(), m.GetOperator()); err != nil {
		return nil, err
	}
	if err := s.ctl.Pause(ctx, m.GetCollectionId(), strings.TrimSpace(m.GetReason()), whoAsks(ctx, m.GetOperator())); err != nil {
		return nil, s.fail(ctx, proc, err)
	}
	pause, coll, err := s.controlState(ctx, m.GetCollectionId())
	if err != nil {
		return nil, s.fail(ctx, proc, err)
	}
	return connect.NewResponse(&compactorv1.PauseCompactionsResponse{Pause: pause, Collection: coll}), nil
}

// ResumeCompactions implements ControlService.ResumeCompactions.
func (s *Service) ResumeCompactions(ctx context.Context, req *connect.Request[compactorv1.ResumeCompactionsRequest]) (*connect.Response[compactorv1.ResumeCompactionsResponse], error) {
	const proc = compactorv1connect.ControlServiceResumeCompactionsProcedure
	m := req.Msg
	if err := checkControlTarget(m.GetCollectionId(), "", m.GetOperator()); err != nil {
		return nil, err
	}
	if err := s.ctl.Resume(ctx, m.GetCollectionId(), whoAsks(ctx, m.GetOperator())); err != nil {
		return nil, s.fail(ctx, proc, err)
	}
	pause, coll, err := s.controlState(ctx, m.GetCollectionId())
	if err != nil {
		return nil, s.fail(ctx, proc, err)
	}
	return connect.NewResponse(&compactorv1.ResumeCompactionsResponse{Pause: pause, Collection: coll}), nil
}

// checkControlTarget validates a pause or resume request.
func checkControlTarget(collectionID, reason, operator string) error {
	if collectionID != "" {
		if err := checkID("collection_id", collectionID); err != nil {
			return err
		}
	}
	if len(reason) > MaxReasonBytes {
		return invalidArgument("reason", "is %d bytes, more than %d", len(reason), MaxReasonBytes)
	}
	if len(operator) > MaxReasonBytes {
		return invalidArgument("operator", "is %d bytes, more than %d", len(operator), MaxReasonBytes)
	}
	return nil
}

// controlState reads the global pause and, when collectionID is set, the
// collection.
func (s *Service) controlState(ctx context.Context, collectionID string) (*compactorv1.PauseState, *compactorv1.Collection, error) {
	p, err := s.ctl.SchedulerPause(ctx)
	if err != nil {
		return nil, nil, err
	}
	if collectionID == "" {
		return pauseToProto(p), nil, nil
	}
	c, err := s.cat.GetCollection(ctx, collectionID)
	if err != nil {
		return nil, nil, err
	}
	return pauseToProto(p), collectionToProto(c), nil
}

// GetControls implements ControlService.GetControls.
func (s *Service) GetControls(ctx context.Context, _ *connect.Request[compactorv1.GetControlsRequest]) (*connect.Response[compactorv1.GetControlsResponse], error) {
	const proc = compactorv1connect.ControlServiceGetControlsProcedure
	p, err := s.ctl.SchedulerPause(ctx)
	if err != nil {
		return nil, s.fail(ctx, proc, err)
	}
	paused, err := s.cat.CountPausedCollections(ctx)
	if err != nil {
		return nil, s.fail(ctx, proc, err)
	}
	tp, err := s.ctl.MaxThroughput(ctx)
	if err != nil {
		return nil, s.fail(ctx, proc, err)
	}
	windows, onClose := s.ctl.ServerWindows()
	return connect.NewResponse(&compactorv1.GetControlsResponse{Pause: pauseToProto(p), PausedCollections: int32(paused), Throughput: throughputToProto(tp),
		CompactionWindows: windows, WindowClose: onClose}), nil
}

// SetThroughput implements ControlService.SetThroughput.
func (s *Service) SetThroughput(ctx context.Context, req *connect.Request[compactorv1.SetThroughputRequest]) (*connect.Response[compactorv1.SetThroughputResponse], error) {
	m := req.Msg
	if m.GetBytesPerSecond() < 0 {
		return nil, invalidArgument("bytes_per_second", "is %d; want 0 (no cap set here) or a positive number of bytes per second", m.GetBytesPerSecond())
	}
	if len(m.GetOperator()) > MaxReasonBytes {
		return nil, invalidArgument("operator", "is %d bytes, more than %d", len(m.GetOperator()), MaxReasonBytes)
	}
	tp, err := s.ctl.SetMaxThroughput(ctx, m.GetBytesPerSecond(), whoAsks(ctx, m.GetOperator()))
	if err != nil {
		return nil, s.fail(ctx, compactorv1connect.ControlServiceSetThroughputProcedure, err)
	}
	return connect.NewResponse(&compactorv1.SetThroughputResponse{Throughput: throughputToProto(tp)}), nil
}

func throughputToProto(t manager.Throughput) *compactorv1.ThroughputState {
	return &compactorv1.ThroughputState{BytesPerSecond: t.BytesPerSecond, OverrideBytesPerSecond: t.Override, SetBy: t.By, SetTime: ts(t.Since)}
}

// PlanCompactions implements ControlService.PlanCompactions.
func (s *Service) PlanCompactions(ctx context.Context, req *connect.Request[compactorv1.PlanCompactionsRequest]) (*connect.Response[compactorv1.PlanCompactionsResponse], error) {
	p, err := s.ctl.Plan(ctx, req.Msg.GetEstimate())
	if err != nil {
		return nil, s.fail(ctx, compactorv1connect.ControlServicePlanCompactionsProcedure, err)
	}
	out := &compactorv1.PlanCompactionsResponse{PlanTime: ts(p.At), Pause: pauseToProto(p.Pause)}
	for _, e := range p.Entries {
		pe := &compactorv1.PlanEntry{
			CollectionId: e.Collection.ID, CollectionName: e.Collection.Name, Decision: decisions.toProto(e.Decision), Reason: e.Reason,
			Backlog: e.Collection.Backlog(), OldestUncompactedTime: ts(e.Collection.OldestUncompactedAt),
			MinCompactionSize: e.MinCompactionSize, MaxUncompactedAge: durationpb.New(e.MaxUncompactedAge),
			RetryTime: ts(e.RetryAfter), EstimateError: e.EstimateError,
			Priority: priorities.toProto(e.Priority), FreshnessDebt: e.Freshness.Debt,
			CompactionWindows: e.Window.Windows, WindowOpen: e.Window.Open,
			NextWindowStart: ts(e.Window.NextStart), NextWindowEnd: ts(e.Window.NextEnd),
		}
		if x := e.Estimate; x != nil {
			pe.Estimate = predictionToProto(*x)
		}
		if j := e.IndexRebuild; j != nil {
			pe.IndexRebuild = jobToProto(manager.Job{Job: *j})
		}
		out.Entries = append(out.Entries, pe)
	}
	out.Workers = int32(p.Workers)
	if t := p.Totals; t.Jobs > 0 {
		out.Totals = &compactorv1.PlanTotals{
			Jobs: int32(t.Jobs), Records: t.OpRecords, LogBytes: t.LogBytes, BytesRead: t.BytesRead, BytesWritten: t.BytesWritten,
			BlobGets: t.BlobGets, BlobPuts: t.BlobPuts, BlocksToRewrite: t.BlocksToRewrite, RecordsToWrite: t.RecordsToWrite,
			VectorsToInsert: t.VectorsToInsert, VectorsToDelete: t.VectorsToDelete,
			PredictedDuration: durationpb.New(time.Duration(t.Seconds * float64(time.Second))), DurationUnknown: int32(t.SecondsUnknown),
			WriteAmplification: t.WriteAmplification,
		}
	}
	return connect.NewResponse(out), nil
}

// ClearDeadLetter implements ControlService.ClearDeadLetter.
func (s *Service) ClearDeadLetter(ctx context.Context, req *connect.Request[compactorv1.ClearDeadLetterRequest]) (*connect.Response[compactorv1.ClearDeadLetterResponse], error) {
	m := req.Msg
	if err := checkID("collection_id", m.GetCollectionId()); err != nil {
		return nil, err
	}
	if err := checkControlTarget(m.GetCollectionId(), m.GetReason(), m.GetOperator()); err != nil {
		return nil, err
	}
	c, cleared, err := s.ctl.ClearDeadLetter(ctx, m.GetCollectionId(), strings.TrimSpace(m.GetOperator()), strings.TrimSpace(m.GetReason()))
	if err != nil {
		return nil, s.fail(ctx, compactorv1connect.ControlServiceClearDeadLetterProcedure, err)
	}
	return connect.NewResponse(&compactorv1.ClearDeadLetterResponse{Collection: collectionToProto(c), Cleared: cleared}), nil
}

// GetDeadLetterHistory implements ControlService.GetDeadLetterHistory.
func (s *Service) GetDeadLetterHistory(ctx context.Context, req *connect.Request[compactorv1.GetDeadLetterHistoryRequest]) (*connect.Response[compactorv1.GetDeadLetterHistoryResponse], error) {
	const proc = compactorv1connect.ControlServiceGetDeadLetterHistoryProcedure
	m := req.Msg
	if err := checkID("collection_id", m.GetCollectionId()); err != nil {
		return nil, err
	}
	if m.GetLimit() < 0 || m.GetLimit() > 1000 {
		return nil, invalidArgument("limit", "is %d; want 0 (100) to 1000", m.GetLimit())
	}
	if _, err := s.cat.GetCollection(ctx, m.GetCollectionId()); err != nil {
		return nil, s.fail(ctx, proc, err)
	}
	evs, err := s.ctl.DeadLetterHistory(ctx, m.GetCollectionId(), int(m.GetLimit()))
	if err != nil {
		return nil, s.fail(ctx, proc, err)
	}
	out := &compactorv1.GetDeadLetterHistoryResponse{}
	for _, e := range evs {
		out.Events = append(out.Events, &compactorv1.DeadLetterEvent{Time: ts(e.At), Event: e.Event, Cause: e.Cause, Build: e.Build,
			Operator: e.Actor, Reason: redact.Paths(e.Reason), JobId: e.JobID, Failures: int32(e.Failures)})
	}
	return connect.NewResponse(out), nil
}

// UpdateCollectionSettings implements ControlService.UpdateCollectionSettings.
func (s *Service) UpdateCollectionSettings(ctx context.Context, req *connect.Request[compactorv1.UpdateCollectionSettingsRequest]) (*connect.Response[compactorv1.UpdateCollectionSettingsResponse], error) {
	m := req.Msg
	if err := checkID("collection_id", m.GetCollectionId()); err != nil {
		return nil, err
	}
	if m.GetMinCompactionSize() < 0 {
		return nil, invalidArgument("min_compaction_size", "is %d; want 0 (the server's) or a positive number of records", m.GetMinCompactionSize())
	}
	var age time.Duration
	if d := m.GetMaxUncompactedAge(); d != nil {
		if err := d.CheckValid(); err != nil {
			return nil, invalidArgument("max_uncompacted_age", "%v", err)
		}
		age = d.AsDuration()
		if age < 0 || (age > 0 && age < time.Second) {
			return nil, invalidArgument("max_uncompacted_age", "is %s; want 0 (the server's) or at least 1s", age)
		}
	}
	c, err := s.ctl.SetCollectionSettings(ctx, m.GetCollectionId(), catalog.CollectionSettings{MinCompactionSize: m.GetMinCompactionSize(), MaxUncompactedAge: age})
	if err != nil {
		return nil, s.fail(ctx, compactorv1connect.ControlServiceUpdateCollectionSettingsProcedure, err)
	}
	return connect.NewResponse(&compactorv1.UpdateCollectionSettingsResponse{Collection: collectionToProto(c)}), nil
}

// SetCollectionPolicy implements ControlService.SetCollectionPolicy.
func (s *Service) SetCollectionPolicy(ctx context.Context, req *connect.Request[compactorv1.SetCollectionPolicyRequest]) (*connect.Response[compactorv1.SetCollectionPolicyResponse], error) {
	m := req.Msg
	if err := checkID("collection_id", m.GetCollectionId()); err != nil {
		return nil, err
	}
	var u catalog.PolicyUpdate
	if p := m.GetPriority(); p != compactorv1.PriorityClass_PRIORITY_CLASS_UNSPECIFIED {
		class, ok := priorities.fromProto(p)
		if !ok {
			return nil, invalidArgument("priority", "is %d; want CRITICAL, NORMAL or LOW", int32(p))
		}
		u.Priority = &class
	}
	if w := m.GetCompactionWindows(); w != nil {
		if len(w.GetWindows()) > catalog.MaxCollectionWindows {
			return nil, invalidArgument("compaction_windows", "has %d windows, more than %d", len(w.GetWindows()), catalog.MaxCollectionWindows)
		}
		if _, err := window.ParseSet(w.GetWindows()); err != nil {
			return nil, invalidArgument("compaction_windows", "%v", err)
		}
		ws := append([]string{}, w.GetWindows()...)
		u.Windows = &ws
	}
	if d := m.GetObjectiveMaxAge(); d != nil {
		if err := d.CheckValid(); err != nil {
			return nil, invalidArgument("objective_max_age", "%v", err)
		}
		age := d.AsDuration()
		if age < 0 || (age > 0 && age < time.Second) {
			return nil, invalidArgument("objective_max_age", "is %s; want 0 (none) or at least 1s", age)
		}
		u.ObjectiveMaxAge = &age
	}
	if m.ObjectiveMaxBacklog != nil {
		n := m.GetObjectiveMaxBacklog()
		if n < 0 {
			return nil, invalidArgument("objective_max_backlog", "is %d; want 0 (none) or a positive number of records", n)
		}
		u.ObjectiveMaxBacklog = &n
	}
	if m.ThroughputShare != nil {
		sh := m.GetThroughputShare()
		if !(sh >= 0 && sh <= 1) {
			return nil, invalidArgument("throughput_share", "is %v; want 0 (none) or a fraction in (0, 1]", sh)
		}
		u.ThroughputShare = &sh
	}
	c, err := s.ctl.SetCollectionPolicy(ctx, m.GetCollectionId(), u)
	if err != nil {
		return nil, s.fail(ctx, compactorv1connect.ControlServiceSetCollectionPolicyProcedure, err)
	}
	return connect.NewResponse(&compactorv1.SetCollectionPolicyResponse{Collection: collectionToProto(c)}), nil
}

// The scheduling enums of the API and the domain values they stand for.
var (
	priorities = newEnumTable(map[catalog.PriorityClass]compactorv1.PriorityClass{
		catalog.PriorityCritical: compactorv1.PriorityClass_PRIORITY_CLASS_CRITICAL,
		catalog.PriorityNormal:   compactorv1.PriorityClass_PRIORITY_CLASS_NORMAL,
		catalog.PriorityLow:      compactorv1.PriorityClass_PRIORITY_CLASS_LOW,
	})
	decisions = newEnumTable(map[manager.Decision]compactorv1.PlanDecision{
		manager.DecideRun:           compactorv1.PlanDecision_PLAN_DECISION_RUN,
		manager.DecideSchedPaused:   compactorv1.PlanDecision_PLAN_DECISION_PAUSED,
		manager.DecidePaused:        compactorv1.PlanDecision_PLAN_DECISION_COLLECTION_PAUSED,
		manager.DecideDeadLettered:  compactorv1.PlanDecision_PLAN_DECISION_DEAD_LETTERED,
		manager.DecideBackingOff:    compactorv1.PlanDecision_PLAN_DECISION_BACKING_OFF,
		manager.DecideRunning:       compactorv1.PlanDecision_PLAN_DECISION_RUNNING,
		manager.DecideQueued:        compactorv1.PlanDecision_PLAN_DECISION_QUEUED,
		manager.DecideBelow:         compactorv1.PlanDecision_PLAN_DECISION_BELOW_THRESHOLDS,
		manager.DecideEmpty:         compactorv1.PlanDecision_PLAN_DECISION_EMPTY,
		manager.DecideOutsideWindow: compactorv1.PlanDecision_PLAN_DECISION_OUTSIDE_WINDOW,
	})
)

func pauseToProto(p manager.PauseState) *compactorv1.PauseState {
	return &compactorv1.PauseState{Paused: p.Paused, Reason: p.Reason, PausedBy: p.By, PauseTime: ts(p.Since)}
}

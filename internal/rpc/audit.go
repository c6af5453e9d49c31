package rpc

import (
	"context"
	"strconv"

	"connectrpc.com/connect"

	compactorv1 "github.com/compactorhq/compactor/gen/compactor/v1"
	"github.com/compactorhq/compactor/gen/compactor/v1/compactorv1connect"
	"github.com/compactorhq/compactor/internal/audit"
	"github.com/compactorhq/compactor/internal/catalog"
)

// AuditLog is what the AuditService handlers need of the catalog.
type AuditLog interface {
	ListAuditEvents(ctx context.Context, f catalog.AuditFilter) ([]audit.Event, error)
	VerifyAuditChain(ctx context.Context) (catalog.AuditVerification, error)
}

var _ compactorv1connect.AuditServiceHandler = (*Service)(nil)

const tokenAudit = "audit"

// ListAuditEvents implements AuditService.ListAuditEvents.
func (s *Service) ListAuditEvents(ctx context.Context, req *connect.Request[compactorv1.ListAuditEventsRequest]) (*connect.Response[compactorv1.ListAuditEventsResponse], error) {
	m := req.Msg
	f := catalog.AuditFilter{CollectionID: m.GetCollectionId()}
	if f.CollectionID != "" {
		if err := checkID("collection_id", f.CollectionID); err != nil {
			return nil, err
		}
	}
	if m.GetSince() != nil {
		if err := m.GetSince().CheckValid(); err != nil {
			return nil, invalidArgument("since", "is not a valid time: %v", err)
		}
		f.Since = m.GetSince().AsTime()
	}
	size, err := pageSize(m.GetPageSize())
	if err != nil {
		return nil, err
	}
	cursor, err := decodeToken(tokenAudit, m.GetPageToken())
	if err != nil {
		return nil, err
	}
	if cursor != "" {
		if f.AfterID, err = strconv.ParseInt(cursor, 10, 64); err != nil || f.AfterID < 0 {
			return nil, invalidArgument("page_token", "page token %q is not one of this listing; pass the next_page_token of a previous response", echo(m.GetPageToken()))
		}
	}
	f.Limit = size + 1
	events, err := s.audit.ListAuditEvents(ctx, f)
	if err != nil {
		return nil, s.fail(ctx, compactorv1connect.AuditServiceListAuditEventsProcedure, err)
	}
	out := &compactorv1.ListAuditEventsResponse{}
	if len(events) > size {
		events = events[:size]
		out.NextPageToken = encodeToken(tokenAudit, strconv.FormatInt(events[size-1].ID, 10))
	}
	out.Events = make([]*compactorv1.AuditEvent, len(events))
	for i, e := range events {
		out.Events[i] = auditEventToProto(e)
	}
	return connect.NewResponse(out), nil
}

// VerifyAuditLog implements AuditService.VerifyAuditLog.
func (s *Service) VerifyAuditLog(ctx context.Context, _ *connect.Request[compactorv1.VerifyAuditLogRequest]) (*connect.Response[compactorv1.VerifyAuditLogResponse], error) {
	v, err := s.audit.VerifyAuditChain(ctx)
	if err != nil {
		return nil, s.fail(ctx, compactorv1connect.AuditServiceVerifyAuditLogProcedure, err)
	}
	out := &compactorv1.VerifyAuditLogResponse{Ok: v.Broken == nil, EventsChecked: v.Events, LastEventId: v.LastID, LastHash: v.LastHash}
	if v.Broken != nil {
		out.BrokenEventId, out.Problem = v.Broken.EventID, v.Broken.Problem
	}
	return connect.NewResponse(out), nil
}

func auditEventToProto(e audit.Event) *compactorv1.AuditEvent {
	return &compactorv1.AuditEvent{
		Id: e.ID, Time: ts(e.Time), Principal: e.Principal, Role: e.Role, Source: e.Source, Action: e.Action,
		CollectionId: e.CollectionID, Target: e.Target, Reason: e.Reason, Before: e.Before, After: e.After, JobId: e.JobID,
		PrevHash: audit.Hex(e.PrevHash), Hash: audit.Hex(e.Hash),
	}
}

package rpc

import (
	"context"
	"strings"

	"connectrpc.com/connect"

	compactorv1 "github.com/compactorhq/compactor/gen/compactor/v1"
	"github.com/compactorhq/compactor/gen/compactor/v1/compactorv1connect"
	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/compaction"
)

// ListVersions implements CollectionService.ListVersions.
func (s *Service) ListVersions(ctx context.Context, req *connect.Request[compactorv1.ListVersionsRequest]) (*connect.Response[compactorv1.ListVersionsResponse], error) {
	const proc = compactorv1connect.CollectionServiceListVersionsProcedure
	m := req.Msg
	if err := checkID("collection_id", m.GetCollectionId()); err != nil {
		return nil, err
	}
	vs, err := s.recs.ListVersions(ctx, m.GetCollectionId())
	if err != nil {
		return nil, s.fail(ctx, proc, collectionNotFound(m.GetCollectionId(), err))
	}
	out := &compactorv1.ListVersionsResponse{Versions: make([]*compactorv1.SegmentVersion, len(vs))}
	for i, v := range vs {
		out.Versions[i] = versionToProto(v)
		if v.Current {
			out.CurrentVersion = v.Version.Version
		}
		if v.Kept() {
			out.OldestKeptVersion = v.Version.Version
		}
	}
	return connect.NewResponse(out), nil
}

// RollbackCollection implements CollectionService.RollbackCollection.
func (s *Service) RollbackCollection(ctx context.Context, req *connect.Request[compactorv1.RollbackCollectionRequest]) (*connect.Response[compactorv1.RollbackCollectionResponse], error) {
	const proc = compactorv1connect.CollectionServiceRollbackCollectionProcedure
	m := req.Msg
	if err := checkID("collection_id", m.GetCollectionId()); err != nil {
		return nil, err
	}
	switch {
	case m.GetToVersion() < 1:
		return nil, invalidArgument("to_version", "%d: give the kept version to roll back to (ListVersions), at least 1", m.GetToVersion())
	case len(m.GetReason()) > MaxReasonBytes:
		return nil, invalidArgument("reason", "%d bytes, more than the limit of %d", len(m.GetReason()), MaxReasonBytes)
	case len(m.GetOperator()) > MaxReasonBytes:
		return nil, invalidArgument("operator", "%d bytes, more than the limit of %d", len(m.GetOperator()), MaxReasonBytes)
	}
	res, err := s.recs.Rollback(ctx, m.GetCollectionId(), compaction.RollbackRequest{
		ToVersion: m.GetToVersion(), Reason: strings.TrimSpace(m.GetReason()), By: strings.TrimSpace(m.GetOperator())})
	if err != nil {
		return nil, s.fail(ctx, proc, collectionNotFound(m.GetCollectionId(), err))
	}
	return connect.NewResponse(&compactorv1.RollbackCollectionResponse{
		Collection:         collectionToProto(res.Collection),
		Version:            versionToProto(compaction.VersionInfo{Version: res.Version, Current: true}),
		ReplacedVersion:    res.Replaced,
		RecordsToRecompact: res.Reread,
		JobId:              res.JobID,
	}), nil
}

// versionToProto converts one entry of the version history.
func versionToProto(v compaction.VersionInfo) *compactorv1.SegmentVersion {
	return &compactorv1.SegmentVersion{
		Version:          v.Version.Version,
		CreateTime:       ts(v.CreatedAt),
		OffsetStart:      v.OffsetStart,
		CompactionOffset: v.CompactionOffset,
		JobId:            v.JobID,
		RecordCount:      v.RecordCount,
		SegmentBytes:     v.SegmentBytes,
		BlockCount:       int32(v.BlockCount),
		ManifestKey:      v.ManifestKey,
		Current:          v.Current,
		Kept:             v.Kept(),
		RetireTime:       ts(v.RetiredAt),
		RollbackOf:       v.RollbackOf,
		Reason:           v.Reason,
		CreatedBy:        v.CreatedBy,
		Digest:           v.Digest,
		Verification:     verificationToProto(v.Version),
		VerifyTime:       ts(v.VerifiedAt),
		VerifyError:      v.VerifyError,
	}
}

// verificationToProto is the outcome of v's last verification.
func verificationToProto(v catalog.Version) compactorv1.VersionVerification {
	switch {
	case v.VerifiedAt.IsZero():
		return compactorv1.VersionVerification_VERSION_VERIFICATION_UNSPECIFIED
	case v.VerifyError != "":
		return compactorv1.VersionVerification_VERSION_VERIFICATION_FAILED
	}
	return compactorv1.VersionVerification_VERSION_VERIFICATION_VERIFIED
}

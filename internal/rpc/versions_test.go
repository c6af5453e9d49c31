package rpc_test

import (
	"strings"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	compactorv1 "github.com/compactorhq/compactor/gen/compactor/v1"
)

func versionsOf(t *testing.T, c clients, collID string) *compactorv1.ListVersionsResponse {
	t.Helper()
	res, err := c.colls.ListVersions(t.Context(), connect.NewRequest(&compactorv1.ListVersionsRequest{CollectionId: collID}))
	if err != nil {
		t.Fatalf("list versions of %s: %v", collID, err)
	}
	return res.Msg
}

// recordsAt pages through GetRecords of one version with pageSize.
func recordsAt(t *testing.T, c clients, collID string, version int64, pageSize int32) []*compactorv1.Record {
	t.Helper()
	var out []*compactorv1.Record
	token := ""
	for range 1000 {
		res, err := c.colls.GetRecords(t.Context(), connect.NewRequest(&compactorv1.GetRecordsRequest{CollectionId: collID, PageSize: pageSize, PageToken: token, Version: &version}))
		if err != nil {
			t.Fatalf("get records of version %d: %v", version, err)
		}
		if res.Msg.GetSegmentVersion() != version {
			t.Fatalf("a page of version %d says version %d", version, res.Msg.GetSegmentVersion())
		}
		out = append(out, res.Msg.GetRecords()...)
		if token = res.Msg.GetNextPageToken(); token == "" {
			return out
		}
	}
	t.Fatal("paging does not end")
	return nil
}

func sameRecords(t *testing.T, what string, got, want []*compactorv1.Record) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d records, want %d", what, len(got), len(want))
	}
	for i := range got {
		if !proto.Equal(got[i], want[i]) {
			t.Fatalf("%s: record %d is %v, want %v", what, i, got[i], want[i])
		}
	}
}

// TestVersionsAndRollback runs over every protocol: the version history,
// reads and queries of a kept version alone, a rollback that keeps the
// writes after the version it restores, and the errors of each.
func TestVersionsAndRollback(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			c := f.clients(p)
			ctx := t.Context()
			coll := createCollection(t, c, "versions-"+p.name, 2)
			id := coll.GetId()
			push(t, c, id, smallRecords(0, 10, 2))
			j1 := waitJob(t, c, compactOne(t, c, id).GetJob().GetId())
			wantSucceeded(t, j1)
			at1 := allRecords(t, c, id, 100)
			updates := smallRecords(0, 5, 2)
			for _, u := range updates {
				u.Op = compactorv1.Operation_OPERATION_UPSERT
				d := "updated " + u.GetId()
				u.Document = &d
			}
			push(t, c, id, updates)
			j2 := waitJob(t, c, compactOne(t, c, id).GetJob().GetId())
			wantSucceeded(t, j2)
			push(t, c, id, smallRecords(10, 5, 2)) // the tail
			view := allRecords(t, c, id, 100)

			vs := versionsOf(t, c, id)
			if len(vs.GetVersions()) != 2 || vs.GetCurrentVersion() != 2 || vs.GetOldestKeptVersion() != 1 {
				t.Fatalf("versions: %v", vs)
			}
			v2, v1 := vs.GetVersions()[0], vs.GetVersions()[1]
			if v2.GetVersion() != 2 || !v2.GetCurrent() || !v2.GetKept() || v2.GetJobId() != j2.GetId() || v2.GetOffsetStart() != 10 || v2.GetCompactionOffset() != 15 ||
				v2.GetRecordCount() != 10 || v2.GetBlockCount() < 1 || v2.GetSegmentBytes() <= 0 || v2.GetCreateTime() == nil || v2.GetManifestKey() == "" {
				t.Errorf("version 2: %v", v2)
			}
			if v1.GetVersion() != 1 || v1.GetCurrent() || !v1.GetKept() || v1.GetJobId() != j1.GetId() || v1.GetOffsetStart() != 0 || v1.GetCompactionOffset() != 10 || v1.GetRollbackOf() != 0 {
				t.Errorf("version 1: %v", v1)
			}

			// Version 1 alone: the records before the updates, no tail.
			sameRecords(t, "version 1 paged", recordsAt(t, c, id, 1, 3), at1)
			one := int64(1)
			byID, err := c.colls.GetRecords(ctx, connect.NewRequest(&compactorv1.GetRecordsRequest{CollectionId: id, Ids: []string{"r00000", "r00012"}, Version: &one}))
			if err != nil {
				t.Fatal(err)
			}
			sameRecords(t, "version 1 by ids", byID.Msg.GetRecords(), at1[:1])
			if byID.Msg.GetLogPosition() != 10 {
				t.Errorf("a read of version 1 reflects the log up to %d, want its compaction offset 10", byID.Msg.GetLogPosition())
			}
			q, err := c.colls.QueryRecords(ctx, connect.NewRequest(&compactorv1.QueryRecordsRequest{CollectionId: id, Embeddings: []*compactorv1.QueryEmbedding{emb(0, 0.1)},
				K: 100, Version: &one, Include: []compactorv1.Include{compactorv1.Include_INCLUDE_DOCUMENTS}}))
			if err != nil {
				t.Fatal(err)
			}
			if hits := q.Msg.GetResults()[0].GetHits(); len(hits) != 10 || hits[0].GetId() != "r00000" || hits[0].GetDocument() != "document 0" || q.Msg.GetSegmentVersion() != 1 {
				t.Errorf("query of version 1: %d hits, first %v, version %d; want the 10 records of version 1", len(hits), hits[0], q.Msg.GetSegmentVersion())
			}

			// The errors of reads by version.
			page, err := c.colls.GetRecords(ctx, connect.NewRequest(&compactorv1.GetRecordsRequest{CollectionId: id, PageSize: 2, Version: &one}))
			if err != nil {
				t.Fatal(err)
			}
			two, zero, nine := int64(2), int64(0), int64(9)
			_, err = c.colls.GetRecords(ctx, connect.NewRequest(&compactorv1.GetRecordsRequest{CollectionId: id, PageSize: 2, PageToken: page.Msg.GetNextPageToken(), Version: &two}))
			wantViolation(t, err, "page_token")
			_, err = c.colls.GetRecords(ctx, connect.NewRequest(&compactorv1.GetRecordsRequest{CollectionId: id, PageSize: 2, PageToken: page.Msg.GetNextPageToken()}))
			wantViolation(t, err, "page_token")
			_, err = c.colls.GetRecords(ctx, connect.NewRequest(&compactorv1.GetRecordsRequest{CollectionId: id, Version: &zero}))
			wantViolation(t, err, "version", "versions start at 1")
			_, err = c.colls.QueryRecords(ctx, connect.NewRequest(&compactorv1.QueryRecordsRequest{CollectionId: id, Embeddings: []*compactorv1.QueryEmbedding{emb(0, 0)}, K: 1, Version: &zero}))
			wantViolation(t, err, "version", "versions start at 1")
			_, err = c.colls.GetRecords(ctx, connect.NewRequest(&compactorv1.GetRecordsRequest{CollectionId: id, Ids: []string{"r00000"}, Version: &nine}))
			if ce := wantCode(t, err, connect.CodeNotFound); !strings.Contains(ce.Message(), "has no version 9: the newest is 2") {
				t.Errorf("read of version 9: %q", ce.Message())
			}
			_, err = c.colls.GetRecords(ctx, connect.NewRequest(&compactorv1.GetRecordsRequest{CollectionId: unknownID(1), Version: &one}))
			wantCode(t, err, connect.CodeNotFound)
			_, err = c.colls.ListVersions(ctx, connect.NewRequest(&compactorv1.ListVersionsRequest{CollectionId: unknownID(1)}))
			wantCode(t, err, connect.CodeNotFound)
			_, err = c.colls.ListVersions(ctx, connect.NewRequest(&compactorv1.ListVersionsRequest{CollectionId: "nope"}))
			wantViolation(t, err, "collection_id")

			// Version 2 verifies, replayed from version 1 and the log after
			// it, which the catalog keeps for that (and for rollbacks).
			if v1.GetDigest() == "" || v2.GetDigest() == "" || v2.GetVerification() != compactorv1.VersionVerification_VERSION_VERIFICATION_UNSPECIFIED {
				t.Errorf("digests and verification before a verify: %v / %v", v1, v2)
			}
			vr, err := c.jobs.VerifyCollection(ctx, connect.NewRequest(&compactorv1.VerifyCollectionRequest{CollectionId: id, Version: 2, Replay: true}))
			if err != nil {
				t.Fatalf("verify version 2: %v", err)
			}
			wantSucceeded(t, waitJob(t, c, vr.Msg.GetJob().GetId()))
			if v := versionsOf(t, c, id).GetVersions()[0]; v.GetVerification() != compactorv1.VersionVerification_VERSION_VERIFICATION_VERIFIED || v.GetVerifyTime() == nil || v.GetVerifyError() != "" {
				t.Errorf("version 2 after its verification: %v", v)
			}

			// Roll back to version 1: the view keeps every write.
			rb, err := c.colls.RollbackCollection(ctx, connect.NewRequest(&compactorv1.RollbackCollectionRequest{CollectionId: id, ToVersion: 1,
				Reason: "version 2 is bad", Operator: "alice@" + p.name}))
			if err != nil {
				t.Fatalf("rollback: %v", err)
			}
			got := rb.Msg
			if got.GetReplacedVersion() != 2 || got.GetRecordsToRecompact() != 5 || got.GetVersion().GetVersion() != 3 || got.GetVersion().GetRollbackOf() != 1 ||
				got.GetCollection().GetSegmentVersion() != 3 || got.GetCollection().GetCompactionOffset() != 10 || got.GetCollection().GetBacklog() != 10 {
				t.Fatalf("rollback response: %v", got)
			}
			rj, err := c.jobs.GetCompaction(ctx, connect.NewRequest(&compactorv1.GetCompactionRequest{JobId: got.GetJobId()}))
			if err != nil {
				t.Fatalf("the rollback's job %q: %v", got.GetJobId(), err)
			}
			if j := rj.Msg.GetJob(); j.GetKind() != compactorv1.JobKind_JOB_KIND_ROLLBACK || j.GetState() != compactorv1.JobState_JOB_STATE_SUCCEEDED ||
				j.GetReason() != "version 2 is bad" || j.GetVersionBefore() != 2 || j.GetVersionAfter() != 3 || j.GetOffsetStart() != 10 || j.GetOffsetEnd() != 15 {
				t.Errorf("the rollback's job: %v", j)
			}
			sameRecords(t, "the view after the rollback", allRecords(t, c, id, 4), view)
			sameRecords(t, "version 3 alone is version 1", recordsAt(t, c, id, 3, 4), at1)
			vs = versionsOf(t, c, id)
			if v3 := vs.GetVersions()[0]; v3.GetVersion() != 3 || v3.GetRollbackOf() != 1 || v3.GetReason() != "version 2 is bad" || v3.GetCreatedBy() != "alice@"+p.name ||
				v3.GetJobId() != got.GetJobId() || v3.GetOffsetStart() != 0 || v3.GetCompactionOffset() != 10 || !v3.GetCurrent() ||
				v3.GetDigest() != v1.GetDigest() || v3.GetVerification() != compactorv1.VersionVerification_VERSION_VERIFICATION_UNSPECIFIED {
				t.Errorf("version 3 in the history: %v", v3)
			}

			// The errors of rollbacks.
			for _, tt := range []struct {
				req   *compactorv1.RollbackCollectionRequest
				code  connect.Code
				field string
				says  string
			}{
				{&compactorv1.RollbackCollectionRequest{CollectionId: id}, connect.CodeInvalidArgument, "to_version", "at least 1"},
				{&compactorv1.RollbackCollectionRequest{CollectionId: "x", ToVersion: 1}, connect.CodeInvalidArgument, "collection_id", ""},
				{&compactorv1.RollbackCollectionRequest{CollectionId: id, ToVersion: 1, Reason: strings.Repeat("r", 1025)}, connect.CodeInvalidArgument, "reason", ""},
				{&compactorv1.RollbackCollectionRequest{CollectionId: id, ToVersion: 3}, connect.CodeInvalidArgument, "", "already the current version"},
				{&compactorv1.RollbackCollectionRequest{CollectionId: id, ToVersion: 7}, connect.CodeNotFound, "", "has no version 7"},
				{&compactorv1.RollbackCollectionRequest{CollectionId: unknownID(2), ToVersion: 1}, connect.CodeNotFound, "", "not found"},
			} {
				_, err := c.colls.RollbackCollection(ctx, connect.NewRequest(tt.req))
				ce := wantCode(t, err, tt.code)
				if tt.field != "" {
					wantViolation(t, err, tt.field)
				}
				if !strings.Contains(ce.Message(), tt.says) {
					t.Errorf("rollback %v: %q does not say %q", tt.req, ce.Message(), tt.says)
				}
			}

			// The next compaction re-compacts (10, 15] and the view stays.
			j4 := waitJob(t, c, compactOne(t, c, id).GetJob().GetId())
			wantSucceeded(t, j4)
			if j4.GetOffsetStart() != 10 || j4.GetOffsetEnd() != 20 || j4.GetVersionAfter() != 4 {
				t.Errorf("compaction after the rollback: offsets (%d, %d], version %d; want (10, 20], 4", j4.GetOffsetStart(), j4.GetOffsetEnd(), j4.GetVersionAfter())
			}
			sameRecords(t, "the view after the next compaction", allRecords(t, c, id, 100), view)
			sameRecords(t, "version 4 alone", recordsAt(t, c, id, 4, 100), view)
			if c := getCollection(t, c, id); c.GetRecordCount() != 15 || c.GetBacklog() != 0 {
				t.Errorf("after the next compaction: %d records, backlog %d", c.GetRecordCount(), c.GetBacklog())
			}
		})
	}
}

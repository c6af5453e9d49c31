package rpc_test

import (
	"strings"
	"testing"

	"connectrpc.com/connect"

	compactorv1 "github.com/compactorhq/compactor/gen/compactor/v1"
	"github.com/compactorhq/compactor/internal/catalog"
)

// The status page and the CLI's tables show the first 8 characters of a job
// id; GetCompaction and CancelCompaction take such a unique start in place of
// the whole id, and say which jobs an ambiguous one names.
func TestShortJobIDsNameTheOneJobTheyStart(t *testing.T) {
	f := newFixture(t, fixtureOptions{idle: true})
	c := f.clients(protocols[1])
	ctx := t.Context()
	ids := []string{
		"abcd1234-0000-4000-8000-000000000001",
		"abcd5678-0000-4000-8000-000000000002",
	}
	for i, id := range ids {
		coll := createCollection(t, c, "short-"+string(rune('a'+i)), 4)
		if _, _, err := f.app.Catalog.EnqueueJob(ctx, catalog.JobRequest{ID: id, CollectionID: coll.GetId(), Trigger: catalog.TriggerOneOff}); err != nil {
			t.Fatal(err)
		}
	}

	for _, ref := range []string{"abcd1234", "ABCD1234", "abcd1", "abcd1234-0000"} {
		res, err := c.jobs.GetCompaction(ctx, connect.NewRequest(&compactorv1.GetCompactionRequest{JobId: ref}))
		if err != nil || res.Msg.GetJob().GetId() != ids[0] {
			t.Errorf("GetCompaction(%q) = %v, %v; want job %s", ref, res, err, ids[0])
		}
	}

	_, err := c.jobs.GetCompaction(ctx, connect.NewRequest(&compactorv1.GetCompactionRequest{JobId: "abcd"}))
	ce := wantCode(t, err, connect.CodeInvalidArgument)
	wantViolation(t, err, "job_id")
	if msg := ce.Message(); !strings.Contains(msg, "ambiguous") || !strings.Contains(msg, ids[0]) || !strings.Contains(msg, ids[1]) {
		t.Errorf("ambiguous prefix: message %q does not say so and list both jobs", msg)
	}

	_, err = c.jobs.GetCompaction(ctx, connect.NewRequest(&compactorv1.GetCompactionRequest{JobId: "abce"}))
	if ce := wantCode(t, err, connect.CodeNotFound); !strings.Contains(ce.Message(), "abce") {
		t.Errorf("unknown prefix: message %q does not name it", ce.Message())
	}

	res, err := c.jobs.CancelCompaction(ctx, connect.NewRequest(&compactorv1.CancelCompactionRequest{JobId: "abcd5678"}))
	if err != nil || res.Msg.GetJob().GetId() != ids[1] || res.Msg.GetJob().GetState() != compactorv1.JobState_JOB_STATE_CANCELLED {
		t.Errorf("CancelCompaction(abcd5678) = %v, %v; want job %s cancelled", res, err, ids[1])
	}

	// Too short, or not the start of an id at all: INVALID_ARGUMENT naming job_id.
	for _, ref := range []string{"abc", "abcx1234", "abcd1234-0000-4000-8000-0000000000011"} {
		_, err := c.jobs.GetCompaction(ctx, connect.NewRequest(&compactorv1.GetCompactionRequest{JobId: ref}))
		wantCode(t, err, connect.CodeInvalidArgument)
		wantViolation(t, err, "job_id")
	}
}

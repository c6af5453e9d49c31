package rpc_test

import (
	"testing"

	"connectrpc.com/connect"

	compactorv1 "github.com/compactorhq/compactor/gen/compactor/v1"
)

// VerifyCollection refuses what it can before queueing a job, with the
// code of each error class (the job itself: internal/cli's TestVerifyWait).
func TestVerifyCollectionErrors(t *testing.T) {
	f := newFixture(t, fixtureOptions{idle: true})
	c := f.clients(protocols[0])
	ctx := t.Context()
	coll, err := c.colls.CreateCollection(ctx, connect.NewRequest(&compactorv1.CreateCollectionRequest{Name: "v"}))
	if err != nil {
		t.Fatal(err)
	}
	id := coll.Msg.GetCollection().GetId()
	for _, tc := range []struct {
		name string
		req  *compactorv1.VerifyCollectionRequest
		code connect.Code
	}{
		{"a malformed id", &compactorv1.VerifyCollectionRequest{CollectionId: "x"}, connect.CodeInvalidArgument},
		{"a negative version", &compactorv1.VerifyCollectionRequest{CollectionId: id, Version: -1}, connect.CodeInvalidArgument},
		{"an unknown collection", &compactorv1.VerifyCollectionRequest{CollectionId: "00000000-0000-4000-8000-000000000000"}, connect.CodeNotFound},
		{"nothing compacted", &compactorv1.VerifyCollectionRequest{CollectionId: id}, connect.CodeFailedPrecondition},
	} {
		if _, err := c.jobs.VerifyCollection(ctx, connect.NewRequest(tc.req)); connect.CodeOf(err) != tc.code {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.code)
		}
	}
}

package rpc_test

import (
	"strings"
	"testing"

	"connectrpc.com/connect"

	compactorv1 "github.com/compactorhq/compactor/gen/compactor/v1"
)

// TestPushIdempotencyKey runs over every protocol: a retry with the same
// key answers the first offsets and writes nothing; the same key with
// another batch, and a malformed key, are INVALID_ARGUMENT naming the key.
func TestPushIdempotencyKey(t *testing.T) {
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, fixtureOptions{idle: true})
			c := f.clients(p)
			ctx := t.Context()
			coll := createCollection(t, c, "keyed", 2)
			pushKeyed := func(key string, recs []*compactorv1.OperationRecord) (*compactorv1.PushLogsResponse, error) {
				res, err := c.logs.PushLogs(ctx, connect.NewRequest(&compactorv1.PushLogsRequest{CollectionId: coll.GetId(), Records: recs, IdempotencyKey: key}))
				if err != nil {
					return nil, err
				}
				return res.Msg, nil
			}
			push(t, c, coll.GetId(), smallRecords(100, 1, 2)) // offset 1
			first, err := pushKeyed("run-7/1", smallRecords(0, 3, 2))
			if err != nil || first.GetFirstOffset() != 2 || first.GetLastOffset() != 4 || first.GetReplayed() {
				t.Fatalf("first push: %v, %v; want offsets 2..4, not replayed", first, err)
			}
			retry, err := pushKeyed("run-7/1", smallRecords(0, 3, 2))
			if err != nil || retry.GetFirstOffset() != 2 || retry.GetLastOffset() != 4 || retry.GetCount() != 3 || !retry.GetReplayed() {
				t.Fatalf("retry: %v, %v; want offsets 2..4, count 3, replayed", retry, err)
			}
			if pos := getCollection(t, c, coll.GetId()).GetLogPosition(); pos != 4 {
				t.Fatalf("log position %d after the retry, want 4", pos)
			}
			_, err = pushKeyed("run-7/1", smallRecords(10, 3, 2))
			wantCode(t, err, connect.CodeInvalidArgument)
			wantViolation(t, err, "idempotency_key", `"run-7/1"`, "different batch")
			_, err = pushKeyed(strings.Repeat("k", 129), smallRecords(0, 1, 2))
			wantCode(t, err, connect.CodeInvalidArgument)
			wantViolation(t, err, "idempotency_key", "128")
			_, err = pushKeyed("a\x00b", smallRecords(0, 1, 2))
			wantViolation(t, err, "idempotency_key", "control")
			if pos := getCollection(t, c, coll.GetId()).GetLogPosition(); pos != 4 {
				t.Fatalf("log position %d after refused pushes, want 4", pos)
			}
		})
	}
}

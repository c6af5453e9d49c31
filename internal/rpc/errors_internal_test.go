package rpc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"syscall"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/proto"

	compactorv1 "github.com/compactorhq/compactor/gen/compactor/v1"
	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/manager"
	"github.com/compactorhq/compactor/internal/materialize"
)

// TestStorageFullIsResourceExhausted: a full store, however deep the
// domain wrapped it (a job insert of Compact, a delete, a push), answers
// RESOURCE_EXHAUSTED with a message naming the store and an ErrorInfo, and
// never INTERNAL; the server path of the cause stays in the log.
func TestStorageFullIsResourceExhausted(t *testing.T) {
	var logs strings.Builder
	log := slog.New(slog.NewTextHandler(&logs, nil))
	cause := fmt.Errorf("write /var/lib/compactor/blobs/x.tmp: %w", syscall.ENOSPC)
	for _, tt := range []struct {
		procedure, store string
		err              error
	}{
		{"Compact", catalog.StoreCatalog, fmt.Errorf("enqueue collection c: insert job j: %w", &catalog.StorageFullError{Store: catalog.StoreCatalog, Code: "SQLITE_FULL", Err: errors.New("database or disk is full (13)")})},
		{"DeleteCollection", catalog.StoreCatalog, fmt.Errorf("delete collection c: %w", &catalog.StorageFullError{Store: catalog.StoreCatalog, Code: "SQLSTATE 53100", Err: errors.New("could not extend file")})},
		{"PushLogs", catalog.StoreBlobs, fmt.Errorf("put blob k: %w", &catalog.StorageFullError{Store: catalog.StoreBlobs, Code: "ENOSPC", Err: cause})},
	} {
		err := toConnect(context.Background(), log, tt.procedure, tt.err)
		var ce *connect.Error
		if !errors.As(err, &ce) || ce.Code() != connect.CodeResourceExhausted {
			t.Fatalf("%s: %v, want RESOURCE_EXHAUSTED", tt.procedure, err)
		}
		if !strings.Contains(ce.Message(), "the "+tt.store+" is out of space") || strings.Contains(ce.Message(), "/var/lib") {
			t.Fatalf("%s: message %q, want it to name the %s and no server path", tt.procedure, ce.Message(), tt.store)
		}
		found := false
		for _, d := range ce.Details() {
			if v, derr := d.Value(); derr == nil {
				if info, ok := v.(*errdetails.ErrorInfo); ok && info.GetReason() == ReasonStorageFull && info.GetMetadata()["store"] == tt.store {
					found = true
				}
			}
		}
		if !found {
			t.Fatalf("%s: no ErrorInfo %s naming the %s", tt.procedure, ReasonStorageFull, tt.store)
		}
	}
	if !strings.Contains(logs.String(), "/var/lib/compactor/blobs/x.tmp") {
		t.Fatalf("the cause is not in the server log:\n%s", logs.String())
	}
}

// TestErrorsCarryTheTypedReason: every error a client can act on carries a
// compactorv1.ErrorDetail with its reason and data, so that a client reads
// the record index, field or limit from data and never parses the message.
func TestErrorsCarryTheTypedReason(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	for _, tt := range []struct {
		name string
		err  error
		code connect.Code
		want *compactorv1.ErrorDetail
	}{
		{"an invalid record", fmt.Errorf("push: %w", &materialize.InvalidRecordError{Index: 3, ID: "0ad", Field: "embedding", Reason: "dimension 3, want 64"}),
			connect.CodeInvalidArgument, &compactorv1.ErrorDetail{Reason: compactorv1.ErrorReason_ERROR_REASON_INVALID_RECORD,
				Data: &compactorv1.ErrorDetail_InvalidRecord{InvalidRecord: &compactorv1.InvalidRecord{Index: 3, Id: "0ad", Field: "embedding", Problem: "dimension 3, want 64"}}}},
		{"a full backlog", &catalog.BackpressureError{CollectionID: "c", Backlog: 90, Incoming: 20, Limit: 100},
			connect.CodeResourceExhausted, &compactorv1.ErrorDetail{Reason: compactorv1.ErrorReason_ERROR_REASON_BACKLOG_LIMIT,
				Data: &compactorv1.ErrorDetail_BacklogLimit{BacklogLimit: &compactorv1.BacklogLimit{Backlog: 90, Incoming: 20, Limit: 100}}}},
		{"a batch over the backlog limit", &catalog.BackpressureError{CollectionID: "c", Backlog: 0, Incoming: 200, Limit: 100},
			connect.CodeResourceExhausted, &compactorv1.ErrorDetail{Reason: compactorv1.ErrorReason_ERROR_REASON_BATCH_OVER_BACKLOG_LIMIT,
				Data: &compactorv1.ErrorDetail_BacklogLimit{BacklogLimit: &compactorv1.BacklogLimit{Backlog: 0, Incoming: 200, Limit: 100}}}},
		{"a full store", &catalog.StorageFullError{Store: catalog.StoreBlobs, Code: "ENOSPC", Err: syscall.ENOSPC},
			connect.CodeResourceExhausted, &compactorv1.ErrorDetail{Reason: compactorv1.ErrorReason_ERROR_REASON_STORAGE_FULL,
				Data: &compactorv1.ErrorDetail_StorageFull{StorageFull: &compactorv1.StorageFull{Store: catalog.StoreBlobs, Code: "ENOSPC"}}}},
		{"a reused idempotency key", &catalog.KeyReuseError{CollectionID: "c", Key: "k"},
			connect.CodeInvalidArgument, &compactorv1.ErrorDetail{Reason: compactorv1.ErrorReason_ERROR_REASON_IDEMPOTENCY_KEY_REUSED}},
		{"unknown collections", &manager.NotFoundError{IDs: []string{"a", "b"}},
			connect.CodeNotFound, &compactorv1.ErrorDetail{Reason: compactorv1.ErrorReason_ERROR_REASON_COLLECTIONS_NOT_FOUND,
				Data: &compactorv1.ErrorDetail_CollectionsNotFound{CollectionsNotFound: &compactorv1.CollectionsNotFound{CollectionIds: []string{"a", "b"}, Total: 2}}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var ce *connect.Error
			if !errors.As(toConnect(context.Background(), log, "PushLogs", tt.err), &ce) || ce.Code() != tt.code {
				t.Fatalf("%v, want %v", ce, tt.code)
			}
			var got []*compactorv1.ErrorDetail
			for _, d := range ce.Details() {
				if v, err := d.Value(); err == nil {
					if ed, ok := v.(*compactorv1.ErrorDetail); ok {
						got = append(got, ed)
					}
				}
			}
			if len(got) != 1 || !proto.Equal(got[0], tt.want) {
				t.Fatalf("details %v, want exactly %v", got, tt.want)
			}
		})
	}
}

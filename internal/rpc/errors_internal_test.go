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

	"github.com/compactorhq/compactor/internal/catalog"
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

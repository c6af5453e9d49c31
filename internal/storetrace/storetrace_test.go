package storetrace_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/compactorhq/compactor/internal/segment"
	"github.com/compactorhq/compactor/internal/storetrace"
)

// blobsFake fails Put with errPut for key "bad" and answers Get with
// ErrNotExist.
type blobsFake struct{}

var errPut = errors.New("disk on fire")

func (blobsFake) Put(_ context.Context, key string, _ []byte) error {
	if key == "bad" {
		return errPut
	}
	return nil
}
func (blobsFake) Get(_ context.Context, key string) ([]byte, error) {
	return nil, fmt.Errorf("get %s: %w", key, segment.ErrNotExist)
}
func (blobsFake) Delete(context.Context, string) error                     { return nil }
func (blobsFake) List(context.Context, string) ([]segment.BlobInfo, error) { return nil, nil }

func TestBlobCallsAreSpansUnderARecordingSpanOnly(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	b := storetrace.Blobs(blobsFake{})

	// No span in the context: a background call makes none.
	if err := b.Put(t.Context(), "k", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if n := len(rec.Ended()); n != 0 {
		t.Fatalf("%d spans without a parent, want none", n)
	}

	ctx, parent := tp.Tracer("test").Start(t.Context(), "rpc")
	if err := b.Put(ctx, "k", []byte("abc")); err != nil {
		t.Fatal(err)
	}
	if err := b.Put(ctx, "bad", nil); !errors.Is(err, errPut) {
		t.Fatalf("Put(bad) = %v, want the store's error", err)
	}
	if _, err := b.Get(ctx, "gone"); !errors.Is(err, segment.ErrNotExist) {
		t.Fatalf("Get = %v, want ErrNotExist passed on", err)
	}
	parent.End()

	spans := rec.Ended()
	if len(spans) != 4 {
		t.Fatalf("%d spans, want 3 blob spans and the parent", len(spans))
	}
	for i, want := range []struct {
		name   string
		status codes.Code
	}{{"blob put", codes.Unset}, {"blob put", codes.Error}, {"blob get", codes.Unset}} {
		s := spans[i]
		if s.Name() != want.name || s.Status().Code != want.status || s.Parent().SpanID() != parent.SpanContext().SpanID() {
			t.Errorf("span %d: %s status %v parent %v; want %s status %v under the parent", i, s.Name(), s.Status().Code, s.Parent().SpanID(), want.name, want.status)
		}
	}
}

// Package storetrace wraps the storage boundaries, the catalog and the blob
// store, with a span per call, so that the trace of an RPC or of a job
// shows where its time went ("catalog ClaimJob", "blob put").
//
// A call makes a span only under a span that is recording (an RPC's server
// span, a job's span, or their children), from that span's own provider:
// the background loops (heartbeats, lease renewals between jobs, the
// scheduler's polling) make no root spans of their own, and without a
// tracer nothing is recorded at all. Errors mark the span failed.
package storetrace

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/compactorhq/compactor/internal/catalog"
)

// tracerName is the instrumentation scope of the spans.
const tracerName = "github.com/compactorhq/compactor/internal/storetrace"

// start starts a client span named name under the span of ctx, or returns
// ctx and nil when that span is not recording.
func start(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	parent := trace.SpanFromContext(ctx)
	if !parent.IsRecording() {
		return ctx, nil
	}
	return parent.TracerProvider().Tracer(tracerName).Start(ctx, name,
		trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
}

// end ends span (nil: none was started), marking it failed with err. A
// missing row or blob, and no job to claim, are answers, not failures.
func end(span trace.Span, err error) {
	if span == nil {
		return
	}
	if err != nil && !errors.Is(err, catalog.ErrNotFound) && !errors.Is(err, catalog.ErrNoJob) {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// call runs fn under a span named name.
func call[T any](ctx context.Context, name string, fn func(context.Context) (T, error), attrs ...attribute.KeyValue) (T, error) {
	ctx, span := start(ctx, name, attrs...)
	v, err := fn(ctx)
	end(span, err)
	return v, err
}

// call0 is call for a function with an error alone.
func call0(ctx context.Context, name string, fn func(context.Context) error, attrs ...attribute.KeyValue) error {
	ctx, span := start(ctx, name, attrs...)
	err := fn(ctx)
	end(span, err)
	return err
}

package compaction

import (
	"context"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// tracerName is the instrumentation scope of the compaction's spans.
const tracerName = "github.com/compactorhq/compactor/internal/compaction"

// startSpan starts the span of one step, a child of the span in ctx, from
// that span's own provider: the caller decides whether anything is traced
// (no span in ctx: a no-op), and this package holds no tracer or exporter.
func startSpan(ctx context.Context, name string) (context.Context, trace.Span) {
	return trace.SpanFromContext(ctx).TracerProvider().Tracer(tracerName).Start(ctx, name)
}

// endSpan ends span, marking it failed with err when set.
func endSpan(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

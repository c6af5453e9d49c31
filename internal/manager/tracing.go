package manager

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/compactorhq/compactor/internal/catalog"
)

// tracerName is the instrumentation scope of the manager's spans.
const tracerName = "github.com/compactorhq/compactor/internal/manager"

func tracerOf(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	return tp.Tracer(tracerName)
}

// traceParent is the W3C traceparent of the span in ctx ("" without a
// valid one), kept with the jobs a request queues.
func traceParent(ctx context.Context) string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ""
	}
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, c)
	return c.Get("traceparent")
}

// requestLink is the link from a job's span to the span of the request
// that queued it (traceparent as kept with the job), if there is one.
func requestLink(traceparent string) []trace.Link {
	if traceparent == "" {
		return nil
	}
	ctx := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{"traceparent": traceparent})
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return nil
	}
	return []trace.Link{{SpanContext: sc, Attributes: []attribute.KeyValue{attribute.String("compactor.link", "queued by")}}}
}

// startJobSpan starts the span of one job run: a root span (a job runs
// under the manager's context, not a request's), named "compaction job",
// with the job's identity as attributes, linked to the span of the request
// that queued it (a Compact call) when there was one. The executor's spans
// (one per phase, named as jobtype.Phase: reading log, materializing,
// writing blocks, indexing, committing; and the catalog and blob calls
// under them) and the GC after it are its children.
func (m *Manager) startJobSpan(ctx context.Context, j catalog.Job) (context.Context, trace.Span) {
	return m.tracer.Start(ctx, "compaction job", trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithLinks(requestLink(j.TraceParent)...),
		trace.WithAttributes(
			attribute.String("compactor.job.id", j.ID),
			attribute.String("compactor.collection.id", j.CollectionID),
			attribute.String("compactor.job.trigger", label(j.Trigger)),
			attribute.Int("compactor.job.attempt", j.Attempt),
		))
}

// endJobSpan records the end of the job on its span (ended by the caller).
func endJobSpan(span trace.Span, j catalog.Job, err error) {
	span.SetAttributes(
		attribute.String("compactor.job.state", label(j.State)),
		attribute.Int64("compactor.job.records_read", j.RecordsRead),
		attribute.Int64("compactor.job.bytes_written", j.BytesWritten),
		attribute.Int64("compactor.segment.version", j.VersionAfter),
	)
	if j.State == catalog.JobFailed && err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
}

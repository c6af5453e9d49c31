package manager

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
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

// startJobSpan starts the span of one job run: a root span (a job runs
// under the manager's context, not a request's), named "compaction job",
// with the job's identity as attributes. The executor's spans (read log,
// materialize, write blocks, commit) and the GC after it are its children.
func (m *Manager) startJobSpan(ctx context.Context, j catalog.Job) (context.Context, trace.Span) {
	return m.tracer.Start(ctx, "compaction job", trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindInternal),
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

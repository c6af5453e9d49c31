package server_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"connectrpc.com/connect"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	compactorv1 "github.com/compactorhq/compactor/gen/compactor/v1"
	"github.com/compactorhq/compactor/gen/compactor/v1/compactorv1connect"
	"github.com/compactorhq/compactor/internal/server"
)

// endSignal is a span processor that reports the name of every span that
// ends, so a test waits for a span instead of sleeping.
type endSignal struct{ ended chan string }

func (e endSignal) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (e endSignal) OnEnd(s sdktrace.ReadOnlySpan)                   { e.ended <- s.Name() }
func (e endSignal) Shutdown(context.Context) error                  { return nil }
func (e endSignal) ForceFlush(context.Context) error                { return nil }

func TestRPCsAndJobsProduceSpansAndJobLogsCarryTheTraceID(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	sig := endSignal{ended: make(chan string, 1000)}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithSpanProcessor(sig))
	r := startApp(t, func(c *server.Config) { c.TracerProvider = tp })

	id := r.createAndPush(t, "traced", 25)
	if j := r.compactAndWait(t, id); j.State != "SUCCEEDED" {
		t.Fatalf("compaction: %s %s", j.State, j.Error)
	}
	for name := range sig.ended { // the job span ends after its GC
		if name == "compaction job" {
			break
		}
	}

	byName := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range rec.Ended() {
		byName[s.Name()] = s
	}
	for _, name := range []string{"compactor.v1.CollectionService/CreateCollection", "compactor.v1.LogService/PushLogs"} {
		s, ok := byName[name]
		if !ok {
			t.Errorf("no span %q among %v", name, names(rec.Ended()))
			continue
		}
		if s.SpanKind().String() != "server" {
			t.Errorf("span %q kind %s, want server", name, s.SpanKind())
		}
	}
	job, ok := byName["compaction job"]
	if !ok {
		t.Fatalf("no job span among %v", names(rec.Ended()))
	}
	attrs := map[string]string{}
	for _, kv := range job.Attributes() {
		attrs[string(kv.Key)] = kv.Value.Emit()
	}
	if attrs["compactor.collection.id"] != id || attrs["compactor.job.state"] != "succeeded" || attrs["compactor.job.records_read"] != "25" {
		t.Errorf("job span attributes %v", attrs)
	}
	for _, phase := range []string{"reading log", "materializing", "writing blocks", "committing", "gc"} {
		s, ok := byName[phase]
		if !ok {
			t.Errorf("no %q span among %v", phase, names(rec.Ended()))
			continue
		}
		if s.Parent().SpanID() != job.SpanContext().SpanID() || s.SpanContext().TraceID() != job.SpanContext().TraceID() {
			t.Errorf("span %q is not a child of the job span", phase)
		}
	}

	// The job's log lines carry its trace id.
	traceID := job.SpanContext().TraceID().String()
	var found bool
	for line := range strings.SplitSeq(r.logs.String(), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) != nil || rec["msg"] != "compaction succeeded" {
			continue
		}
		found = true
		if rec["trace_id"] != traceID {
			t.Errorf("job log line %s: trace_id %v, want %s", line, rec["trace_id"], traceID)
		}
	}
	if !found {
		t.Errorf("no job log line in:\n%s", r.logs.String())
	}
}

func names(spans []sdktrace.ReadOnlySpan) []string {
	out := make([]string, len(spans))
	for i, s := range spans {
		out[i] = s.Name()
	}
	return out
}

func TestOTLPEndpointFromTheEnvironmentReceivesSpans(t *testing.T) {
	var mu sync.Mutex
	var got []*coltracepb.ExportTraceServiceRequest
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, err := io.ReadAll(req.Body)
		if req.URL.Path != "/v1/traces" || err != nil {
			http.Error(w, "unexpected", http.StatusNotFound)
			return
		}
		var m coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &m); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		got = append(got, &m)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(nil)
	}))
	defer collector.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL)
	t.Setenv("OTEL_SERVICE_NAME", "")

	r := startApp(t, nil)
	colls := compactorv1connect.NewCollectionServiceClient(r.hc, r.base)
	if _, err := colls.ListCollections(t.Context(), connect.NewRequest(&compactorv1.ListCollectionsRequest{})); err != nil {
		t.Fatal(err)
	}
	r.stop() // Close flushes the batch

	mu.Lock()
	defer mu.Unlock()
	var spans []string
	var service string
	for _, req := range got {
		for _, rs := range req.GetResourceSpans() {
			for _, kv := range rs.GetResource().GetAttributes() {
				if kv.GetKey() == "service.name" {
					service = kv.GetValue().GetStringValue()
				}
			}
			for _, ss := range rs.GetScopeSpans() {
				for _, s := range ss.GetSpans() {
					spans = append(spans, s.GetName())
				}
			}
		}
	}
	if !strings.Contains(strings.Join(spans, ","), "compactor.v1.CollectionService/ListCollections") {
		t.Errorf("collector received spans %v, want ListCollections", spans)
	}
	if service != "compactor" {
		t.Errorf("service.name %q, want compactor", service)
	}
}

func TestNoOTLPEnvironmentMeansNoExport(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "")
	r := startApp(t, nil)
	if _, err := compactorv1connect.NewCollectionServiceClient(r.hc, r.base).ListCollections(t.Context(), connect.NewRequest(&compactorv1.ListCollectionsRequest{})); err != nil {
		t.Fatal(err)
	}
	r.stop()
	if strings.Contains(r.logs.String(), "exporting traces") {
		t.Errorf("an exporter started without OTEL_EXPORTER_OTLP_*: %s", r.logs.String())
	}
}

func TestAnOTLPProtocolOtherThanHTTPProtobufStopsTheStart(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4317")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
	cfg := server.DefaultConfig()
	cfg.DataDir = t.TempDir()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	app, err := server.Open(t.Context(), cfg, nil)
	if err == nil {
		_ = app.Close()
		t.Fatal("Open succeeded with OTEL_EXPORTER_OTLP_PROTOCOL=grpc")
	}
	if !strings.Contains(err.Error(), "PROTOCOL=grpc") || !strings.Contains(err.Error(), "http/protobuf") {
		t.Errorf("error %q does not name the variable and the supported protocol", err)
	}
}

// The catalog and blob calls of RPCs and jobs are spans under them, and the
// job's span links to the Compact request that queued it (its traceparent
// is kept with the job in the catalog).
func TestStorageCallsAreSpansAndAJobLinksToTheRequestThatQueuedIt(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	sig := endSignal{ended: make(chan string, 1000)}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithSpanProcessor(sig))
	r := startApp(t, func(c *server.Config) { c.TracerProvider = tp })
	id := r.createAndPush(t, "linked", 25)

	sub, _, err := r.app.Manager.Watch(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	res, err := compactorv1connect.NewCompactionServiceClient(r.hc, r.base).Compact(t.Context(),
		connect.NewRequest(&compactorv1.CompactRequest{CollectionIds: []string{id}}))
	if err != nil {
		t.Fatal(err)
	}
	jobID := res.Msg.GetJobs()[0].GetJob().GetId()
	for ev := range sub.Events() {
		if ev.Job.ID == jobID && ev.Job.State.Finished() {
			break
		}
	}
	for name := range sig.ended { // the job span ends after its GC
		if name == "compaction job" {
			break
		}
	}

	spans := rec.Ended()
	byID := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		byID[s.SpanContext().SpanID().String()] = s
	}
	// under reports whether s has an ancestor named parent.
	under := func(s sdktrace.ReadOnlySpan, parent string) bool {
		for p, ok := byID[s.Parent().SpanID().String()]; ok; p, ok = byID[p.Parent().SpanID().String()] {
			if p.Name() == parent {
				return true
			}
		}
		return false
	}
	find := func(name, parent string) sdktrace.ReadOnlySpan {
		t.Helper()
		for _, s := range spans {
			if s.Name() == name && under(s, parent) {
				return s
			}
		}
		t.Errorf("no span %q under %q among %v", name, parent, names(spans))
		return nil
	}
	find("catalog CreateCollection", "compactor.v1.CollectionService/CreateCollection")
	find("catalog AppendLog", "compactor.v1.LogService/PushLogs")
	find("catalog EnqueueJobs", "compactor.v1.CompactionService/Compact")
	find("catalog CommitCompaction", "compaction job")
	find("catalog ScanLog", "compaction job")
	find("catalog RetireVersions", "gc")
	if s := find("blob put", "compaction job"); s != nil && s.SpanKind().String() != "client" {
		t.Errorf("blob span kind %s, want client", s.SpanKind())
	}

	var req, job sdktrace.ReadOnlySpan
	for _, s := range spans {
		switch s.Name() {
		case "compactor.v1.CompactionService/Compact":
			req = s
		case "compaction job":
			job = s
		}
	}
	if req == nil || job == nil {
		t.Fatalf("no Compact or job span among %v", names(spans))
	}
	var linked bool
	for _, l := range job.Links() {
		linked = linked || l.SpanContext.SpanID() == req.SpanContext().SpanID() && l.SpanContext.TraceID() == req.SpanContext().TraceID()
	}
	if !linked {
		t.Errorf("job span links %v, want a link to the Compact span %v", job.Links(), req.SpanContext())
	}
	if job.SpanContext().TraceID() == req.SpanContext().TraceID() {
		t.Error("the job runs in the request's trace; want a trace of its own, linked")
	}

	// Outside any RPC or job (the manager's own loops), no span is made.
	for _, s := range spans {
		if s.Parent().IsValid() || s.Name() == "compaction job" || strings.Contains(s.Name(), "/") {
			continue
		}
		t.Errorf("root span %q: storage calls outside RPCs and jobs make no spans", s.Name())
	}
}

package server_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	compactorv1 "github.com/compactorhq/compactor/gen/compactor/v1"
	"github.com/compactorhq/compactor/gen/compactor/v1/compactorv1connect"
	"github.com/compactorhq/compactor/internal/manager"
	"github.com/compactorhq/compactor/internal/server"
	"github.com/compactorhq/compactor/internal/testutil"
)

// running is an App served by Run on a local port.
type running struct {
	app  *server.App
	base string // http://127.0.0.1:port
	logs *testutil.SyncBuffer
	hc   *http.Client
	stop func() // stops Run and closes the App; idempotent
}

// startApp opens and runs an App with the defaults, a temporary data
// directory and a scheduler interval of an hour (no scheduler run during a
// test), changed by mutate; the test's end stops it.
func startApp(t testing.TB, mutate func(*server.Config)) *running {
	t.Helper()
	cfg := server.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Listen = "127.0.0.1:0"
	cfg.Manager.Interval = time.Hour
	if mutate != nil {
		mutate(&cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	logs := &testutil.SyncBuffer{}
	logger := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ctx, stop := context.WithCancel(context.Background())
	app, err := server.Open(ctx, cfg, logger)
	if err != nil {
		stop()
		t.Fatalf("open: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx, ln, func(a net.Addr) { started <- a }) }()
	r := &running{app: app, logs: logs, hc: h2cClient()}
	var once sync.Once
	r.stop = func() {
		once.Do(func() {
			stop()
			if err := <-done; err != nil {
				t.Errorf("run: %v", err)
			}
			r.hc.CloseIdleConnections()
			if err := app.Close(); err != nil {
				t.Errorf("close: %v", err)
			}
		})
	}
	t.Cleanup(r.stop)
	select {
	case a := <-started:
		r.base = "http://" + a.String()
	case err := <-done:
		t.Fatalf("Run returned before serving: %v", err)
	}
	return r
}

func (r *running) get(t testing.TB, url string) (int, http.Header, string) {
	t.Helper()
	res, err := r.hc.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return res.StatusCode, res.Header, string(b)
}

// metric returns the line of one series in /metrics ("" when absent).
func (r *running) metric(t *testing.T, series string) string {
	t.Helper()
	_, _, body := r.get(t, r.base+"/metrics")
	for line := range strings.SplitSeq(body, "\n") {
		if strings.HasPrefix(line, series+" ") {
			return line
		}
	}
	return ""
}

func (r *running) createAndPush(t *testing.T, name string, n int) string {
	t.Helper()
	colls := compactorv1connect.NewCollectionServiceClient(r.hc, r.base)
	created, err := colls.CreateCollection(t.Context(), connect.NewRequest(&compactorv1.CreateCollectionRequest{Name: name, Dimension: 2}))
	if err != nil {
		t.Fatalf("create collection: %v", err)
	}
	id := created.Msg.GetCollection().GetId()
	recs := make([]*compactorv1.OperationRecord, n)
	for i := range recs {
		recs[i] = &compactorv1.OperationRecord{Op: compactorv1.Operation_OPERATION_UPSERT, Id: "r" + strings.Repeat("x", i%7) + string(rune('a'+i%26)), Embedding: []float32{1, float32(i)}}
	}
	logs := compactorv1connect.NewLogServiceClient(r.hc, r.base)
	if _, err := logs.PushLogs(t.Context(), connect.NewRequest(&compactorv1.PushLogsRequest{CollectionId: id, Records: recs})); err != nil {
		t.Fatalf("push: %v", err)
	}
	return id
}

// compactAndWait runs a one-off compaction of id and waits for its end.
func (r *running) compactAndWait(t *testing.T, id string) manager.Job {
	t.Helper()
	sub, _, err := r.app.Manager.Watch(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	enq, err := r.app.Manager.Compact(t.Context(), []string{id}, false, "test")
	if err != nil {
		t.Fatal(err)
	}
	jobID := enq[0].Job.ID
	for ev := range sub.Events() {
		if ev.Job.ID == jobID && ev.Job.State.Finished() {
			return ev.Job
		}
	}
	t.Fatalf("watch ended before job %s finished", jobID)
	return manager.Job{}
}

func TestBacklogGaugeFollowsPushesAndCommitsWithoutASchedulerRun(t *testing.T) {
	r := startApp(t, nil)
	if got := r.metric(t, "compactor_uncompacted_records"); got != "compactor_uncompacted_records 0" {
		t.Fatalf("before any push: %q", got)
	}
	a := r.createAndPush(t, "a", 30)
	r.createAndPush(t, "b", 12)
	if got := r.metric(t, "compactor_uncompacted_records"); got != "compactor_uncompacted_records 42" {
		t.Errorf("after pushes of 30 and 12 records: %q, want 42", got)
	}
	if j := r.compactAndWait(t, a); j.State != "SUCCEEDED" {
		t.Fatalf("compaction of a: %s %s", j.State, j.Error)
	}
	if got := r.metric(t, "compactor_uncompacted_records"); got != "compactor_uncompacted_records 12" {
		t.Errorf("after the compaction of a: %q, want 12", got)
	}
	if got := r.metric(t, "compactor_scheduler_runs_total"); got != "compactor_scheduler_runs_total 0" {
		t.Errorf("the scheduler ran: %q", got)
	}
}

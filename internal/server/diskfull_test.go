package server_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"

	compactorv1 "github.com/compactorhq/compactor/gen/compactor/v1"
	"github.com/compactorhq/compactor/gen/compactor/v1/compactorv1connect"
	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/catalog/catalogtest"
	"github.com/compactorhq/compactor/internal/materialize"
	"github.com/compactorhq/compactor/internal/rpc"
	"github.com/compactorhq/compactor/internal/server"
	"github.com/compactorhq/compactor/internal/testutil"
)

// running is an App served by App.Run on a loopback port.
type diskApp struct {
	app   *server.App
	base  string
	hc    *http.Client
	colls compactorv1connect.CollectionServiceClient
	logs  compactorv1connect.LogServiceClient
	jobs  compactorv1connect.CompactionServiceClient
	out   *testutil.SyncBuffer
}

func runApp(t *testing.T, configure func(*server.Config)) *diskApp {
	t.Helper()
	cfg := server.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Listen = "127.0.0.1:0"
	cfg.Manager.Interval = time.Hour // only the jobs a test asks for
	configure(&cfg)
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	out := &testutil.SyncBuffer{}
	ctx, stop := context.WithCancel(context.Background())
	app, err := server.Open(ctx, cfg, slog.New(slog.NewTextHandler(out, nil)))
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
	t.Cleanup(func() {
		stop()
		<-done
		_ = app.Close()
	})
	var base string
	select {
	case a := <-started:
		base = "http://" + a.String()
	case err := <-done:
		t.Fatalf("Run returned before serving: %v", err)
	}
	hc := &http.Client{}
	t.Cleanup(hc.CloseIdleConnections)
	return &diskApp{
		app: app, base: base, hc: hc, out: out,
		colls: compactorv1connect.NewCollectionServiceClient(hc, base),
		logs:  compactorv1connect.NewLogServiceClient(hc, base),
		jobs:  compactorv1connect.NewCompactionServiceClient(hc, base),
	}
}

// readyz returns the status and body of GET /readyz.
func (r *diskApp) readyz(t *testing.T) (int, string) {
	t.Helper()
	res, err := r.hc.Get(r.base + "/readyz")
	if err != nil {
		t.Fatalf("GET /readyz: %v", err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

func (r *diskApp) wantReady(t *testing.T, what string) {
	t.Helper()
	if code, body := r.readyz(t); code != http.StatusOK {
		t.Fatalf("%s: /readyz %d %q, want 200", what, code, body)
	}
}

func (r *diskApp) wantNotReady(t *testing.T, what, reason string) {
	t.Helper()
	code, body := r.readyz(t)
	if code != http.StatusServiceUnavailable || !strings.Contains(body, reason) || strings.Contains(body, "/") {
		t.Fatalf("%s: /readyz %d %q, want 503 saying %q (and no server path)", what, code, body, reason)
	}
}

// wantGauge checks the line `compactor_storage_full{store="<store>"} <v>`
// of /metrics.
func (r *diskApp) wantGauge(t *testing.T, store string, v int) {
	t.Helper()
	res, err := r.hc.Get(r.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	want := fmt.Sprintf("compactor_storage_full{store=%q} %d\n", store, v)
	if !strings.Contains(string(b), want) {
		t.Fatalf("/metrics lacks %q", want)
	}
}

func records(prefix string, n, dim int) []*compactorv1.OperationRecord {
	recs := make([]*compactorv1.OperationRecord, n)
	for i := range recs {
		emb := make([]float32, dim)
		for j := range emb {
			emb[j] = float32(i*dim+j) / 7
		}
		recs[i] = &compactorv1.OperationRecord{Op: compactorv1.Operation_OPERATION_ADD, Id: fmt.Sprintf("%s-%d", prefix, i), Embedding: emb}
	}
	return recs
}

// wantStorageFull checks a RESOURCE_EXHAUSTED error with the STORAGE_FULL
// ErrorInfo naming store.
func wantStorageFull(t *testing.T, what string, err error, store string) {
	t.Helper()
	var ce *connect.Error
	if !errors.As(err, &ce) || ce.Code() != connect.CodeResourceExhausted {
		t.Fatalf("%s: %v, want RESOURCE_EXHAUSTED", what, err)
	}
	if !strings.Contains(ce.Message(), "the "+store+" is out of space") || strings.Contains(ce.Message(), "/") {
		t.Fatalf("%s: message %q should say the %s is out of space, without server paths", what, ce.Message(), store)
	}
	for _, d := range ce.Details() {
		if v, derr := d.Value(); derr == nil {
			if info, ok := v.(*errdetails.ErrorInfo); ok && info.GetReason() == rpc.ReasonStorageFull && info.GetMetadata()["store"] == store {
				return
			}
		}
	}
	t.Fatalf("%s: no ErrorInfo %s for the %s in %v", what, rpc.ReasonStorageFull, store, ce.Details())
}

// TestDiskFullCatalog fills the small disk that holds the catalog (the
// data directory): pushes answer RESOURCE_EXHAUSTED naming the catalog,
// /readyz says not ready and why, deleting a collection works and frees the
// space, after which the server is ready and takes pushes. The blob store
// is elsewhere: on the full disk, the blob probe's writes (every
// --blob-probe-interval, whenever they fall in a slow run) would mark it
// full and unreachable too, and readiness would wait for it, not for the
// catalog (TestDiskFullBlobStore fills the blob store's disk).
func TestDiskFullCatalog(t *testing.T) {
	disk := catalogtest.SmallDisk(t, 16<<20)
	blobs := t.TempDir()
	r := runApp(t, func(cfg *server.Config) {
		cfg.DataDir = disk
		cfg.BlobURL = "file://" + blobs
		cfg.CatalogReserveBytes = 8 << 20
	})
	ctx := t.Context()
	r.wantReady(t, "empty disk")
	r.wantGauge(t, "catalog", 0)
	created, err := r.colls.CreateCollection(ctx, connect.NewRequest(&compactorv1.CreateCollectionRequest{Name: "victim", Dimension: 64}))
	if err != nil {
		t.Fatal(err)
	}
	id := created.Msg.GetCollection().GetId()
	// Fill through the catalog (quicker than through the API), then
	// check what a push answers.
	batch := make([]materialize.OperationRecord, 5000)
	for i := 0; ; i++ {
		if i > 10_000 {
			t.Fatal("appends never filled the disk")
		}
		for j := range batch {
			batch[j] = materialize.OperationRecord{Op: materialize.OpAdd, ID: fmt.Sprintf("%d-%d", i, j), Embedding: make([]float32, 64)}
			batch[j].Embedding[0] = float32(j)
		}
		if _, _, err := r.app.Catalog.AppendLog(ctx, id, batch, catalog.AppendLimits{}); err != nil {
			if !errors.Is(err, catalog.ErrStorageFull) {
				t.Fatalf("fill the catalog: %v", err)
			}
			break
		}
	}
	_, pushErr := r.logs.PushLogs(ctx, connect.NewRequest(&compactorv1.PushLogsRequest{CollectionId: id, Records: records("full", 5000, 64)}))
	wantStorageFull(t, "push to a full catalog", pushErr, catalog.StoreCatalog)
	catalogtest.FillDisk(t, filepath.Join(disk, "filler"))
	r.wantNotReady(t, "full disk", "the catalog database is out of space")
	r.wantGauge(t, "catalog", 1)
	_, err = r.logs.PushLogs(ctx, connect.NewRequest(&compactorv1.PushLogsRequest{CollectionId: id, Records: records("again", 2000, 64)}))
	wantStorageFull(t, "push again", err, catalog.StoreCatalog)

	if _, err := r.colls.DeleteCollection(ctx, connect.NewRequest(&compactorv1.DeleteCollectionRequest{Id: id})); err != nil {
		t.Fatalf("DeleteCollection on a full disk: %v", err)
	}
	// The delete returned the collection's pages to the volume: the
	// reserve is back and the server ready, with the filler still there.
	r.wantReady(t, "after the delete")
	r.wantGauge(t, "catalog", 0)
	again, err := r.colls.CreateCollection(ctx, connect.NewRequest(&compactorv1.CreateCollectionRequest{Name: "after", Dimension: 64}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.logs.PushLogs(ctx, connect.NewRequest(&compactorv1.PushLogsRequest{CollectionId: again.Msg.GetCollection().GetId(), Records: records("a", 100, 64)})); err != nil {
		t.Fatalf("push after recovery: %v", err)
	}
}

// waitFinished polls a job until it is finished.
func (r *diskApp) waitFinished(t *testing.T, jobID string) *compactorv1.Job {
	t.Helper()
	for {
		res, err := r.jobs.GetCompaction(t.Context(), connect.NewRequest(&compactorv1.GetCompactionRequest{JobId: jobID}))
		if err != nil {
			t.Fatal(err)
		}
		switch j := res.Msg.GetJob(); j.GetState() {
		case compactorv1.JobState_JOB_STATE_SUCCEEDED, compactorv1.JobState_JOB_STATE_FAILED, compactorv1.JobState_JOB_STATE_CANCELLED:
			return j
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (r *diskApp) compact(t *testing.T, id string) *compactorv1.Job {
	t.Helper()
	res, err := r.jobs.Compact(t.Context(), connect.NewRequest(&compactorv1.CompactRequest{CollectionIds: []string{id}}))
	if err != nil {
		t.Fatalf("compact: %v", err)
	}
	return r.waitFinished(t, res.Msg.GetJobs()[0].GetJob().GetId())
}

// TestDiskFullBlobStore fills the volume of the blob store (the catalog is
// elsewhere): a compaction fails, transiently, saying the blob store is out
// of space; /readyz says so; once space is free it is ready again and the
// compaction succeeds.
func TestDiskFullBlobStore(t *testing.T) {
	disk := catalogtest.SmallDisk(t, 4<<20)
	r := runApp(t, func(cfg *server.Config) { cfg.BlobURL = "file://" + disk })
	ctx := t.Context()
	created, err := r.colls.CreateCollection(ctx, connect.NewRequest(&compactorv1.CreateCollectionRequest{Name: "blocks", Dimension: 64}))
	if err != nil {
		t.Fatal(err)
	}
	id := created.Msg.GetCollection().GetId()
	if _, err := r.logs.PushLogs(ctx, connect.NewRequest(&compactorv1.PushLogsRequest{CollectionId: id, Records: records("r", 2000, 64)})); err != nil {
		t.Fatal(err)
	}
	filler := filepath.Join(disk, "filler")
	catalogtest.FillDisk(t, filler)

	j := r.compact(t, id)
	if j.GetState() != compactorv1.JobState_JOB_STATE_FAILED || !strings.Contains(j.GetError(), "the blob store is out of space") {
		t.Fatalf("compaction on a full blob store: %v %q, want FAILED saying the blob store is out of space", j.GetState(), j.GetError())
	}
	col, err := r.colls.GetCollection(ctx, connect.NewRequest(&compactorv1.GetCollectionRequest{Id: id}))
	if err != nil {
		t.Fatal(err)
	}
	if n := col.Msg.GetCollection().GetFailureCount(); n != 0 {
		t.Fatalf("failure count %d after a full disk, want 0 (transient: it says nothing about the collection)", n)
	}
	r.wantNotReady(t, "full blob store", "the blob store is out of space")
	r.wantGauge(t, "blobs", 1)
	r.wantGauge(t, "catalog", 0)

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	r.wantReady(t, "space freed")
	r.wantGauge(t, "blobs", 0)
	if j := r.compact(t, id); j.GetState() != compactorv1.JobState_JOB_STATE_SUCCEEDED {
		t.Fatalf("compaction after recovery: %v %q", j.GetState(), j.GetError())
	}
}

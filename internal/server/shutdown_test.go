package server_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	compactorv1 "github.com/compactorhq/compactor/gen/compactor/v1"
	"github.com/compactorhq/compactor/gen/compactor/v1/compactorv1connect"
	"github.com/compactorhq/compactor/internal/segment"
	"github.com/compactorhq/compactor/internal/server"
	"github.com/compactorhq/compactor/internal/testutil"
)

// served is an App served by Run on a local port.
type served struct {
	app  *server.App
	base string // http://host:port
	addr string
	stop context.CancelFunc // the shutdown signal
	done chan error         // Run's result
	logs *testutil.SyncBuffer
}

func serveApp(t *testing.T, configure func(*server.Config), before func(*server.App)) *served {
	t.Helper()
	cfg := server.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Listen = "127.0.0.1:0"
	cfg.Manager.Interval = time.Hour
	configure(&cfg)
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	r := &served{logs: &testutil.SyncBuffer{}, done: make(chan error, 1)}
	ctx, stop := context.WithCancel(context.Background())
	r.stop = stop
	t.Cleanup(stop)
	app, err := server.Open(ctx, cfg, slog.New(slog.NewTextHandler(r.logs, nil)))
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	// Storage closes once Run has returned: a job may still be ending
	// (its commit's last steps) after a test saw its row finished.
	finished := make(chan struct{}) // closed when Run returns
	ran := false
	t.Cleanup(func() {
		stop()
		if ran {
			select {
			case <-finished:
			case <-time.After(time.Minute): // a test that failed holding the shutdown delay
			}
		}
		_ = app.Close()
	})
	if before != nil {
		before(app)
	}
	r.app = app
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan net.Addr, 1)
	ran = true
	go func() {
		r.done <- app.Run(ctx, ln, func(a net.Addr) { started <- a })
		close(finished)
	}()
	select {
	case a := <-started:
		r.addr = a.String()
		r.base = "http://" + r.addr
	case err := <-r.done:
		t.Fatalf("Run returned before serving: %v", err)
	}
	return r
}

// readyz returns the status and body of /readyz.
func (r *served) readyz(t *testing.T) (int, string) {
	t.Helper()
	res, err := http.Get(r.base + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// switchBlobs fails every call while down is set. With hold set, the blob
// probe's own checks (the one at start, then every interval) wait in their
// Put until hold is closed, so that only the checks a test runs itself
// (probed contexts, see probe) decide the blob store's state, whenever the
// probe's goroutine gets to run.
type switchBlobs struct {
	segment.Blobs
	down atomic.Bool
	hold chan struct{}
}

var errUnreachable = errors.New("dial tcp: connection refused")

// probedKey marks the context of a probe the test runs.
type probedKey struct{}

func probed(ctx context.Context) context.Context { return context.WithValue(ctx, probedKey{}, true) }

func (s *switchBlobs) Put(ctx context.Context, key string, data []byte) error {
	if s.hold != nil && strings.HasPrefix(key, "health/") && ctx.Value(probedKey{}) == nil {
		<-s.hold
		return nil
	}
	if s.down.Load() {
		return errUnreachable
	}
	return s.Blobs.Put(ctx, key, data)
}

func (s *switchBlobs) Get(ctx context.Context, key string) ([]byte, error) {
	if s.down.Load() {
		return nil, errUnreachable
	}
	return s.Blobs.Get(ctx, key)
}

// While the blob store is unreachable (two failed probes in a row; one
// is not enough), /readyz answers 503 and the node claims no job; once it
// is back (two good probes), readiness returns and the queued job runs.
func TestUnreachableBlobStoreMakesTheNodeNotReadyAndStopsClaims(t *testing.T) {
	// The test probes: the probe's check at start would count as one of
	// the test's whenever it ran.
	blobs := &switchBlobs{hold: make(chan struct{})}
	r := serveApp(t, func(c *server.Config) {
		c.BlobProbeInterval = time.Hour
		c.Manager.PollInterval = 20 * time.Millisecond
		// One worker: once it has been refused a claim, it is not in the
		// middle of one that passed the gate before it closed.
		c.Manager.Workers = 1
		c.ShutdownDelay = 0
		c.WrapBlobs = func(b segment.Blobs) segment.Blobs { blobs.Blobs = b; return blobs }
	}, nil)
	t.Cleanup(func() { close(blobs.hold) }) // before the shutdown, which waits for the probe
	ctx := probed(t.Context())
	if code, body := r.readyz(t); code != http.StatusOK {
		t.Fatalf("readyz at start: %d %q", code, body)
	}
	colls := compactorv1connect.NewCollectionServiceClient(http.DefaultClient, r.base)
	logs := compactorv1connect.NewLogServiceClient(http.DefaultClient, r.base)
	jobs := compactorv1connect.NewCompactionServiceClient(http.DefaultClient, r.base)
	c, err := colls.CreateCollection(ctx, connect.NewRequest(&compactorv1.CreateCollectionRequest{Name: "c", Dimension: 1}))
	if err != nil {
		t.Fatal(err)
	}
	id := c.Msg.GetCollection().GetId()
	if _, err := logs.PushLogs(ctx, connect.NewRequest(&compactorv1.PushLogsRequest{CollectionId: id, Records: []*compactorv1.OperationRecord{
		{Op: compactorv1.Operation_OPERATION_ADD, Id: "a", Embedding: []float32{1}},
	}})); err != nil {
		t.Fatal(err)
	}

	// The claims the gate refuses, and those refused once the job is
	// queued (each of which would have claimed it).
	var queued atomic.Bool
	refused, refusedQueued := make(chan struct{}, 1), make(chan struct{}, 1)
	gate := r.app.ClaimGate()
	r.app.Manager.SetClaimGate(func() error {
		after := queued.Load()
		err := gate()
		if err != nil {
			ch := refused
			if after {
				ch = refusedQueued
			}
			select {
			case ch <- struct{}{}:
			default:
			}
		}
		return err
	})

	blobs.down.Store(true)
	r.app.ProbeBlobs(ctx)
	if code, body := r.readyz(t); code != http.StatusOK {
		t.Errorf("readyz after one failed probe: %d %q, want 200 (no flapping)", code, body)
	}
	r.app.ProbeBlobs(ctx)
	if code, body := r.readyz(t); code != http.StatusServiceUnavailable || !strings.Contains(body, "blob store") {
		t.Errorf("readyz after two failed probes: %d %q, want 503 naming the blob store", code, body)
	}
	<-refused // the worker has seen the gate closed
	res, err := jobs.Compact(ctx, connect.NewRequest(&compactorv1.CompactRequest{CollectionIds: []string{id}}))
	if err != nil {
		t.Fatal(err)
	}
	jobID := res.Msg.GetJobs()[0].GetJob().GetId()
	queued.Store(true)
	<-refusedQueued
	j, err := jobs.GetCompaction(ctx, connect.NewRequest(&compactorv1.GetCompactionRequest{JobId: jobID}))
	if err != nil {
		t.Fatal(err)
	}
	if st := j.Msg.GetJob().GetState(); st != compactorv1.JobState_JOB_STATE_QUEUED {
		t.Fatalf("job while the blob store is unreachable: %v, want QUEUED (not claimed)", st)
	}

	blobs.down.Store(false)
	r.app.ProbeBlobs(ctx)
	if code, _ := r.readyz(t); code != http.StatusServiceUnavailable {
		t.Errorf("readyz after one good probe: %d, want 503 until a second one", code)
	}
	r.app.ProbeBlobs(ctx)
	if code, body := r.readyz(t); code != http.StatusOK {
		t.Errorf("readyz once the blob store is back: %d %q", code, body)
	}
	for {
		j, err := jobs.GetCompaction(ctx, connect.NewRequest(&compactorv1.GetCompactionRequest{JobId: jobID}))
		if err != nil {
			t.Fatal(err)
		}
		if st := j.Msg.GetJob().GetState(); st == compactorv1.JobState_JOB_STATE_SUCCEEDED {
			break
		} else if st != compactorv1.JobState_JOB_STATE_QUEUED && st != compactorv1.JobState_JOB_STATE_RUNNING {
			t.Fatalf("job once the blob store is back: %v (%s)", st, j.Msg.GetJob().GetError())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Requests sent across the shutdown signal are all answered: readiness
// goes 503 at once while the API keeps serving for the shutdown delay (over
// HTTP/1.1 and HTTP/2, on new and reused connections); then the server
// drains: the listener closes, and a request in flight since before the
// signal still gets its answer.
func TestRequestsAcrossTheShutdownSignalAreAllAnswered(t *testing.T) {
	release := make(chan struct{})
	r := serveApp(t, func(c *server.Config) {
		c.ShutdownDelay = time.Hour // held by the test
		c.ShutdownGrace = time.Hour
	}, func(a *server.App) { a.HoldShutdownDelay(release) })

	// In flight across the whole shutdown: a body sent in two halves.
	pr, pw := io.Pipe()
	defer pw.Close()
	slow := make(chan error, 1)
	go func() {
		res, err := http.Post(r.base+compactorv1connect.CollectionServiceListCollectionsProcedure, "application/json", pr)
		if err == nil {
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode != http.StatusOK {
				err = fmt.Errorf("HTTP %d", res.StatusCode)
			}
		}
		slow <- err
	}()
	if _, err := pw.Write([]byte("{")); err != nil {
		t.Fatal(err)
	}

	clients := map[string]compactorv1connect.CollectionServiceClient{
		"connect over HTTP/1.1": compactorv1connect.NewCollectionServiceClient(&http.Client{}, r.base),
		"grpc over HTTP/2":      compactorv1connect.NewCollectionServiceClient(h2cClient(), r.base, connect.WithGRPC()),
	}
	var (
		answered atomic.Int64
		wg       sync.WaitGroup
		mu       sync.Mutex
		failures []string
	)
	stopLoad := make(chan struct{})
	for name, c := range clients {
		for range 2 {
			wg.Go(func() {
				for {
					select {
					case <-stopLoad:
						return
					default:
					}
					if _, err := c.ListCollections(context.Background(), connect.NewRequest(&compactorv1.ListCollectionsRequest{})); err != nil {
						mu.Lock()
						failures = append(failures, fmt.Sprintf("%s: %v", name, err))
						mu.Unlock()
						continue
					}
					answered.Add(1)
				}
			})
		}
	}
	waitAnswered := func(n int64) {
		for from := answered.Load(); answered.Load() < from+n; {
			time.Sleep(time.Millisecond)
		}
	}
	waitAnswered(20)
	r.stop() // the signal
	for {
		if code, _ := r.readyz(t); code == http.StatusServiceUnavailable {
			break
		}
		time.Sleep(time.Millisecond)
	}
	waitAnswered(40) // during the shutdown delay, readiness off
	close(stopLoad)
	wg.Wait()
	for _, f := range failures {
		t.Errorf("a request across the signal was not answered: %s", f)
	}

	close(release) // the delay ends: draining
	for {
		c, err := net.Dial("tcp", r.addr)
		if err != nil {
			break // the listener is closed
		}
		c.Close()
		time.Sleep(time.Millisecond)
	}
	if _, err := pw.Write([]byte("}")); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	if err := <-slow; err != nil {
		t.Errorf("the request in flight since before the signal: %v", err)
	}
	if err := <-r.done; err != nil {
		t.Errorf("Run: %v", err)
	}
	if !strings.Contains(r.logs.String(), "draining requests") {
		t.Errorf("no drain in the log:\n%s", r.logs.String())
	}
}

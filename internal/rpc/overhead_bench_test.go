package rpc_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	compactorv1 "github.com/compactorhq/compactor/gen/compactor/v1"
	"github.com/compactorhq/compactor/gen/compactor/v1/compactorv1connect"
	"github.com/compactorhq/compactor/internal/catalog/catalogtest"
	"github.com/compactorhq/compactor/internal/heapfloor"
	"github.com/compactorhq/compactor/internal/rpc"
	"github.com/compactorhq/compactor/internal/server"
)

// The RPC overhead benchmarks (docs/performance.md). Each serves the real
// handler stack exactly as `compactor serve` wires it (server.Open: the
// catalog, the manager, tracing, metrics and logging interceptors, auth,
// CORS, the body read timeout, the production http.Server over plaintext
// HTTP/2 on loopback) and, beside it, a bare connect-go handler of the same
// service that returns a fixed response (the real one, captured once) and
// compresses it as the product does (rpc.ResponseCompression). One
// client (Connect protocol, binary proto, h2c) calls both from
// benchConcurrency goroutines.
//
// Figures: calls/s of the real stack, bare-calls/s of the bare handler over
// the same number of calls, and ratio = real / bare (goal: >= 0.8).
//
//	go test -run '^$' -bench RPCOverhead -benchtime 2000x ./internal/rpc/
//	go test -run '^$' -bench CompactLoad -benchtime 3x ./internal/rpc/
//
// With COMPACTOR_TEST_POSTGRES_DSN set, each also runs on PostgreSQL.

const (
	benchConcurrency = 16
	benchCollections = 1000 // collections in the catalog (and one QUEUED job each)
	benchLoadCalls   = 1000 // concurrent Compact calls of BenchmarkCompactLoad
	benchRound       = 100  // calls of one side before the other's turn
)

// benchCatalogs are the catalogs the benchmarks run on: SQLite, and
// PostgreSQL when COMPACTOR_TEST_POSTGRES_DSN is set.
func benchCatalogs() []string {
	out := []string{"sqlite"}
	if catalogtest.PostgresBase() != "" {
		out = append(out, "postgres")
	}
	return out
}

// benchApp is a real app serving on loopback, its manager idle (jobs stay
// QUEUED), with benchCollections collections.
type benchApp struct {
	app     *server.App
	url     string
	client  *http.Client
	ids     []string // collection ids, by name
	jobs    []string // one QUEUED job per collection
	closers []func()
}

func newBenchApp(b *testing.B, kind string) *benchApp {
	b.Helper()
	cfg := server.DefaultConfig()
	cfg.DataDir = b.TempDir()
	cfg.Manager.Interval = time.Hour
	if kind == "postgres" {
		cfg.CatalogDSN = catalogtest.PostgresSchema(b, catalogtest.PostgresBase())
	}
	if err := cfg.Validate(); err != nil {
		b.Fatalf("config: %v", err)
	}
	// The production logger discards nothing at info; a failed call is
	// the only thing logged per call, and no call fails here.
	logger := slog.New(slog.NewJSONHandler(discard{}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx := context.Background()
	app, err := server.Open(ctx, cfg, logger)
	if err != nil {
		b.Fatalf("open app: %v", err)
	}
	a := &benchApp{app: app, client: h2cClient()}
	// The heap floor serve sets (the process's GOGC is restored after).
	floor := heapfloor.Start(cfg.HeapFloor())
	b.Cleanup(floor.Stop)
	b.Cleanup(func() {
		for i := len(a.closers) - 1; i >= 0; i-- {
			a.closers[i]()
		}
		_ = app.Close()
	})
	a.url = serveLoopback(b, app.Handler(), &a.closers)

	for i := range benchCollections {
		c, err := app.Catalog.CreateCollection(ctx, fmt.Sprintf("bench-%05d", i), 8)
		if err != nil {
			b.Fatalf("create collection: %v", err)
		}
		a.ids = append(a.ids, c.ID)
	}
	enq, err := app.Manager.Compact(ctx, a.ids, false, "bench")
	if err != nil {
		b.Fatalf("compact: %v", err)
	}
	for _, e := range enq {
		a.jobs = append(a.jobs, e.Job.ID)
	}
	return a
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// h2cClient is an HTTP client speaking plaintext HTTP/2, as gRPC clients do.
func h2cClient() *http.Client {
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: &http.Transport{Protocols: &p, MaxIdleConnsPerHost: benchConcurrency}}
}

// serveLoopback serves h with the production server on 127.0.0.1 and
// returns its URL.
func serveLoopback(b *testing.B, h http.Handler, closers *[]func()) string {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatalf("listen: %v", err)
	}
	srv := server.NewHTTPServer(h, slog.New(slog.DiscardHandler))
	go func() { _ = srv.Serve(ln) }()
	*closers = append(*closers, func() { _ = srv.Close() })
	return "http://" + ln.Addr().String()
}

// bareHandler is the bare connect-go handler: fixed responses.
type bareHandler struct {
	compactorv1connect.UnimplementedCompactionServiceHandler
	compactorv1connect.UnimplementedCollectionServiceHandler
	getCompaction   *compactorv1.GetCompactionResponse
	listCompactions *compactorv1.ListCompactionsResponse
	getCollection   *compactorv1.GetCollectionResponse
	listCollections *compactorv1.ListCollectionsResponse
	compact         *compactorv1.CompactResponse
}

func (h *bareHandler) GetCompaction(context.Context, *connect.Request[compactorv1.GetCompactionRequest]) (*connect.Response[compactorv1.GetCompactionResponse], error) {
	return connect.NewResponse(h.getCompaction), nil
}

func (h *bareHandler) ListCompactions(context.Context, *connect.Request[compactorv1.ListCompactionsRequest]) (*connect.Response[compactorv1.ListCompactionsResponse], error) {
	return connect.NewResponse(h.listCompactions), nil
}

func (h *bareHandler) GetCollection(context.Context, *connect.Request[compactorv1.GetCollectionRequest]) (*connect.Response[compactorv1.GetCollectionResponse], error) {
	return connect.NewResponse(h.getCollection), nil
}

func (h *bareHandler) ListCollections(context.Context, *connect.Request[compactorv1.ListCollectionsRequest]) (*connect.Response[compactorv1.ListCollectionsResponse], error) {
	return connect.NewResponse(h.listCollections), nil
}

func (h *bareHandler) Compact(context.Context, *connect.Request[compactorv1.CompactRequest]) (*connect.Response[compactorv1.CompactResponse], error) {
	return connect.NewResponse(h.compact), nil
}

// clients of one base URL.
type benchClients struct {
	jobs  compactorv1connect.CompactionServiceClient
	colls compactorv1connect.CollectionServiceClient
}

func newBenchClients(hc *http.Client, url string) benchClients {
	return benchClients{
		jobs:  compactorv1connect.NewCompactionServiceClient(hc, url),
		colls: compactorv1connect.NewCollectionServiceClient(hc, url),
	}
}

// readCalls are the read RPCs measured, each a call on one side's clients
// (i: the call's number, spreading calls over ids).
type readCall struct {
	name string
	call func(ctx context.Context, c benchClients, a *benchApp, i int) error
}

var readCalls = []readCall{
	{"GetCompaction", func(ctx context.Context, c benchClients, a *benchApp, i int) error {
		_, err := c.jobs.GetCompaction(ctx, connect.NewRequest(&compactorv1.GetCompactionRequest{JobId: a.jobs[i%len(a.jobs)]}))
		return err
	}},
	{"ListCompactions", func(ctx context.Context, c benchClients, _ *benchApp, _ int) error {
		_, err := c.jobs.ListCompactions(ctx, connect.NewRequest(&compactorv1.ListCompactionsRequest{PageSize: 20}))
		return err
	}},
	{"GetCollection", func(ctx context.Context, c benchClients, a *benchApp, i int) error {
		_, err := c.colls.GetCollection(ctx, connect.NewRequest(&compactorv1.GetCollectionRequest{Id: a.ids[i%len(a.ids)]}))
		return err
	}},
	{"ListCollections", func(ctx context.Context, c benchClients, _ *benchApp, _ int) error {
		_, err := c.colls.ListCollections(ctx, connect.NewRequest(&compactorv1.ListCollectionsRequest{PageSize: 20}))
		return err
	}},
}

// BenchmarkRPCOverhead measures the read RPCs of the real stack against a
// bare handler of the same service (see the file comment).
func BenchmarkRPCOverhead(b *testing.B) {
	for _, kind := range benchCatalogs() {
		b.Run(kind, func(b *testing.B) {
			a := newBenchApp(b, kind)
			ctx := context.Background()
			real := newBenchClients(a.client, a.url)
			bare := captureBare(b, ctx, real, a)
			mux := http.NewServeMux()
			// The bare handler compresses responses as the product does
			// (connect's default gzips every one, at a slower level).
			mux.Handle(compactorv1connect.NewCompactionServiceHandler(bare, rpc.ResponseCompression()))
			mux.Handle(compactorv1connect.NewCollectionServiceHandler(bare, rpc.ResponseCompression()))
			bareClients := newBenchClients(a.client, serveLoopback(b, mux, &a.closers))
			for _, rc := range readCalls {
				b.Run(rc.name, func(b *testing.B) {
					// Warm both (connections, pools, caches).
					runCalls(b, benchConcurrency*4, func(i int) error { return rc.call(ctx, real, a, i) })
					runCalls(b, benchConcurrency*4, func(i int) error { return rc.call(ctx, bareClients, a, i) })
					// Interleaved in rounds, so that the load of a shared
					// machine weighs on both sides alike.
					b.ResetTimer()
					b.StopTimer()
					var bareTime, realTime time.Duration
					for done := 0; done < b.N; done += benchRound {
						n := min(benchRound, b.N-done)
						bareTime += runCalls(b, n, func(i int) error { return rc.call(ctx, bareClients, a, done+i) })
						b.StartTimer()
						realTime += runCalls(b, n, func(i int) error { return rc.call(ctx, real, a, done+i) })
						b.StopTimer()
					}
					realRate := float64(b.N) / realTime.Seconds()
					bareRate := float64(b.N) / bareTime.Seconds()
					b.ReportMetric(realRate, "calls/s")
					b.ReportMetric(bareRate, "bare-calls/s")
					b.ReportMetric(realRate/bareRate, "ratio")
				})
			}
		})
	}
}

// captureBare makes the bare handler's fixed responses: the real ones.
func captureBare(b *testing.B, ctx context.Context, c benchClients, a *benchApp) *bareHandler {
	b.Helper()
	h := &bareHandler{}
	gc, err := c.jobs.GetCompaction(ctx, connect.NewRequest(&compactorv1.GetCompactionRequest{JobId: a.jobs[0]}))
	if err != nil {
		b.Fatalf("GetCompaction: %v", err)
	}
	lc, err := c.jobs.ListCompactions(ctx, connect.NewRequest(&compactorv1.ListCompactionsRequest{PageSize: 20}))
	if err != nil {
		b.Fatalf("ListCompactions: %v", err)
	}
	gl, err := c.colls.GetCollection(ctx, connect.NewRequest(&compactorv1.GetCollectionRequest{Id: a.ids[0]}))
	if err != nil {
		b.Fatalf("GetCollection: %v", err)
	}
	ll, err := c.colls.ListCollections(ctx, connect.NewRequest(&compactorv1.ListCollectionsRequest{PageSize: 20}))
	if err != nil {
		b.Fatalf("ListCollections: %v", err)
	}
	cp, err := c.jobs.Compact(ctx, connect.NewRequest(&compactorv1.CompactRequest{CollectionIds: a.ids[:1]}))
	if err != nil {
		b.Fatalf("Compact: %v", err)
	}
	if gc.Msg.GetJob().GetCollectionName() == "" || len(lc.Msg.GetJobs()) != 20 || len(ll.Msg.GetCollections()) != 20 {
		b.Fatalf("unexpected responses: job %v, %d jobs, %d collections", gc.Msg.GetJob(), len(lc.Msg.GetJobs()), len(ll.Msg.GetCollections()))
	}
	h.getCompaction, h.listCompactions, h.getCollection, h.listCollections, h.compact = gc.Msg, lc.Msg, gl.Msg, ll.Msg, cp.Msg
	return h
}

// runCalls makes n calls of call from benchConcurrency goroutines and
// returns the wall time they took. A failed call fails the benchmark.
func runCalls(b *testing.B, n int, call func(i int) error) time.Duration {
	b.Helper()
	var (
		next  atomic.Int64
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	start := time.Now()
	for range benchConcurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := call(i); err != nil {
					mu.Lock()
					first = cmpErr(first, err)
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	d := time.Since(start)
	if first != nil {
		b.Fatalf("call failed: %v", first)
	}
	return d
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// BenchmarkCompactLoad fires benchLoadCalls concurrent Compact calls, one
// per collection, each creating a QUEUED job (the jobs of the previous round
// are cancelled with the timer stopped), and reports the latency
// percentiles of one round: p50-ms, p99-ms, max-ms (goal: p99 < 500 ms).
func BenchmarkCompactLoad(b *testing.B) {
	for _, kind := range benchCatalogs() {
		b.Run(kind, func(b *testing.B) {
			a := newBenchApp(b, kind)
			ctx := context.Background()
			c := newBenchClients(a.client, a.url)
			var lat []time.Duration
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				for _, id := range a.jobs {
					if _, err := a.app.Catalog.CancelJob(ctx, id, "bench"); err != nil {
						b.Fatalf("cancel job %s: %v", id, err)
					}
				}
				a.jobs = a.jobs[:0]
				var (
					mu    sync.Mutex
					wg    sync.WaitGroup
					first error
					gate  = make(chan struct{})
				)
				round := make([]time.Duration, benchLoadCalls)
				for i := range benchLoadCalls {
					wg.Add(1)
					go func() {
						defer wg.Done()
						<-gate
						t0 := time.Now()
						res, err := c.jobs.Compact(ctx, connect.NewRequest(&compactorv1.CompactRequest{CollectionIds: []string{a.ids[i%len(a.ids)]}, Reason: "load"}))
						round[i] = time.Since(t0)
						mu.Lock()
						defer mu.Unlock()
						if err != nil {
							first = cmpErr(first, err)
							return
						}
						a.jobs = append(a.jobs, res.Msg.GetJobs()[0].GetJob().GetId())
					}()
				}
				runtime.Gosched()
				b.StartTimer()
				close(gate)
				wg.Wait()
				b.StopTimer()
				if first != nil {
					b.Fatalf("Compact: %v", first)
				}
				lat = append(lat, round...)
			}
			slices.Sort(lat)
			pct := func(p float64) float64 {
				return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))]) / float64(time.Millisecond)
			}
			b.ReportMetric(pct(0.50), "p50-ms")
			b.ReportMetric(pct(0.99), "p99-ms")
			b.ReportMetric(pct(1), "max-ms")
			b.ReportMetric(float64(benchLoadCalls*b.N)/b.Elapsed().Seconds(), "calls/s")
		})
	}
}

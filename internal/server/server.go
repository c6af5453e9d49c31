// Package server wires the compactor's parts into one process: catalog, blob
// store, segment store, compactor, manager, the Connect API, the status page,
// health, readiness and metrics, all on one port (plaintext HTTP/1.1 and
// HTTP/2, so gRPC, gRPC-Web and Connect clients share it).
package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/pflag"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"golang.org/x/sync/errgroup"

	"github.com/compactorhq/compactor/internal/auth"
	"github.com/compactorhq/compactor/internal/buildinfo"
	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/clock"
	"github.com/compactorhq/compactor/internal/compaction"
	"github.com/compactorhq/compactor/internal/flagcheck"
	"github.com/compactorhq/compactor/internal/jobtype"
	"github.com/compactorhq/compactor/internal/manager"
	"github.com/compactorhq/compactor/internal/rpc"
	"github.com/compactorhq/compactor/internal/segment"
	"github.com/compactorhq/compactor/internal/storetrace"
	"github.com/compactorhq/compactor/web"
)

// Config is the configuration of `compactor serve`.
type Config struct {
	Listen          string // host:port
	DataDir         string // holds catalog.db and, by default, the blobs
	CatalogDSN      string // --catalog: a SQLite file (default <data-dir>/catalog.db) or a postgres:// URL
	BlobURL         string // default file://<data-dir>/blobs
	TLSCert         string // PEM certificate (chain) file; with TLSKey, serve HTTPS
	TLSKey          string // PEM private key file
	Token           string
	TokenFile       string
	TokensFile      string // --tokens-file: named credentials with roles (package auth), reread on SIGHUP
	ProtectReads    bool
	MaxBacklog      int64 // records per collection before PushLogs is refused
	MaxRequestBytes int
	// MaxInFlightRequestBytes bounds the bytes of request bodies held by
	// all requests being served at once (--max-inflight-request-bytes);
	// 0: derived from the memory the process is given (see
	// InFlightRequestBytes).
	MaxInFlightRequestBytes int64
	// GCMinHeapBytes is the floor of the Go collector's heap goal
	// (--gc-min-heap-bytes, package heapfloor); 0: GOGC alone.
	GCMinHeapBytes int64
	// MaxWatchers bounds the WatchCompactions streams open at once.
	MaxWatchers int
	// ReadTimeout bounds the time to receive a request body (every request
	// with a body except streams).
	ReadTimeout   time.Duration
	ShutdownGrace time.Duration // for in-flight HTTP requests and streams, after ShutdownDelay
	// ShutdownDelay is how long the server goes on serving after a
	// shutdown signal with readiness off, so that load balancers stop
	// sending before it drains (--shutdown-delay).
	ShutdownDelay time.Duration
	// BlobProbeInterval is the period of the blob store probe behind
	// readiness and claims (--blob-probe-interval).
	BlobProbeInterval time.Duration
	Segment           segment.Config
	Compaction        compaction.Config
	Manager           manager.Config
	// Scrub is the background scrub's (--scrub-interval,
	// --scrub-max-throughput).
	Scrub ScrubConfig
	// Web holds the status page's own settings (refresh, trusted origins);
	// its token and read protection come from Token and ProtectReads.
	Web web.Config

	// PushKeyWindow is how long PushLogs idempotency keys are kept.
	PushKeyWindow time.Duration
	// CatalogReserveBytes is the SQLite catalog's space reserve (docs/storage.md
	// "Disk full"); 0: none.
	CatalogReserveBytes int64
	// CORSOrigins may call the API from browsers (--cors-origin); empty:
	// no CORS headers.
	CORSOrigins []string
	// DebugListen is the address of the pprof listener (--debug-listen);
	// empty: none.
	DebugListen string
	// WrapBlobs, when set, wraps the blob store (fault injection in tests).
	WrapBlobs func(segment.Blobs) segment.Blobs
	// TracerProvider, when set, receives the spans of RPCs and jobs
	// instead of the OTLP exporter the OTEL_* environment configures.
	TracerProvider trace.TracerProvider
}

// DefaultConfig returns the defaults of every setting.
func DefaultConfig() Config {
	return Config{
		Listen:          "127.0.0.1:7070",
		DataDir:         "./data",
		MaxBacklog:      1_000_000,
		MaxRequestBytes: 64 << 20,
		// A paged read of the log from a 7 MB live heap ran 53
		// collections at GOGC alone (docs/performance.md).
		GCMinHeapBytes: 64 << 20,
		MaxWatchers:    rpc.DefaultMaxWatchers,
		ReadTimeout:    rpc.DefaultReadTimeout,
		ShutdownGrace:  10 * time.Second,
		// Kubernetes endpoints and most load balancers see a failed
		// readiness check within a few seconds.
		ShutdownDelay:     5 * time.Second,
		BlobProbeInterval: 10 * time.Second,
		Segment:           segment.DefaultConfig(),
		Compaction:        compaction.DefaultConfig(),
		Manager:           manager.DefaultConfig(),
		Scrub:             DefaultScrubConfig(),

		PushKeyWindow: 24 * time.Hour,
		// Room for deleting a collection on a full disk; tiny next to a
		// volume that holds collections.
		CatalogReserveBytes: 64 << 20,
	}
}

// RegisterFlags registers every serve flag on fs.
func (c *Config) RegisterFlags(fs *pflag.FlagSet) {
	fs.StringVar(&c.Listen, "listen", c.Listen, "address to serve the API, page and metrics on (host:port)")
	fs.StringVar(&c.DataDir, "data-dir", c.DataDir, "directory of the embedded catalog and blob store")
	fs.StringVar(&c.CatalogDSN, "catalog", c.CatalogDSN, "catalog database: a SQLite file, or a PostgreSQL URL postgres://user@host:5432/db?sslmode=... (default <data-dir>/catalog.db)")
	fs.StringVar(&c.BlobURL, "blob-url", c.BlobURL, "blob store URL: file:///dir, mem://, s3://bucket?region=...&endpoint=... (default file://<data-dir>/blobs)")
	fs.StringVar(&c.TLSCert, "tls-cert", c.TLSCert, "PEM certificate file: serve HTTPS (HTTP/2 over TLS) instead of plaintext; needs --tls-key")
	fs.StringVar(&c.TLSKey, "tls-key", c.TLSKey, "PEM private key file of --tls-cert")
	fs.StringVar(&c.Token, "token", c.Token, "bearer token required by mutating calls and page actions (empty: none)")
	fs.StringVar(&c.TokenFile, "token-file", c.TokenFile, "file holding the bearer token (instead of --token)")
	fs.StringVar(&c.TokensFile, "tokens-file", c.TokensFile, "file of named credentials, one \"name role sha256-hex-of-token\" per line (roles: reader, writer, operator, admin); reread on SIGHUP")
	fs.BoolVar(&c.ProtectReads, "protect-reads", c.ProtectReads, "require a token (any role) for reads and pages too")
	fs.Int64Var(&c.MaxBacklog, "max-backlog", c.MaxBacklog, "uncompacted records per collection at which pushes are refused (RESOURCE_EXHAUSTED)")
	fs.DurationVar(&c.PushKeyWindow, "push-key-window", c.PushKeyWindow, "how long PushLogs idempotency keys are kept: a retry with the same key within it writes nothing")
	fs.Int64Var(&c.CatalogReserveBytes, "catalog-reserve-bytes", c.CatalogReserveBytes, "bytes of the SQLite catalog's space reserve file, released to delete collections when the disk is full (0: none)")
	fs.IntVar(&c.MaxRequestBytes, "max-request-bytes", c.MaxRequestBytes, "largest accepted request message, bytes (after decompression)")
	fs.Int64Var(&c.MaxInFlightRequestBytes, "max-inflight-request-bytes", c.MaxInFlightRequestBytes, "bytes of request bodies all requests being served may hold together; beyond it requests are refused (RESOURCE_EXHAUSTED). 0: a quarter of the process's memory limit (GOMEMLIMIT, set from the container's limit) or else of the machine's memory, at least one --max-request-bytes")
	fs.Int64Var(&c.GCMinHeapBytes, "gc-min-heap-bytes", c.GCMinHeapBytes, "floor of the Go collector's heap goal, bytes: while the live heap is under half of it the collector runs once per this many bytes allocated instead of once per live heap (GOGC raised, never lowered); at most a quarter of the memory limit (GOMEMLIMIT, set from the container's limit) or else of the machine's memory; 0: GOGC alone")
	fs.IntVar(&c.MaxWatchers, "max-watchers", c.MaxWatchers, "most WatchCompactions streams open at once; more are refused (RESOURCE_EXHAUSTED)")
	fs.DurationVar(&c.ReadTimeout, "request-read-timeout", c.ReadTimeout, "time a client has to send a request body (unary calls and page forms; streams excepted)")
	fs.DurationVar(&c.ShutdownDelay, "shutdown-delay", c.ShutdownDelay, "time the server keeps serving after SIGTERM with /readyz answering 503, so that load balancers stop sending, before it drains (0: drain at once)")
	fs.DurationVar(&c.ShutdownGrace, "shutdown-grace", c.ShutdownGrace, "time in-flight requests and streams get to finish once draining starts; then connections are closed")
	fs.DurationVar(&c.BlobProbeInterval, "blob-probe-interval", c.BlobProbeInterval, "period of the blob store probe (a small write): two failures in a row make /readyz answer 503 and stop job claims until two succeed")
	c.Segment.RegisterFlags(fs)
	c.Compaction.RegisterFlags(fs)
	c.Manager.RegisterFlags(fs)
	c.Scrub.RegisterFlags(fs)
	c.Web.RegisterFlags(fs)
	c.registerObservabilityFlags(fs)
}

// Validate checks the configuration and fills the derived defaults (catalog
// path, blob URL). It reads no file: Open reads the token file and loads the
// TLS key pair, once. Errors name the flag.
func (c *Config) Validate() error {
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return fmt.Errorf("--listen %q: %w", c.Listen, err)
	}
	if c.DataDir == "" {
		return errors.New("--data-dir must not be empty")
	}
	if c.CatalogDSN == "" {
		c.CatalogDSN = filepath.Join(c.DataDir, "catalog.db")
	}
	if _, err := catalog.ParseLocation(c.CatalogDSN); err != nil {
		return fmt.Errorf("--catalog %q: %w", catalog.RedactLocation(c.CatalogDSN), err)
	}
	if c.BlobURL == "" {
		abs, err := filepath.Abs(filepath.Join(c.DataDir, "blobs"))
		if err != nil {
			return fmt.Errorf("--data-dir %q: %w", c.DataDir, err)
		}
		c.BlobURL = "file://" + filepath.ToSlash(abs)
	}
	if u, err := url.Parse(c.BlobURL); err != nil || u.Scheme == "" {
		return fmt.Errorf("--blob-url %q: want a URL such as file:///var/lib/compactor/blobs, mem:// or s3://bucket", c.BlobURL)
	}
	if c.TokenFile != "" && c.Token != "" {
		return errors.New("give --token or --token-file, not both")
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		return errors.New("give both --tls-cert and --tls-key, or neither")
	}
	if c.ProtectReads && c.Token == "" && c.TokenFile == "" && c.TokensFile == "" {
		return errors.New("--protect-reads needs --tokens-file, --token or --token-file")
	}
	if err := flagcheck.First(
		flagcheck.Positive("--max-backlog", c.MaxBacklog),
		flagcheck.Positive("--push-key-window", c.PushKeyWindow),
		flagcheck.NotNegative("--catalog-reserve-bytes", c.CatalogReserveBytes),
		flagcheck.Positive("--max-request-bytes", c.MaxRequestBytes),
		flagcheck.That(c.MaxInFlightRequestBytes >= 0,
			"--max-inflight-request-bytes must not be negative (0: derived from memory), got %d", c.MaxInFlightRequestBytes),
		flagcheck.NotNegative("--gc-min-heap-bytes", c.GCMinHeapBytes),
		flagcheck.Positive("--max-watchers", c.MaxWatchers),
		flagcheck.Positive("--request-read-timeout", c.ReadTimeout),
		flagcheck.NotNegative("--shutdown-grace", c.ShutdownGrace),
		flagcheck.NotNegative("--shutdown-delay", c.ShutdownDelay),
		flagcheck.Positive("--blob-probe-interval", c.BlobProbeInterval),
	); err != nil {
		return err
	}
	if err := c.Segment.Validate(); err != nil {
		return err
	}
	if err := c.validateObservability(); err != nil {
		return err
	}
	if err := c.Compaction.Validate(); err != nil {
		return err
	}
	// The manager's writes at the end of a job may wait behind a commit.
	c.Manager.PersistTimeout = c.Compaction.CommitTimeout
	if err := c.Scrub.Validate(); err != nil {
		return err
	}
	if err := c.Manager.Validate(); err != nil {
		return err
	}
	// The page's token and read protection are set by Open (the token may
	// come from its file); --protect-reads is checked above.
	return c.Web.Validate()
}

// loadSecrets reads what the configuration names by file, once: the token
// of --token-file (else --token) and the TLS key pair. Errors name the flag.
func (c Config) loadSecrets() (token string, cert *tls.Certificate, err error) {
	token = c.Token
	if c.TokenFile != "" {
		b, err := os.ReadFile(c.TokenFile)
		if err != nil {
			return "", nil, fmt.Errorf("--token-file: %w", err)
		}
		if token = strings.TrimSpace(string(b)); token == "" {
			return "", nil, fmt.Errorf("--token-file %s is empty", c.TokenFile)
		}
	}
	if c.TLSCert != "" {
		pair, err := tls.LoadX509KeyPair(c.TLSCert, c.TLSKey)
		if err != nil {
			return "", nil, fmt.Errorf("--tls-cert %s / --tls-key %s: %w", c.TLSCert, c.TLSKey, err)
		}
		cert = &pair
	}
	return token, cert, nil
}

// App is one wired compactor process.
type App struct {
	Catalog   *catalog.Catalog
	Segments  *segment.Store
	Compactor *compaction.Compactor
	Manager   *manager.Manager
	// Deleter deletes collections (the one home of that use case, for the
	// API and any other surface).
	Deleter  *manager.Deleter
	Service  *rpc.Service
	Registry *prometheus.Registry
	// Auth holds the credentials in force, for the API and the page;
	// ReloadCredentials replaces them.
	Auth     *auth.Authenticator
	cfg      Config
	log      *slog.Logger
	mux      *http.ServeMux
	health   *grpchealth.StaticChecker
	ready    atomic.Bool
	closers  []func() error
	blobs    *spaceBlobs
	throttle *segment.Throttle // the cap on this node's compaction writes
	// clock is the process's one clock (Config.Manager.Clock, else the
	// system's), given to every part: the catalog's rows, the manifests,
	// the manager's jobs, the scrub, the probe and the page's freshness.
	clock   clock.Clock
	tracing tracing
	debug   atomic.Pointer[net.Addr] // bound address of the pprof listener
	cert    *tls.Certificate         // the TLS key pair, loaded once by Open; nil: plaintext
	backlog *backlogSampler
	bodies  *rpc.BodyLimiter // bounds request bodies, of the API and the page
	probe   *blobProbe       // the blob store's reachability, for readiness and claims
	// draining is set when shutdown starts: readiness off, no more claims.
	draining atomic.Bool
	// after waits the shutdown delay (time.After; tests hold it).
	after   func(time.Duration) <-chan time.Time
	done    chan struct{} // closed when shutdown starts: ends the page's event streams
	stopped sync.Once

	authSource auth.Source // where the credentials come from, for reloads
}

// Open reads the token file and the TLS key pair, opens storage and builds
// every part. cfg must have passed Validate.
// The caller runs it with Run (or serves Handler itself and runs the
// manager) and releases it with Close.
func Open(ctx context.Context, cfg Config, logger *slog.Logger) (_ *App, err error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	token, cert, err := cfg.loadSecrets()
	if err != nil {
		return nil, err
	}
	authSource := auth.Source{Token: token, TokenFile: cfg.TokenFile, TokensFile: cfg.TokensFile}
	creds, err := authSource.Load()
	if err != nil {
		return nil, err
	}
	cfg.Token, cfg.TokenFile = token, ""
	a := &App{cfg: cfg, log: logger, mux: http.NewServeMux(), Registry: prometheus.NewRegistry(), done: make(chan struct{}), cert: cert, after: time.After,
		Auth: auth.NewAuthenticator(creds), authSource: authSource, clock: cfg.Manager.Clock}
	if a.clock == nil {
		a.clock = clock.System()
	}
	cfg.Manager.Clock = a.clock
	defer func() {
		if err != nil {
			_ = a.Close()
		}
	}()
	a.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), buildInfo())

	a.tracing, err = newTracing(ctx, cfg.TracerProvider, logger)
	if err != nil {
		return nil, err
	}
	a.closers = append(a.closers, func() error { return a.tracing.shutdown(context.Background()) })
	cfg.Manager.TracerProvider = a.tracing.provider

	if err := os.MkdirAll(cfg.DataDir, 0o750); err != nil {
		return nil, fmt.Errorf("create data directory: %w", err)
	}
	where := catalog.RedactLocation(cfg.CatalogDSN)
	driver, err := catalog.ParseLocation(cfg.CatalogDSN)
	if err != nil {
		return nil, fmt.Errorf("--catalog %s: %w", where, err)
	}
	// Exclusive: a second serve on one SQLite file is refused; replicas
	// share a PostgreSQL catalog.
	a.Catalog, err = catalog.Open(ctx, catalog.Config{
		Driver: driver, DSN: cfg.CatalogDSN, Exclusive: true, Holder: holder(cfg), Clock: a.clock,
		ReserveBytes: cfg.CatalogReserveBytes, Logger: logger.With("component", "catalog"),
		PriorityAging: cfg.Manager.PriorityAging,
	})
	if err != nil {
		return nil, fmt.Errorf("--catalog %s: %w", where, err)
	}
	a.closers = append(a.closers, a.Catalog.Close)
	blobs, closer, err := segment.OpenBucket(ctx, cfg.BlobURL)
	if err != nil {
		return nil, fmt.Errorf("--blob-url %s: %w", cfg.BlobURL, err)
	}
	a.closers = append(a.closers, closer.Close)
	if cfg.WrapBlobs != nil {
		blobs = cfg.WrapBlobs(blobs)
	}
	a.blobs = &spaceBlobs{Blobs: blobs, log: logger.With("component", "blobs")}
	// Compactions' writes pass the node's throughput cap (--max-throughput,
	// or the run-time override the manager applies).
	throttle := segment.NewThrottle(cfg.Manager.MaxThroughput)
	a.throttle = throttle
	// Each blob call and each catalog call made under an RPC's or a job's
	// span gets a span of its own (internal/storetrace); blob spans include
	// the time a Put waited for the throughput cap.
	a.Segments = segment.NewStore(compaction.CountBlobs(storetrace.Blobs(throttle.Wrap(a.blobs))), cfg.Segment, a.clock.Now, segment.WithRegisterer(a.Registry))
	traced := storetrace.NewCatalog(a.Catalog)
	storageFullGauge(a.Registry, map[string]func(context.Context) error{"catalog": a.Catalog.Writable, "blobs": a.blobs.writable})
	a.Compactor, err = compaction.New(traced, a.Segments, cfg.Compaction, logger.With("component", "compaction"), compaction.WithRegisterer(a.Registry))
	if err != nil {
		return nil, err
	}
	// Log purges still running stop at their next chunk and return before
	// the catalog closes (a purge cut short is harmless: the collection's
	// next one removes the rows).
	a.closers = append(a.closers, func() error { a.Compactor.StopPurges(); a.Compactor.WaitPurges(); return nil })
	mcfg := cfg.Manager
	if mcfg.Address == "" {
		mcfg.Address = cfg.Listen
	}
	if mcfg.Version == "" {
		mcfg.Version = buildinfo.Get().Version
	}
	exec := executor{c: a.Compactor, throttle: throttle, collections: a.Catalog}
	a.Manager, err = manager.New(traced, exec, mcfg, a.Registry, logger.With("component", "manager"),
		manager.WithExecutor(jobtype.KindIndexRebuild, rebuildExecutor{exec}),
		manager.WithExecutor(jobtype.KindVerify, verifyExecutor{exec, segment.NewThrottle(cfg.Scrub.MaxThroughput)}))
	if err != nil {
		return nil, err
	}
	a.probe = newBlobProbe(a.blobs, a.Manager.Node(), a.clock.Now, logger.With("component", "blobs"))
	a.Manager.SetClaimGate(a.claimGate)
	a.Deleter = manager.NewDeleter(a.Manager, collectionStorage{c: a.Compactor, blobDir: fileBlobDir(cfg.BlobURL), log: logger.With("component", "storage")})
	recs := records{Compactor: a.Compactor, del: a.Deleter, mgr: a.Manager, log: logger.With("component", "rpc")}
	a.Service = rpc.NewService(a.Manager, a.Manager, pushNotifier{traced, a.Manager, logger.With("component", "rpc")}, recs,
		catalog.AppendLimits{MaxBacklog: cfg.MaxBacklog, KeyWindow: cfg.PushKeyWindow}, logger.With("component", "rpc"))
	// Without a tracer (no OTLP export configured) no span would be
	// recorded: the interceptor is left out instead of costing every call.
	var interceptors []connect.Interceptor
	if _, off := a.tracing.provider.(noop.TracerProvider); !off {
		traces, err := rpcTracing(a.tracing.provider)
		if err != nil {
			return nil, fmt.Errorf("rpc tracing: %w", err)
		}
		interceptors = append(interceptors, traces)
	}
	inFlight := InFlightRequestBytes(cfg.MaxInFlightRequestBytes, cfg.MaxRequestBytes, processMemory())
	a.bodies = rpc.NewBodyLimiter(cfg.MaxRequestBytes, inFlight, a.Registry)
	logger.Info("request bounds", "max_request_bytes", cfg.MaxRequestBytes, "max_inflight_request_bytes", a.bodies.MaxInFlightBytes())
	a.health = rpc.Mount(a.mux, a.Service, rpc.Options{
		Bodies:        a.bodies,
		Authenticator: a.Auth, ProtectReads: cfg.ProtectReads, MaxRequestBytes: cfg.MaxRequestBytes,
		MaxWatchers: cfg.MaxWatchers, Registerer: a.Registry, Logger: logger.With("component", "rpc"),
		Interceptors: interceptors, Wrap: corsWrap(cfg.CORSOrigins),
	})
	a.mux.Handle("GET /metrics", promhttp.HandlerFor(a.Registry, promhttp.HandlerOpts{Registry: a.Registry}))
	a.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	a.mux.HandleFunc("GET /readyz", a.readyz)
	if err := a.mountWeb(); err != nil {
		return nil, err
	}
	return a, nil
}

// InFlightRequestBytes returns the bound on the bytes of request bodies in
// flight: configured when positive; else a quarter of memory (the bytes the
// process is given; 0: unknown, then four largest requests), since a body
// is held two or three times over while it is decoded and applied and the
// rest of memory serves compactions and reads. Never under one largest
// request (maxRequestBytes and rpc.BodySlack).
func InFlightRequestBytes(configured int64, maxRequestBytes int, memory int64) int64 {
	one := int64(maxRequestBytes) + rpc.BodySlack
	switch {
	case configured > 0:
		return max(configured, one)
	case memory > 0:
		return max(memory/4, one)
	}
	return 4 * one
}

// HeapFloor returns the floor of the collector's heap goal serve sets
// (package heapfloor), bytes: --gc-min-heap-bytes, at most a quarter of the
// memory the process is given (the Go memory limit when one is set, else
// the machine's memory: processMemory), so that the floor never brings the
// collector to its limit; 0 when the flag is 0.
func (c Config) HeapFloor() uint64 {
	floor := c.GCMinHeapBytes
	if memory := processMemory(); memory > 0 {
		floor = min(floor, memory/4)
	}
	return uint64(max(floor, 0))
}

// processMemory returns the memory the process is given, in bytes: the Go
// memory limit when one is set (GOMEMLIMIT, which serve sets from the
// container's limit), else the machine's memory; 0 when unknown.
func processMemory() int64 {
	if limit := debug.SetMemoryLimit(-1); limit > 0 && limit < math.MaxInt64 {
		return limit
	}
	if n, err := memlimit.FromSystem(); err == nil && n < math.MaxInt64 {
		return int64(n)
	}
	return 0
}

// holder describes this process in the catalog's lock, for the error a
// second serve on the same catalog gets.
func holder(cfg Config) string {
	node := cfg.Manager.Node
	if node == "" {
		node, _ = os.Hostname()
	}
	return fmt.Sprintf("node %s, pid %d, listening on %s", node, os.Getpid(), cfg.Listen)
}

// Handler serves everything of the process. Request bodies must arrive
// within ReadTimeout (streams excepted).
func (a *App) Handler() http.Handler { return rpc.BodyReadTimeout(a.mux, a.cfg.ReadTimeout) }

// claimGate is the manager's claim gate: closed at shutdown and while the
// blob store is unreachable (a job would fail on it).
func (a *App) claimGate() error {
	if a.draining.Load() {
		return errShuttingDown
	}
	return a.probe.unreachable()
}

func (a *App) readyz(w http.ResponseWriter, r *http.Request) {
	if !a.ready.Load() {
		http.Error(w, "not ready: starting or shutting down", http.StatusServiceUnavailable)
		return
	}

	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if err := a.Catalog.Ping(ctx); err != nil {
		a.log.Warn("readiness check", "err", err)
		http.Error(w, "not ready: catalog unavailable", http.StatusServiceUnavailable)
		return
	}
	// A full store stays "not ready" until space is freed (README "Disk
	// full"): the checks write only while a store is marked full.
	if err := a.Catalog.Writable(ctx); err != nil {
		a.log.Warn("readiness check", "store", catalog.StoreCatalog, "err", err)
		http.Error(w, notReady(catalog.StoreCatalog, err), http.StatusServiceUnavailable)
		return
	}
	if err := a.blobs.writable(ctx); err != nil {
		a.log.Warn("readiness check", "store", catalog.StoreBlobs, "err", err)
		http.Error(w, notReady(catalog.StoreBlobs, err), http.StatusServiceUnavailable)
		return
	}
	// The probe's last verdict: the blob store is not called here. A
	// full store is said so, as above.
	if err := a.probe.unreachable(); err != nil {
		msg := "not ready: blob store unreachable (see the server log)"
		var full *catalog.StorageFullError
		if errors.As(err, &full) {
			msg = notReady(catalog.StoreBlobs, err)
		}
		http.Error(w, msg, http.StatusServiceUnavailable)
		return
	}
	_, _ = w.Write([]byte("ok\n"))
}

// Run serves on ln (nil: listen on cfg.Listen) and runs the manager until
// ctx ends, then shuts down in order: readiness off, health NOT_SERVING and
// no more job claims; serving on for ShutdownDelay, so that load balancers
// stop sending; then draining: streams are ended, the listener closed, and
// in-flight requests get ShutdownGrace to finish (connections are closed
// after it); then the manager (running jobs finish or are cancelled), and
// storage is closed by Close. started, when set, is called with the bound address once serving.
func (a *App) Run(ctx context.Context, ln net.Listener, started func(addr net.Addr)) error {
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", a.cfg.Listen); err != nil {
			return fmt.Errorf("listen on %s: %w", a.cfg.Listen, err)
		}
	}
	srv := NewHTTPServer(a.Handler(), a.log)
	if a.cert != nil {
		srv.Protocols.SetUnencryptedHTTP2(false)
		srv.Protocols.SetHTTP2(true)
		srv.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{*a.cert}}
	}
	mgrCtx, stopMgr := context.WithCancel(context.WithoutCancel(ctx))
	defer stopMgr()
	g, gctx := errgroup.WithContext(ctx)
	mgrDone := make(chan struct{})
	g.Go(func() error {
		defer close(mgrDone)
		return a.Manager.Run(mgrCtx)
	})
	g.Go(func() error {
		a.probe.run(gctx, a.cfg.BlobProbeInterval)
		return nil
	})
	g.Go(func() error {
		select {
		case <-a.Manager.Started():
		case <-gctx.Done():
			return nil
		}
		sc := &scrubber{cat: a.Catalog, mgr: a.Manager, cfg: a.cfg.Scrub, now: a.clock.Now, log: a.log.With("component", "scrub")}
		sc.run(gctx)
		return nil
	})
	g.Go(func() error {
		a.reloadOnHangup(gctx)
		return nil
	})
	g.Go(func() error {
		var events <-chan manager.Event
		select {
		case <-a.Manager.Started():
			if sub, _, err := a.Manager.Watch(gctx); err == nil {
				events = sub.Events()
			}
		case <-gctx.Done():
			return nil
		}
		a.backlog.run(gctx, a.cfg.Manager.Interval, events, func(err error) { a.log.Warn("sample backlogs", "err", err) })
		return nil
	})
	if a.cfg.DebugListen != "" {
		dln, err := net.Listen("tcp", a.cfg.DebugListen)
		if err != nil {
			return fmt.Errorf("--debug-listen %s: %w", a.cfg.DebugListen, err)
		}
		addr := dln.Addr()
		a.debug.Store(&addr)
		dsrv := NewHTTPServer(debugHandler(), a.log)
		dsrv.Protocols = nil // HTTP/1.1, as go tool pprof speaks
		g.Go(func() error {
			if err := dsrv.Serve(dln); !errors.Is(err, http.ErrServerClosed) {
				return fmt.Errorf("serve --debug-listen: %w", err)
			}
			return nil
		})
		g.Go(func() error {
			<-gctx.Done()
			return dsrv.Close() // profiles in progress are cut
		})
		a.log.Info("serving pprof", "addr", addr.String())
	}
	g.Go(func() error {
		serve := srv.Serve
		if srv.TLSConfig != nil {
			// ServeTLS negotiates h2 and http/1.1 by ALPN.
			serve = func(ln net.Listener) error { return srv.ServeTLS(ln, "", "") }
		}
		if err := serve(ln); !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("serve: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		// The manager marks interrupted jobs before it accepts work; wait
		// for that before declaring readiness.
		select {
		case <-a.Manager.Started():
			a.ready.Store(true)
		case <-mgrDone:
		case <-gctx.Done():
		}
		if started != nil {
			started(ln.Addr())
		}
		<-gctx.Done()
		// Readiness goes first: load balancers stop sending while the
		// server still serves for the shutdown delay; then it drains.
		a.log.Info("shutting down: not ready, serving for the shutdown delay", "shutdown_delay", a.cfg.ShutdownDelay.String())
		a.ready.Store(false)
		a.draining.Store(true) // no more claims; running jobs go on
		a.health.SetStatus("", grpchealth.StatusNotServing)
		for _, s := range rpc.ServiceNames {
			a.health.SetStatus(s, grpchealth.StatusNotServing)
		}
		if a.cfg.ShutdownDelay > 0 {
			<-a.after(a.cfg.ShutdownDelay)
		}
		a.log.Info("draining requests", "shutdown_grace", a.cfg.ShutdownGrace.String())
		a.stopped.Do(func() { close(a.done) })
		a.Service.Drain() // end watch streams, or they hold Shutdown for its whole grace
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.cfg.ShutdownGrace)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			a.log.Warn("http shutdown grace expired; closing connections", "err", err)
			_ = srv.Close()
		}
		stopMgr()
		<-mgrDone
		return nil
	})
	return g.Wait()
}

// DebugAddr is the bound address of the --debug-listen listener once Run
// serves it; nil when there is none.
func (a *App) DebugAddr() net.Addr {
	if p := a.debug.Load(); p != nil {
		return *p
	}
	return nil
}

// NewHTTPServer returns the production http.Server for h: HTTP/1.1 and
// plaintext HTTP/2 (h2c) through the standard library, with header and idle
// timeouts. Streams (WatchCompactions, the page's events) have no write
// timeout.
func NewHTTPServer(h http.Handler, logger *slog.Logger) *http.Server {
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	return &http.Server{
		Handler:           h,
		Protocols:         &protocols,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    1 << 20,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
}

// Close releases storage, in reverse order of opening.
func (a *App) Close() error {
	var errs []error
	for i := len(a.closers) - 1; i >= 0; i-- {
		errs = append(errs, a.closers[i]())
	}
	a.closers = nil
	return errors.Join(errs...)
}

// buildInfo is compactor_build_info{version,revision,build_time,modified,goversion} = 1,
// from package buildinfo.
func buildInfo() prometheus.Collector {
	bi := buildinfo.Get()
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "compactor_build_info",
		Help: "Build of the running compactor; the value is always 1.",
		ConstLabels: prometheus.Labels{
			"version": bi.Version, "revision": bi.Revision, "build_time": bi.Time,
			"modified": strconv.FormatBool(bi.Modified), "goversion": bi.GoVersion,
		},
	})
	g.Set(1)
	return g
}

// TokenRequired reports whether credentials guard the API and the page
// (from --tokens-file, --token or --token-file).
func (a *App) TokenRequired() bool { return a.Auth.Enabled() }

// ReloadCredentials rereads --tokens-file (and --token-file) and puts the
// credentials in force for the API and the page; requests already
// authenticated are not affected. A file that does not parse keeps the
// credentials in force: the error (naming the file's line) is logged and
// returned. Run calls it on SIGHUP.
func (a *App) ReloadCredentials() error {
	if err := a.Auth.Reload(a.authSource); err != nil {
		a.log.Error("reload credentials: keeping the previous ones", "err", err)
		return err
	}
	a.log.Info("credentials reloaded", "credentials", a.Auth.Credentials().Len())
	return nil
}

// reloadOnHangup calls ReloadCredentials at each SIGHUP until ctx ends.
func (a *App) reloadOnHangup(ctx context.Context) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			_ = a.ReloadCredentials()
		}
	}
}

package rpc

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"connectrpc.com/grpcreflect"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"

	compactorv1 "github.com/compactorhq/compactor/gen/compactor/v1"
	"github.com/compactorhq/compactor/gen/compactor/v1/compactorv1connect"
	"github.com/compactorhq/compactor/internal/auth"
	"github.com/compactorhq/compactor/internal/metric"
)

// Options configure Mount.
type Options struct {
	// Authenticator holds the named credentials and their roles
	// (ProcedureRoles says which role each procedure needs); nil: Token
	// alone. With neither, every call is "anonymous" with role admin.
	Authenticator *auth.Authenticator
	// Token, when set and Authenticator is nil, is the single admin
	// credential.
	Token string
	// ProtectReads refuses reader procedures without a valid token too.
	ProtectReads bool
	// MaxRequestBytes bounds a request message (default 64 MiB); larger
	// ones fail with RESOURCE_EXHAUSTED.
	MaxRequestBytes int
	// MaxWatchers bounds the WatchCompactions streams open at once
	// (default DefaultMaxWatchers); beyond it a new one fails with
	// RESOURCE_EXHAUSTED.
	MaxWatchers int
	Registerer  prometheus.Registerer
	Logger      *slog.Logger
	// Interceptors run around every procedure, outside the metrics and
	// logging interceptor (tracing, so that its span covers them).
	Interceptors []connect.Interceptor
	// Bodies, when set, bounds request bodies before they are read (one
	// request's and all in flight together), inside the metrics and
	// logging of refusals; nil: only MaxRequestBytes, as connect applies
	// it.
	Bodies *BodyLimiter
	// Wrap, when set, wraps the HTTP handler of every service mounted,
	// outside authentication (CORS, so that a preflight needs no token).
	Wrap func(http.Handler) http.Handler
}

// compressMinBytes is the size under which responses go uncompressed.
const compressMinBytes = 1 << 10

// compression is the handlers' gzip: requests inflated up to
// maxRequestBytes (withLimitedGzip), responses of compressMinBytes or more
// compressed by adaptiveGzip (a small response costs more to compress than
// it saves: most reads answer with one job or collection).
func compression(maxRequestBytes int) connect.HandlerOption {
	return connect.WithHandlerOptions(withLimitedGzip(maxRequestBytes), connect.WithCompressMinBytes(compressMinBytes))
}

// mutatingProcedures returns the procedures that change state, sorted: none
// is open to the reader role (ProcedureRoles). They are read from the API's
// generated descriptors: every method of the API's services that is not
// marked idempotency_level = NO_SIDE_EFFECTS.
func mutatingProcedures() []string {
	var out []string
	for _, fd := range []protoreflect.FileDescriptor{
		compactorv1.File_compactor_v1_compaction_proto, compactorv1.File_compactor_v1_collection_proto,
		compactorv1.File_compactor_v1_log_proto, compactorv1.File_compactor_v1_control_proto,
		compactorv1.File_compactor_v1_audit_proto,
	} {
		for i := range fd.Services().Len() {
			svc := fd.Services().Get(i)
			for j := range svc.Methods().Len() {
				md := svc.Methods().Get(j)
				opts, _ := md.Options().(*descriptorpb.MethodOptions)
				if opts.GetIdempotencyLevel() != descriptorpb.MethodOptions_NO_SIDE_EFFECTS {
					out = append(out, "/"+string(svc.FullName())+"/"+string(md.Name()))
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

// ServiceNames are the fully-qualified names of the API services.
var ServiceNames = []string{
	compactorv1connect.CompactionServiceName,
	compactorv1connect.CollectionServiceName,
	compactorv1connect.LogServiceName,
	compactorv1connect.ControlServiceName,
	compactorv1connect.AuditServiceName,
}

// Mount registers the four services, gRPC health (grpc.health.v1) and gRPC
// reflection (v1 and v1alpha) on mux, and returns the health checker so the
// caller can set NOT_SERVING at shutdown.
//
// Every request is counted in compactor_rpc_requests_total and a failed one
// is logged once, including those refused before a handler runs (no token,
// over the size limit, undecodable). With ProtectReads, reflection needs
// the token too; health never does (load balancers call it).
func Mount(mux *http.ServeMux, svc *Service, opts Options) *grpchealth.StaticChecker {
	if opts.MaxRequestBytes <= 0 {
		opts.MaxRequestBytes = 64 << 20
	}
	if opts.MaxWatchers <= 0 {
		opts.MaxWatchers = DefaultMaxWatchers
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	failures := newDecodeFailures()
	obs := newObserver(opts.Registerer, logger, failures)
	handlerOpts := []connect.HandlerOption{
		connect.WithReadMaxBytes(opts.MaxRequestBytes),
		compression(opts.MaxRequestBytes),
		withCodecs(failures),
		connect.WithInterceptors(opts.Interceptors...),
		connect.WithInterceptors(obs, newWatcherLimit(opts.MaxWatchers)),
	}
	authn := opts.Authenticator
	if authn == nil {
		authn = auth.NewAuthenticator(auth.SingleToken(opts.Token))
	}
	authz := newAuthorizer(authn, opts.ProtectReads)
	outer := func(path string, h http.Handler) {
		if opts.Wrap != nil {
			h = opts.Wrap(h)
		}
		mux.Handle(path, h)
	}
	wrap := func(path string, h http.Handler) {
		h = authz.wrap(h)
		if opts.Bodies != nil {
			h = opts.Bodies.Wrap(h)
		}
		outer(path, obs.refusals(h))
	}
	wrap(compactorv1connect.NewCompactionServiceHandler(svc, handlerOpts...))
	wrap(compactorv1connect.NewCollectionServiceHandler(svc, handlerOpts...))
	wrap(compactorv1connect.NewLogServiceHandler(svc, handlerOpts...))
	wrap(compactorv1connect.NewControlServiceHandler(svc, handlerOpts...))
	wrap(compactorv1connect.NewAuditServiceHandler(svc, handlerOpts...))

	checker := grpchealth.NewStaticChecker(ServiceNames...)
	outer(grpchealth.NewHandler(checker))
	// Reflection lists the health service too, so that grpcurl and buf curl
	// can call it by name. It describes the API, so it is a read.
	reflector := grpcreflect.NewStaticReflector(append(slices.Clone(ServiceNames), grpchealth.HealthV1ServiceName)...)
	reflectOpts := []connect.HandlerOption{connect.WithReadMaxBytes(opts.MaxRequestBytes), withLimitedGzip(opts.MaxRequestBytes), connect.WithInterceptors(obs)}
	wrap(grpcreflect.NewHandlerV1(reflector, reflectOpts...))
	wrap(grpcreflect.NewHandlerV1Alpha(reflector, reflectOpts...))
	return checker
}

// observer is an interceptor that counts and times RPCs by procedure and
// code and logs failed ones, and (refusals) an HTTP middleware that does the
// same for requests refused before the interceptor runs. Procedures are the
// API's and reflection's (a bounded set); any other path is "other".
type observer struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	log      *slog.Logger
	failures *decodeFailures
	known    map[string]bool
	// series are the API procedures' ok counter and duration histogram,
	// resolved once (read-only after newObserver): a call that succeeds
	// hashes no label values.
	series map[string]procSeries
}

// procSeries is one procedure's ok counter and duration histogram.
type procSeries struct {
	ok       prometheus.Counter
	duration prometheus.Observer
}

func newObserver(reg prometheus.Registerer, log *slog.Logger, failures *decodeFailures) *observer {
	f := promauto.With(reg)
	o := &observer{
		requests: metric.CounterVec(f, "compactor_rpc_requests_total", "RPC requests, by procedure and Connect code (ok for success), including those refused before a handler ran (no token, too large, undecodable).", "procedure", "code"),
		duration: metric.HistogramVec(f, "compactor_rpc_request_duration_seconds", "Time to handle RPC requests, by procedure (streams: until they end).", prometheus.ExponentialBuckets(0.001, 4, 9), "procedure"),
		log:      log,
		failures: failures,
		known:    map[string]bool{},
		series:   map[string]procSeries{},
	}
	for _, svc := range []protoreflect.ServiceDescriptor{
		compactorv1.File_compactor_v1_compaction_proto.Services().ByName("CompactionService"),
		compactorv1.File_compactor_v1_collection_proto.Services().ByName("CollectionService"),
		compactorv1.File_compactor_v1_log_proto.Services().ByName("LogService"),
		compactorv1.File_compactor_v1_audit_proto.Services().ByName("AuditService"),
	} {
		for i := range svc.Methods().Len() {
			proc := "/" + string(svc.FullName()) + "/" + string(svc.Methods().Get(i).Name())
			o.known[proc] = true
			o.series[proc] = procSeries{ok: o.requests.WithLabelValues(proc, "ok"), duration: o.duration.WithLabelValues(proc)}
		}
	}
	for _, proc := range []string{
		"/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
		"/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
	} {
		o.known[proc] = true
	}
	return o
}

func (o *observer) observe(ctx context.Context, procedure string, start time.Time, err error) {
	if st := stateOf(ctx); st != nil {
		st.observed.Store(true)
	}
	elapsed := time.Since(start).Seconds()
	if s, ok := o.series[procedure]; ok && err == nil {
		s.ok.Inc()
		s.duration.Observe(elapsed)
		return
	}
	code := "ok"
	if err != nil {
		code = connect.CodeOf(err).String()
	}
	o.requests.WithLabelValues(procedure, code).Inc()
	o.duration.WithLabelValues(procedure).Observe(elapsed)
	if err != nil {
		var ce *connect.Error
		level := slog.LevelInfo
		if errors.As(err, &ce) && ce.Code() == connect.CodeInternal {
			level = slog.LevelWarn
		}
		args := []any{"procedure", procedure, "code", code}
		cause := err
		if st := stateOf(ctx); st != nil {
			st.mu.Lock()
			if st.cause != nil {
				// The cause toConnect kept from the client.
				cause, level = st.cause, max(level, st.causeLevel)
				args = append(args, st.causeAttrs...)
			}
			st.mu.Unlock()
		}
		o.log.Log(ctx, level, "rpc failed", append(args, "err", cause)...)
	}
}

func (o *observer) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	next = o.failures.unary(next)
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		start := time.Now()
		res, err := next(ctx, req)
		o.observe(ctx, req.Spec().Procedure, start, err)
		return res, err
	}
}

func (o *observer) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (o *observer) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		start := time.Now()
		err := next(ctx, checkedConn{StreamingHandlerConn: conn, failures: o.failures})
		o.observe(ctx, conn.Spec().Procedure, start, err)
		return err
	}
}

// callState is shared by the refusals middleware, the auth function and the
// interceptor of one request.
type callState struct {
	observed atomic.Bool // the interceptor counted the request
	authErr  error       // the authorizer refused it (UNAUTHENTICATED or PERMISSION_DENIED)

	mu sync.Mutex
	// cause is what toConnect kept from the client of a failed call, to be
	// logged once by the interceptor, at causeLevel at least, with
	// causeAttrs.
	cause      error
	causeLevel slog.Level
	causeAttrs []any
}

type callStateKey struct{}

func stateOf(ctx context.Context) *callState {
	st, _ := ctx.Value(callStateKey{}).(*callState)
	return st
}

// refusals counts and logs (once, at info) the requests to h that the
// interceptor never saw: refused by authentication, or by connect before
// the handler (over the size limit, a body that cannot be read, an
// unsupported content type). The code is read from the response.
func (o *observer) refusals(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		st := &callState{}
		rec := &responseRecorder{ResponseWriter: w, st: st}
		h.ServeHTTP(rec, r.WithContext(context.WithValue(r.Context(), callStateKey{}, st)))
		if st.observed.Load() {
			return
		}
		proc := r.URL.Path
		if !o.known[proc] {
			proc = "other"
		}
		code, msg := rec.outcome()
		if st.authErr != nil {
			code, msg = connect.CodeOf(st.authErr).String(), st.authErr.Error()
		}
		o.requests.WithLabelValues(proc, code).Inc()
		o.log.InfoContext(r.Context(), "rpc refused", "procedure", proc, "code", code, "err", truncate(msg, 4*MaxEchoBytes))
	})
}

package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"net/url"
	"os"
	"strings"
	"time"

	connectcors "connectrpc.com/cors"
	"connectrpc.com/otelconnect"
	"github.com/rs/cors"
	"github.com/spf13/pflag"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/compactorhq/compactor/internal/buildinfo"
)

// registerObservabilityFlags registers --cors-origin and --debug-listen.
func (c *Config) registerObservabilityFlags(fs *pflag.FlagSet) {
	fs.StringSliceVar(&c.CORSOrigins, "cors-origin", c.CORSOrigins,
		"origin (scheme://host[:port], a *. subdomain wildcard, or *) whose browser clients may call the API (gRPC-Web, Connect); repeatable or comma-separated (default none: no CORS)")
	fs.StringVar(&c.DebugListen, "debug-listen", c.DebugListen,
		"address (host:port) of a separate listener serving net/http/pprof under /debug/pprof/ (default off; never on --listen)")
}

// validateObservability checks --cors-origin and --debug-listen.
func (c *Config) validateObservability() error {
	for _, o := range c.CORSOrigins {
		if err := checkOrigin(o); err != nil {
			return fmt.Errorf("--cors-origin %q: %w", o, err)
		}
	}
	if c.DebugListen != "" {
		if _, _, err := net.SplitHostPort(c.DebugListen); err != nil {
			return fmt.Errorf("--debug-listen %q: %w", c.DebugListen, err)
		}
		if _, port, _ := net.SplitHostPort(c.DebugListen); c.DebugListen == c.Listen && port != "0" {
			return fmt.Errorf("--debug-listen %q must differ from --listen: profiles are never served on the API port", c.DebugListen)
		}
	}
	return nil
}

// checkOrigin accepts "*", or an origin as browsers send it: http or https,
// a host (whose first label may be "*" for any subdomain), an optional port,
// nothing else.
func checkOrigin(o string) error {
	if o == "*" {
		return nil
	}
	u, err := url.Parse(strings.Replace(o, "://*.", "://wildcard.", 1))
	switch {
	case err != nil:
		return err
	case u.Scheme != "http" && u.Scheme != "https":
		return errors.New("want http:// or https://, e.g. https://console.example.com")
	case u.Host == "" || u.Path != "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil:
		return errors.New("want scheme://host[:port] only, without path, query or trailing slash")
	}
	return nil
}

// corsWrap returns the middleware that answers CORS preflights and adds the
// CORS headers for the configured origins, with the methods and headers the
// Connect, gRPC-Web and gRPC protocols use (connectrpc.com/cors) plus
// Authorization for the bearer token. No origins: nil (no CORS headers at
// all; a preflight is refused by the handlers as before).
func corsWrap(origins []string) func(http.Handler) http.Handler {
	if len(origins) == 0 {
		return nil
	}
	c := cors.New(cors.Options{
		AllowedOrigins: origins,
		AllowedMethods: connectcors.AllowedMethods(),
		AllowedHeaders: append(connectcors.AllowedHeaders(), "Authorization"),
		ExposedHeaders: connectcors.ExposedHeaders(),
		MaxAge:         7200, // seconds a browser may cache a preflight
	})
	return c.Handler
}

// tracing is the process's trace pipeline: the provider the RPC interceptor
// and the manager use, and its shutdown (which flushes buffered spans).
type tracing struct {
	provider trace.TracerProvider
	shutdown func(context.Context) error
}

// otlpConfigured reports whether the standard OpenTelemetry environment asks
// for trace export: OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT set, and neither OTEL_SDK_DISABLED=true
// nor OTEL_TRACES_EXPORTER=none.
func otlpConfigured() bool {
	if strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") || os.Getenv("OTEL_TRACES_EXPORTER") == "none" {
		return false
	}
	return os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// newTracing returns the trace pipeline: tp when given (tests), else an
// OTLP/HTTP exporter configured by the standard OTEL_EXPORTER_OTLP_*
// variables (endpoint, headers, timeout, certificate, compression) when
// otlpConfigured, else a no-op provider (no spans are recorded).
func newTracing(ctx context.Context, tp trace.TracerProvider, logger *slog.Logger) (tracing, error) {
	nop := func(context.Context) error { return nil }
	if tp != nil {
		return tracing{provider: tp, shutdown: nop}, nil
	}
	if !otlpConfigured() {
		return tracing{provider: noop.NewTracerProvider(), shutdown: nop}, nil
	}
	// The standard default is http/protobuf; refuse another rather than
	// speak HTTP to a gRPC port.
	if p := cmp.Or(os.Getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"), os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL"), "http/protobuf"); p != "http/protobuf" {
		return tracing{}, fmt.Errorf("OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL=%s: the compactor exports traces over http/protobuf only", p)
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return tracing{}, fmt.Errorf("OTLP trace exporter (OTEL_EXPORTER_OTLP_*): %w", err)
	}
	bi := buildinfo.Get()
	// service.name "compactor" unless OTEL_SERVICE_NAME or
	// OTEL_RESOURCE_ATTRIBUTES say otherwise (later options win).
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName("compactor"), semconv.ServiceVersion(bi.Version)),
		resource.WithFromEnv(), resource.WithTelemetrySDK(), resource.WithHost(),
	)
	if err != nil {
		logger.Warn("trace resource", "err", err) // partial: still usable
	}
	sdk := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	logger.Info("exporting traces over OTLP/HTTP",
		"endpoint", cmp.Or(os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"), os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT")))
	return tracing{provider: sdk, shutdown: func(ctx context.Context) error {
		// Spans that cannot be delivered at exit are lost, not a failure
		// of the shutdown.
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := sdk.Shutdown(ctx); err != nil {
			logger.Warn("flush traces at shutdown", "err", err)
		}
		return nil
	}}, nil
}

// rpcTracing is the otelconnect interceptor: a server span per RPC (named
// after the procedure, e.g. compactor.v1.CollectionService/ListCollections)
// from tp, W3C trace context and baggage propagation, no OTel metrics (the
// Prometheus ones cover them).
func rpcTracing(tp trace.TracerProvider) (*otelconnect.Interceptor, error) {
	return otelconnect.NewInterceptor(
		otelconnect.WithTracerProvider(tp),
		otelconnect.WithPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})),
		otelconnect.WithoutMetrics(),
	)
}

// debugHandler serves net/http/pprof under /debug/pprof/, on its own mux:
// never the main one, never http.DefaultServeMux.
func debugHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

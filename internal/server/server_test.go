package server_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"

	compactorv1 "github.com/compactorhq/compactor/gen/compactor/v1"
	"github.com/compactorhq/compactor/gen/compactor/v1/compactorv1connect"
	"github.com/compactorhq/compactor/internal/rpc"
	"github.com/compactorhq/compactor/internal/server"
	"github.com/compactorhq/compactor/internal/testutil"
)

// h2cClient speaks only plaintext HTTP/2 (prior knowledge), as gRPC
// clients do.
func h2cClient() *http.Client {
	var protocols http.Protocols
	protocols.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: &http.Transport{Protocols: &protocols}}
}

// TestServePlaintextHTTP2 runs the production setup, App.Run with
// NewHTTPServer on a TCP listener, and talks to it over plaintext HTTP/2
// only: a gRPC client, the gRPC health check, the probes and the metrics;
// then it shuts down in order.
func TestServePlaintextHTTP2(t *testing.T) {
	cfg := server.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Listen = "127.0.0.1:0"
	cfg.Manager.Interval = time.Hour
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	logs := &testutil.SyncBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	app, err := server.Open(ctx, cfg, logger)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer app.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx, ln, func(a net.Addr) { started <- a }) }()
	var base string
	select {
	case a := <-started:
		base = "http://" + a.String()
	case err := <-done:
		t.Fatalf("Run returned before serving: %v", err)
	case <-nearTestDeadline(t):
		t.Fatal("Run did not start serving before the test's deadline")
	}

	hc := h2cClient()
	defer hc.CloseIdleConnections()
	colls := compactorv1connect.NewCollectionServiceClient(hc, base, connect.WithGRPC())
	created, err := colls.CreateCollection(t.Context(), connect.NewRequest(&compactorv1.CreateCollectionRequest{Name: "h2c", Dimension: 2}))
	if err != nil {
		t.Fatalf("create collection over gRPC: %v", err)
	}
	list, err := colls.ListCollections(t.Context(), connect.NewRequest(&compactorv1.ListCollectionsRequest{}))
	if err != nil {
		t.Fatalf("list collections over gRPC: %v", err)
	}
	if n := len(list.Msg.GetCollections()); n != 1 || list.Msg.GetCollections()[0].GetId() != created.Msg.GetCollection().GetId() {
		t.Errorf("ListCollections = %v, want the created collection", list.Msg.GetCollections())
	}
	_, err = colls.GetCollection(t.Context(), connect.NewRequest(&compactorv1.GetCollectionRequest{Id: "00000000-0000-4000-8000-000000000000"}))
	if connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("GetCollection of an unknown id over gRPC: %v, want NOT_FOUND", err)
	}

	health := grpchealth.NewClient(hc, base, connect.WithGRPC())
	for _, svc := range append([]string{""}, rpc.ServiceNames...) {
		res, err := health.Check(t.Context(), &grpchealth.CheckRequest{Service: svc})
		if err != nil {
			t.Fatalf("health check %q: %v", svc, err)
		}
		if res.Status != grpchealth.StatusServing {
			t.Errorf("health of %q: %v, want SERVING", svc, res.Status)
		}
	}

	get := func(path string) (int, string, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		res, err := hc.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		return res.StatusCode, res.Proto, string(b)
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		if code, proto, body := get(path); code != http.StatusOK || proto != "HTTP/2.0" {
			t.Errorf("GET %s: %d over %s (%q), want 200 over HTTP/2.0", path, code, proto, body)
		}
	}
	code, _, metrics := get("/metrics")
	if code != http.StatusOK {
		t.Fatalf("GET /metrics: %d", code)
	}
	for _, want := range []string{"compactor_build_info{", `compactor_rpc_requests_total{code="ok",procedure="/compactor.v1.CollectionService/ListCollections"} 1`, "go_goroutines"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics does not contain %q", want)
		}
	}

	// HTTP/1.1 is served on the same port too (Connect and the page).
	res, err := (&http.Client{}).Get(base + "/healthz")
	if err != nil {
		t.Fatalf("GET /healthz over HTTP/1.1: %v", err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK || res.ProtoMajor != 1 {
		t.Errorf("GET /healthz over HTTP/1.1: %d %s", res.StatusCode, res.Proto)
	}

	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-nearTestDeadline(t):
		t.Fatal("Run did not return after its context ended, by the test's deadline")
	}
	if _, err := colls.ListCollections(context.Background(), connect.NewRequest(&compactorv1.ListCollectionsRequest{})); err == nil {
		t.Error("the server still answers after Run returned")
	}
	if !strings.Contains(logs.String(), "shutting down") {
		t.Errorf("no shutdown in the log:\n%s", logs.String())
	}
}

// TestShutdownEndsWatchStreams: an open WatchCompactions ends with
// UNAVAILABLE when shutdown starts, and does not hold Run for the HTTP
// grace period (an hour here).
func TestShutdownEndsWatchStreams(t *testing.T) {
	cfg := server.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Listen = "127.0.0.1:0"
	cfg.Manager.Interval = time.Hour
	cfg.ShutdownGrace = time.Hour
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	app, err := server.Open(ctx, cfg, nil)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer app.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx, ln, func(a net.Addr) { started <- a }) }()
	var base string
	select {
	case a := <-started:
		base = "http://" + a.String()
	case err := <-done:
		t.Fatalf("Run returned before serving: %v", err)
	}
	hc := h2cClient()
	defer hc.CloseIdleConnections()
	jobs := compactorv1connect.NewCompactionServiceClient(hc, base, connect.WithGRPC())
	wctx, cancel := context.WithDeadline(t.Context(), testDeadline(t)) // bounds the test should the stream hang
	defer cancel()
	stream, err := jobs.WatchCompactions(wctx, connect.NewRequest(&compactorv1.WatchCompactionsRequest{}))
	if err != nil {
		t.Fatalf("watch: %v", err)
	}
	defer stream.Close()
	if !stream.Receive() || stream.Msg().GetType() != compactorv1.WatchEventType_WATCH_EVENT_TYPE_SNAPSHOT_COMPLETE {
		t.Fatalf("first event %v (%v), want SNAPSHOT_COMPLETE", stream.Msg(), stream.Err())
	}

	stop()
	for stream.Receive() {
		t.Errorf("event during shutdown: %v", stream.Msg())
	}
	if code := connect.CodeOf(stream.Err()); code != connect.CodeUnavailable {
		t.Errorf("watch ended with %v (%v), want UNAVAILABLE", code, stream.Err())
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-nearTestDeadline(t):
		t.Fatal("Run is still waiting for the watch stream at the test's deadline, long after shutdown began (the grace is an hour)")
	}
}

// TestValidateFillsDefaultsAndRejectsBadValues: the derived defaults and
// the errors that name the flag.
func TestValidateFillsDefaultsAndRejectsBadValues(t *testing.T) {
	cfg := server.DefaultConfig()
	cfg.DataDir = t.TempDir()
	if err := cfg.Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	if !strings.HasSuffix(cfg.CatalogDSN, "catalog.db") || !strings.HasPrefix(cfg.BlobURL, "file://") {
		t.Errorf("derived defaults: catalog %q, blobs %q", cfg.CatalogDSN, cfg.BlobURL)
	}
	for _, tc := range []struct {
		name string
		mut  func(*server.Config)
		want string
	}{
		{"a listen address without a port", func(c *server.Config) { c.Listen = "localhost" }, "--listen"},
		{"no data directory", func(c *server.Config) { c.DataDir = "" }, "--data-dir"},
		{"protect-reads without a token", func(c *server.Config) { c.ProtectReads = true }, "--protect-reads"},
		{"a token and a token file", func(c *server.Config) { c.Token, c.TokenFile = "a", "b" }, "--token"},
		{"a zero backlog limit", func(c *server.Config) { c.MaxBacklog = 0 }, "--max-backlog"},
		{"a negative request limit", func(c *server.Config) { c.MaxRequestBytes = -1 }, "--max-request-bytes"},
		{"no watchers", func(c *server.Config) { c.MaxWatchers = 0 }, "--max-watchers"},
		{"a negative heap floor", func(c *server.Config) { c.GCMinHeapBytes = -1 }, "--gc-min-heap-bytes"},
		{"no read timeout", func(c *server.Config) { c.ReadTimeout = 0 }, "--request-read-timeout"},
		{"no workers", func(c *server.Config) { c.Manager.Workers = 0 }, "workers"},
		{"a GC grace under the floor", func(c *server.Config) { c.Compaction.GCGrace = time.Millisecond }, "--gc-grace must be at least 1m0s"},
		{"a catalog URL of another database", func(c *server.Config) { c.CatalogDSN = "mysql://db/compactor" }, "--catalog"},
		{"a malformed PostgreSQL URL", func(c *server.Config) { c.CatalogDSN = "postgres://u:hunter2@db:port/c" }, "--catalog"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := server.DefaultConfig()
			cfg.DataDir = t.TempDir()
			tc.mut(&cfg)
			err := cfg.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate: %v, want an error naming %s", err, tc.want)
			}
		})
	}
}

// TestOpenReadsTheFilesValidateDoesNot: Validate reads no file; Open reads
// the token file and loads the TLS key pair, and its errors name the flag.
func TestOpenReadsTheFilesValidateDoesNot(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		mut  func(*server.Config)
		want string
	}{
		{"a missing token file", func(c *server.Config) { c.TokenFile = filepath.Join(dir, "nonexistent") }, "--token-file"},
		{"a missing TLS key pair", func(c *server.Config) {
			c.TLSCert, c.TLSKey = filepath.Join(dir, "no.crt"), filepath.Join(dir, "no.key")
		}, "--tls-cert"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := server.DefaultConfig()
			cfg.DataDir = t.TempDir()
			tc.mut(&cfg)
			if err := cfg.Validate(); err != nil {
				t.Fatalf("Validate read a file: %v", err)
			}
			app, err := server.Open(t.Context(), cfg, nil)
			if err == nil {
				app.Close()
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Open: %v, want an error naming %s", err, tc.want)
			}
		})
	}
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := server.DefaultConfig()
	cfg.DataDir, cfg.TokenFile, cfg.ProtectReads = t.TempDir(), tokenFile, true
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	app, err := server.Open(t.Context(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	if !app.TokenRequired() {
		t.Fatal("the token of --token-file is not in force")
	}
}

// TestServeTLS: with --tls-cert and --tls-key the port speaks HTTPS, and gRPC
// works over HTTP/2 negotiated by ALPN.
func TestServeTLS(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, pool := selfSigned(t, dir)
	cfg := server.DefaultConfig()
	cfg.DataDir = dir
	cfg.Listen = "127.0.0.1:0"
	cfg.Manager.Interval = time.Hour
	cfg.TLSCert, cfg.TLSKey = certFile, keyFile
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	app, err := server.Open(ctx, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	started, done := make(chan net.Addr, 1), make(chan error, 1)
	go func() { done <- app.Run(ctx, ln, func(a net.Addr) { started <- a }) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	base := "https://" + (<-started).String()
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}}
	defer hc.CloseIdleConnections()
	colls := compactorv1connect.NewCollectionServiceClient(hc, base, connect.WithGRPC())
	if _, err := colls.ListCollections(t.Context(), connect.NewRequest(&compactorv1.ListCollectionsRequest{})); err != nil {
		t.Fatalf("gRPC over TLS: %v", err)
	}
	res, err := hc.Get(base + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK || res.ProtoMajor != 2 || res.TLS == nil {
		t.Fatalf("/readyz: %s over %s, TLS %v; want 200 over HTTP/2 with TLS", res.Status, res.Proto, res.TLS != nil)
	}
	plain := &http.Client{}
	if res, err := plain.Get("http://" + strings.TrimPrefix(base, "https://") + "/readyz"); err == nil {
		res.Body.Close()
		if res.StatusCode == http.StatusOK {
			t.Fatal("plaintext HTTP was served on a TLS port")
		}
	}

	bad := server.DefaultConfig()
	bad.DataDir, bad.TLSCert = dir, certFile
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "--tls-key") {
		t.Fatalf("a certificate without a key: %v", err)
	}
}

// selfSigned writes a certificate for 127.0.0.1 and its key under dir.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "compactor test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile, pool
}

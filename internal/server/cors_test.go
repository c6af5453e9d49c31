package server_test

import (
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"

	compactorv1 "github.com/compactorhq/compactor/gen/compactor/v1"
	"github.com/compactorhq/compactor/gen/compactor/v1/compactorv1connect"
	"github.com/compactorhq/compactor/internal/server"
)

const consoleOrigin = "https://console.example.com"

// preflight sends the OPTIONS request a browser sends before a gRPC-Web
// call from origin.
func preflight(t *testing.T, r *running, origin string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodOptions, r.base+compactorv1connect.CollectionServiceListCollectionsProcedure, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Origin", origin)
	req.Header.Set("Access-Control-Request-Method", "POST")
	// Lowercase and sorted, as browsers send it (the Fetch standard).
	req.Header.Set("Access-Control-Request-Headers", "authorization,content-type,x-grpc-web,x-user-agent")
	res, err := r.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res
}

// grpcWebFrom calls ListCollections over gRPC-Web with the Origin header of
// a page served from origin, and returns the response headers.
func grpcWebFrom(t *testing.T, r *running, origin string) http.Header {
	t.Helper()
	c := compactorv1connect.NewCollectionServiceClient(r.hc, r.base, connect.WithGRPCWeb())
	req := connect.NewRequest(&compactorv1.ListCollectionsRequest{})
	req.Header().Set("Origin", origin)
	res, err := c.ListCollections(t.Context(), req)
	if err != nil {
		t.Fatalf("gRPC-Web call from %s: %v", origin, err)
	}
	return res.Header()
}

func TestCORSAnswersPreflightsAndCrossOriginCallsOfConfiguredOrigins(t *testing.T) {
	r := startApp(t, func(c *server.Config) { c.CORSOrigins = []string{consoleOrigin} })

	res := preflight(t, r, consoleOrigin)
	if res.StatusCode != http.StatusNoContent && res.StatusCode != http.StatusOK {
		t.Errorf("preflight status %d, want 204; headers %v", res.StatusCode, res.Header)
	}
	h := res.Header
	if got := h.Get("Access-Control-Allow-Origin"); got != consoleOrigin {
		t.Errorf("preflight Access-Control-Allow-Origin %q, want %q", got, consoleOrigin)
	}
	if got := h.Get("Access-Control-Allow-Methods"); !strings.Contains(got, "POST") {
		t.Errorf("preflight Access-Control-Allow-Methods %q, want POST", got)
	}
	allowed := strings.ToLower(h.Get("Access-Control-Allow-Headers"))
	for _, want := range []string{"content-type", "x-grpc-web", "x-user-agent", "authorization"} {
		if !strings.Contains(allowed, want) {
			t.Errorf("preflight Access-Control-Allow-Headers %q lacks %s", allowed, want)
		}
	}
	if h.Get("Access-Control-Max-Age") == "" {
		t.Error("preflight without Access-Control-Max-Age")
	}

	h = grpcWebFrom(t, r, consoleOrigin)
	if got := h.Get("Access-Control-Allow-Origin"); got != consoleOrigin {
		t.Errorf("gRPC-Web Access-Control-Allow-Origin %q, want %q", got, consoleOrigin)
	}
	exposed := strings.ToLower(h.Get("Access-Control-Expose-Headers"))
	for _, want := range []string{"grpc-status", "grpc-message"} {
		if !strings.Contains(exposed, want) {
			t.Errorf("gRPC-Web Access-Control-Expose-Headers %q lacks %s", exposed, want)
		}
	}

	// Another origin gets no CORS headers: the browser blocks it.
	if got := preflight(t, r, "https://evil.example.net").Header.Get("Access-Control-Allow-Origin"); got != "" {
		t.Errorf("preflight of an unlisted origin: Access-Control-Allow-Origin %q", got)
	}
	if got := grpcWebFrom(t, r, "https://evil.example.net").Get("Access-Control-Allow-Origin"); got != "" {
		t.Errorf("call from an unlisted origin: Access-Control-Allow-Origin %q", got)
	}
}

func TestNoCORSOriginMeansNoCORSHeaders(t *testing.T) {
	r := startApp(t, nil)
	res := preflight(t, r, consoleOrigin)
	for k := range res.Header {
		if strings.HasPrefix(k, "Access-Control-") {
			t.Errorf("preflight without --cors-origin answered %s: %s", k, res.Header.Get(k))
		}
	}
	for k := range grpcWebFrom(t, r, consoleOrigin) {
		if strings.HasPrefix(k, "Access-Control-") {
			t.Errorf("call without --cors-origin answered %s", k)
		}
	}
}

func TestDebugListenerServesPprofAndTheMainPortDoesNot(t *testing.T) {
	r := startApp(t, func(c *server.Config) { c.DebugListen = "127.0.0.1:0" })
	addr := r.app.DebugAddr()
	if addr == nil {
		t.Fatal("no debug listener")
	}
	// HTTP/1.1, as go tool pprof and curl speak.
	h1 := &running{hc: &http.Client{}}
	defer h1.hc.CloseIdleConnections()
	code, _, body := h1.get(t, "http://"+addr.String()+"/debug/pprof/")
	if code != http.StatusOK || !strings.Contains(body, "goroutine") {
		t.Errorf("GET /debug/pprof/ on --debug-listen: %d %.200s", code, body)
	}
	code, _, body = h1.get(t, "http://"+addr.String()+"/debug/pprof/goroutine?debug=1")
	if code != http.StatusOK || !strings.Contains(body, "goroutine profile") {
		t.Errorf("goroutine profile: %d %.200s", code, body)
	}
	if code, _, _ := r.get(t, r.base+"/debug/pprof/"); code == http.StatusOK {
		t.Errorf("the main port serves /debug/pprof/")
	}

	off := startApp(t, nil)
	if a := off.app.DebugAddr(); a != nil {
		t.Errorf("a debug listener at %s without --debug-listen", a)
	}
}

func TestValidateRejectsBadCORSOriginsAndDebugAddresses(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*server.Config)
		want   string
	}{
		{"an origin with a path", func(c *server.Config) { c.CORSOrigins = []string{"https://a.example.com/app"} }, "--cors-origin"},
		{"an origin without scheme", func(c *server.Config) { c.CORSOrigins = []string{"a.example.com"} }, "--cors-origin"},
		{"a debug address without port", func(c *server.Config) { c.DebugListen = "localhost" }, "--debug-listen"},
		{"the debug address on the main port", func(c *server.Config) { c.DebugListen = c.Listen }, "must differ from --listen"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := server.DefaultConfig()
			cfg.DataDir = t.TempDir()
			tc.mutate(&cfg)
			err := cfg.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate = %v, want an error naming %s", err, tc.want)
			}
		})
	}
	for _, ok := range []string{"*", "https://console.example.com", "http://localhost:5173", "https://*.example.com"} {
		cfg := server.DefaultConfig()
		cfg.DataDir = t.TempDir()
		cfg.CORSOrigins = []string{ok}
		if err := cfg.Validate(); err != nil {
			t.Errorf("--cors-origin %s: %v", ok, err)
		}
	}
}

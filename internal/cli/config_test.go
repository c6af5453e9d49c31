package cli

import (
	"bytes"
	"context"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"connectrpc.com/connect"

	compactorv1 "github.com/compactorhq/compactor/gen/compactor/v1"
	"github.com/compactorhq/compactor/gen/compactor/v1/compactorv1connect"
)

// authRecorder is a CompactionService and ControlService whose reads
// answer empty and record the Authorization header they got.
type authRecorder struct {
	compactorv1connect.UnimplementedCompactionServiceHandler
	compactorv1connect.UnimplementedControlServiceHandler
	mu   sync.Mutex
	auth []string
}

func (a *authRecorder) ListCompactions(_ context.Context, req *connect.Request[compactorv1.ListCompactionsRequest]) (*connect.Response[compactorv1.ListCompactionsResponse], error) {
	a.mu.Lock()
	a.auth = append(a.auth, req.Header().Get("Authorization"))
	a.mu.Unlock()
	return connect.NewResponse(&compactorv1.ListCompactionsResponse{}), nil
}

func (a *authRecorder) GetControls(context.Context, *connect.Request[compactorv1.GetControlsRequest]) (*connect.Response[compactorv1.GetControlsResponse], error) {
	return connect.NewResponse(&compactorv1.GetControlsResponse{}), nil
}

func (a *authRecorder) last() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.auth) == 0 {
		return "<no call>"
	}
	return a.auth[len(a.auth)-1]
}

func (a *authRecorder) mount(mux *http.ServeMux) {
	mux.Handle(compactorv1connect.NewCompactionServiceHandler(a))
	mux.Handle(compactorv1connect.NewControlServiceHandler(a))
}

// runCLI runs a command line as it is, without the --addr that cli adds.
func runCLI(t *testing.T, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), args, strings.NewReader(""), &stdout, &stderr)
	return result{stdout: stdout.String(), stderr: stderr.String(), err: err}
}

// writeConfig writes a client configuration file (and a token file beside
// it) and returns its path.
func writeConfig(t *testing.T, text string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "good.token"), []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestContextsOfTheConfigFile(t *testing.T) {
	rec := &authRecorder{}
	good := serveFake(t, rec.mount)
	down := unusedAddr(t)
	cfg := writeConfig(t, `current-context: down
contexts:
  good:
    addr: `+good+`
    token-file: good.token
  literal:
    addr: `+good+`
    token: literal-token
  down:
    addr: `+down+`
`)
	t.Run("--context picks a context: its address and its token file, relative to the file", func(t *testing.T) {
		if r := runCLI(t, "--config", cfg, "--context", "good", "jobs"); r.err != nil {
			t.Fatalf("%v\n%s", r.err, r.stderr)
		}
		if got := rec.last(); got != "Bearer from-file" {
			t.Fatalf("Authorization %q, want the token file's", got)
		}
	})
	t.Run("COMPACTOR_CONTEXT and COMPACTOR_CONFIG pick it too", func(t *testing.T) {
		t.Setenv("COMPACTOR_CONFIG", cfg)
		t.Setenv("COMPACTOR_CONTEXT", "literal")
		if r := runCLI(t, "jobs"); r.err != nil {
			t.Fatalf("%v\n%s", r.err, r.stderr)
		}
		if got := rec.last(); got != "Bearer literal-token" {
			t.Fatalf("Authorization %q, want the context's token", got)
		}
	})
	t.Run("flags win over the context", func(t *testing.T) {
		if r := runCLI(t, "jobs", "--config", cfg, "--context", "down", "--addr", good, "--token", "flag-token"); r.err != nil {
			t.Fatalf("%v\n%s", r.err, r.stderr)
		}
		if got := rec.last(); got != "Bearer flag-token" {
			t.Fatalf("Authorization %q, want the flag's token", got)
		}
	})
	t.Run("without --context the current one applies, and a failure names it", func(t *testing.T) {
		r := runCLI(t, "--config", cfg, "jobs")
		if r.code() != 1 || !strings.Contains(r.stderr, "no compactor answered at "+down+" (context down of "+cfg+")") {
			t.Fatalf("exit %d, stderr %q; want the current context's address named", r.code(), r.stderr)
		}
	})
	t.Run("an unknown context is a usage error listing the known ones", func(t *testing.T) {
		r := runCLI(t, "--config", cfg, "--context", "prod", "jobs")
		if r.code() != 2 || !strings.Contains(r.stderr, `context "prod" is not in `+cfg+" (it has: down, good, literal)") {
			t.Fatalf("exit %d, stderr %q", r.code(), r.stderr)
		}
	})
	t.Run("a typo in the file is a usage error naming it", func(t *testing.T) {
		bad := writeConfig(t, "contexts:\n  x:\n    adress: http://127.0.0.1:1\n")
		r := runCLI(t, "--config", bad, "--context", "x", "jobs")
		if r.code() != 2 || !strings.Contains(r.stderr, bad) || !strings.Contains(r.stderr, "adress") {
			t.Fatalf("exit %d, stderr %q", r.code(), r.stderr)
		}
	})
	t.Run("a missing named file is an error; a missing default file is none", func(t *testing.T) {
		if r := runCLI(t, "--config", filepath.Join(t.TempDir(), "none.yaml"), "--addr", good, "jobs"); r.code() != 2 {
			t.Fatalf("exit %d, stderr %q; want 2", r.code(), r.stderr)
		}
		if r := runCLI(t, "--addr", good, "jobs"); r.err != nil {
			t.Fatalf("%v\n%s", r.err, r.stderr)
		}
	})
	t.Run("completion offers the context names", func(t *testing.T) {
		t.Setenv("COMPACTOR_CONFIG", cfg)
		got, directive := complete(t, "jobs", "--context", "")
		if !slices.Equal(got, []string{"down\t" + down, "good\t" + good, "literal\t" + good}) || directive != ":4" {
			t.Fatalf("%q %s", got, directive)
		}
	})
}

// unusedAddr is the URL of a loopback port nothing listens on.
func unusedAddr(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.NotFoundHandler())
	addr := srv.URL
	srv.Close()
	return addr
}

func TestTLSWithCACertOrInsecure(t *testing.T) {
	rec := &authRecorder{}
	mux := http.NewServeMux()
	rec.mount(mux)
	srv := httptest.NewUnstartedServer(mux)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, protocol := range []string{"connect", "grpc"} {
		if r := runCLI(t, "--addr", srv.URL, "--cacert", ca, "--protocol", protocol, "jobs"); r.err != nil {
			t.Fatalf("--cacert over %s: %v\n%s", protocol, r.err, r.stderr)
		}
	}
	if r := runCLI(t, "--addr", srv.URL, "--insecure", "jobs"); r.err != nil {
		t.Fatalf("--insecure: %v\n%s", r.err, r.stderr)
	}
	r := runCLI(t, "--addr", srv.URL, "jobs")
	if r.code() != 1 || !strings.Contains(r.stderr, "--cacert") {
		t.Fatalf("without the CA: exit %d, stderr %q; want a failure saying to give --cacert", r.code(), r.stderr)
	}
	if r := runCLI(t, "--addr", srv.URL, "--cacert", ca, "healthcheck"); r.code() != 1 || !strings.Contains(r.stderr, "not ready") {
		// the fake serves no /readyz: 404, but over verified TLS
		t.Fatalf("healthcheck over TLS: exit %d, stderr %q", r.code(), r.stderr)
	}
	notPEM := filepath.Join(t.TempDir(), "x.pem")
	_ = os.WriteFile(notPEM, []byte("nope"), 0o600)
	if r := runCLI(t, "--addr", srv.URL, "--cacert", notPEM, "jobs"); r.code() != 2 || !strings.Contains(r.stderr, "no PEM certificate") {
		t.Fatalf("a bad --cacert: exit %d, stderr %q", r.code(), r.stderr)
	}
}

// TestBadEnvironmentValueIsAUsageError: a COMPACTOR_* value the flag does
// not accept exits 2, as the same value as a flag does, naming the variable.
func TestBadEnvironmentValueIsAUsageError(t *testing.T) {
	if r := runCLI(t, "jobs", "--timeout", "soon"); r.code() != 2 {
		t.Fatalf("--timeout soon: exit %d, want 2", r.code())
	}
	t.Setenv("COMPACTOR_TIMEOUT", "soon")
	r := runCLI(t, "jobs")
	if r.code() != 2 || !strings.Contains(r.stderr, `COMPACTOR_TIMEOUT="soon"`) {
		t.Fatalf("COMPACTOR_TIMEOUT=soon: exit %d, stderr %q; want 2 naming the variable", r.code(), r.stderr)
	}
}

// TestCompletionOfClientFlagsBeforeTheCommand: a client flag before the
// command's name neither breaks the completion of the command nor of the
// flag's own values.
func TestCompletionOfClientFlagsBeforeTheCommand(t *testing.T) {
	got, _ := complete(t, "--addr", "http://127.0.0.1:1", "col")
	if !slices.ContainsFunc(got, func(s string) bool { return strings.HasPrefix(s, "collections") }) {
		t.Errorf("--addr X col: %q, want collections offered", got)
	}
	if got, d := complete(t, "--protocol", ""); !slices.Equal(got, protocols) || d != ":4" {
		t.Errorf("--protocol: %q %s, want %v", got, d, protocols)
	}
	if got, d := complete(t, "-o", "json", "jobs", "--trigger", ""); !slices.Equal(got, []string{"scheduled", "one-off"}) || d != ":4" {
		t.Errorf("-o json jobs --trigger: %q %s", got, d)
	}
}

func TestThrottleJSONPrintsTheStateWhenNoCapIsSet(t *testing.T) {
	rec := &authRecorder{}
	addr := serveFake(t, rec.mount)
	r := ok(t, addr, "throttle", "-o", "json")
	st := decode[map[string]any](t, r.stdout)
	if st["bytes_per_second"] != "0" || st["override_bytes_per_second"] != "0" {
		t.Fatalf("throttle -o json printed %s; want the zero cap spelt out", r.stdout)
	}
}

func TestHealthcheckTakesTheAddressFlagsOnly(t *testing.T) {
	for _, flag := range []string{"--token", "--protocol", "--output"} {
		if r := runCLI(t, "healthcheck", flag, "x"); r.code() != 2 || !strings.Contains(r.stderr, "unknown flag: "+flag) {
			t.Errorf("healthcheck %s x: exit %d, stderr %q; want unknown flag", flag, r.code(), r.stderr)
		}
	}
	help := runCLI(t, "healthcheck", "--help")
	for _, flag := range []string{"--addr", "--context", "--cacert", "--timeout"} {
		if !strings.Contains(help.stdout, flag) {
			t.Errorf("healthcheck --help lacks %s", flag)
		}
	}
}

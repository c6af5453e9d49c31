package server_test

import (
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/compactorhq/compactor/internal/auth"
	"github.com/compactorhq/compactor/internal/server"
	"github.com/compactorhq/compactor/internal/testutil"
)

func tokensLine(name, role, token string) string {
	s := sha256.Sum256([]byte(token))
	return name + " " + role + " " + hex.EncodeToString(s[:]) + "\n"
}

func bearerHeader(tok string) http.Header {
	return http.Header{"Authorization": {"Bearer " + tok}}
}

// TestReloadCredentials: the reload SIGHUP runs puts a new tokens file in
// force; a file that does not parse keeps the credentials in force and
// logs an error naming the file's line; a bad file at start stops the
// start, naming the line; --token is one more credential, "admin".
func TestReloadCredentials(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tokens")
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(tokensLine("alice", "operator", "a-tok"))
	cfg := server.DefaultConfig()
	cfg.DataDir, cfg.TokensFile, cfg.Token = t.TempDir(), path, "root-tok"
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	logs := &testutil.SyncBuffer{}
	app, err := server.Open(t.Context(), cfg, slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	principal := func(tok string) auth.Principal {
		p, _ := app.Auth.Authenticate(bearerHeader(tok))
		return p
	}
	if p := principal("a-tok"); p != (auth.Principal{Name: "alice", Role: auth.RoleOperator}) {
		t.Fatalf("alice: %+v", p)
	}
	if p := principal("root-tok"); p != (auth.Principal{Name: auth.TokenPrincipal, Role: auth.RoleAdmin}) {
		t.Fatalf("--token: %+v", p)
	}

	write(tokensLine("alice", "operator", "a-tok") + "bob\n")
	if err := app.ReloadCredentials(); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("reload of a bad file: %v", err)
	}
	if !strings.Contains(logs.String(), "reload credentials") || !strings.Contains(logs.String(), "line 2") {
		t.Errorf("the log does not name the line:\n%s", logs.String())
	}
	if p := principal("a-tok"); p.Name != "alice" {
		t.Fatalf("after a failed reload alice is %+v", p)
	}

	write(tokensLine("bob", "reader", "b-tok"))
	if err := app.ReloadCredentials(); err != nil {
		t.Fatal(err)
	}
	if _, err := app.Auth.Authenticate(bearerHeader("a-tok")); err == nil {
		t.Error("alice's token still works after she was removed")
	}
	if p := principal("b-tok"); p != (auth.Principal{Name: "bob", Role: auth.RoleReader}) {
		t.Errorf("bob: %+v", p)
	}
	if p := principal("root-tok"); p.Name != auth.TokenPrincipal {
		t.Errorf("--token after the reload: %+v", p)
	}

	write("carol superuser " + strings.Repeat("0", 64) + "\n")
	cfg.DataDir = t.TempDir()
	if app, err := server.Open(t.Context(), cfg, nil); err == nil {
		app.Close()
		t.Fatal("a bad tokens file did not stop the start")
	} else if !strings.Contains(err.Error(), "--tokens-file "+path+": line 1") || !strings.Contains(err.Error(), `unknown role "superuser"`) {
		t.Errorf("start with a bad tokens file: %v", err)
	}
}

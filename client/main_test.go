package client_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"testing"
	"time"

	"github.com/compactorhq/compactor/internal/server"
)

// The server the examples and tests of this package call: the real
// application (SQLite catalog and file blobs in a temp dir, manager, the
// production HTTP server with plaintext HTTP/2) on a free loopback port.
var (
	// baseURL is the server's root URL, "http://127.0.0.1:<port>".
	baseURL string
	// token is the bearer token the server requires for mutating calls.
	token = "example-token"
)

// exampleMaxBacklog is the server's --max-backlog, in records: small, so
// that ExampleErrorInfo reaches it.
const exampleMaxBacklog = 10

func TestMain(m *testing.M) {
	os.Exit(runWithServer(m))
}

func runWithServer(m *testing.M) int {
	dir, err := os.MkdirTemp("", "compactor-client-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "temp dir:", err)
		return 1
	}
	defer os.RemoveAll(dir)

	cfg := server.DefaultConfig()
	cfg.DataDir = dir
	cfg.Listen = "127.0.0.1:0"
	cfg.Token = token
	cfg.MaxBacklog = exampleMaxBacklog
	cfg.Manager.Interval = time.Hour // no scheduled jobs: only what a test asks for
	if err := cfg.Validate(); err != nil {
		fmt.Fprintln(os.Stderr, "config:", err)
		return 1
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ctx, cancel := context.WithCancel(context.Background())
	app, err := server.Open(ctx, cfg, logger)
	if err != nil {
		cancel()
		fmt.Fprintln(os.Stderr, "open server:", err)
		return 1
	}
	defer app.Close()
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		cancel()
		fmt.Fprintln(os.Stderr, "listen:", err)
		return 1
	}
	started := make(chan net.Addr, 1)
	runErr := make(chan error, 1)
	go func() { runErr <- app.Run(ctx, ln, func(a net.Addr) { started <- a }) }()
	select {
	case a := <-started:
		baseURL = "http://" + a.String()
	case err := <-runErr:
		cancel()
		fmt.Fprintln(os.Stderr, "server stopped before it started:", err)
		return 1
	}
	code := m.Run()
	cancel()
	if err := <-runErr; err != nil {
		fmt.Fprintln(os.Stderr, "server:", err)
		return 1
	}
	return code
}

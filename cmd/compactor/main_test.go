package main

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"

	"github.com/compactorhq/compactor/internal/buildinfo"
	"github.com/compactorhq/compactor/internal/cli"
)

type result struct {
	stdout, stderr string
	err            error
}

func runArgs(t *testing.T, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), args, strings.NewReader(""), &stdout, &stderr)
	return result{stdout.String(), stderr.String(), err}
}

func TestVersionCommandAndFlagPrintTheBuild(t *testing.T) {
	want := buildinfo.Get().String() + "\n"
	for _, args := range [][]string{{"version"}, {"--version"}} {
		r := runArgs(t, args...)
		if r.err != nil {
			t.Fatalf("%v: %v", args, r.err)
		}
		if r.stdout != want {
			t.Errorf("%v printed %q, want %q", args, r.stdout, want)
		}
		if !strings.HasPrefix(r.stdout, "compactor ") || !strings.Contains(r.stdout, "revision ") {
			t.Errorf("%v printed %q, want the version and revision", args, r.stdout)
		}
	}
}

// TestClientFlagsAreOnTheClientCommandsOnly: serve's help lists its own
// flags and none of the client's; a client command's help lists them, and
// they are accepted before the command's name as before.
func TestClientFlagsAreOnTheClientCommandsOnly(t *testing.T) {
	serve := runArgs(t, "serve", "--help")
	if serve.err != nil || !strings.Contains(serve.stdout, "--listen") {
		t.Fatalf("serve --help: %v\n%s", serve.err, serve.stdout)
	}
	// serve has a --token of its own.
	for _, flag := range []string{"--addr", "--protocol", "--output", "--timeout"} {
		if strings.Contains(serve.stdout, flag) {
			t.Errorf("serve --help lists the client flag %s:\n%s", flag, serve.stdout)
		}
	}
	for _, args := range [][]string{{"compact", "--help"}, {"collections", "get", "--help"}, {"healthcheck", "--help"}} {
		r := runArgs(t, args...)
		for _, flag := range []string{"--addr", "--protocol", "--output", "--timeout"} {
			if !strings.Contains(r.stdout, flag) {
				t.Errorf("%v lacks %s:\n%s", args, flag, r.stdout)
			}
		}
	}
	if r := runArgs(t, "serve", "--addr", "x"); cli.ExitCode(r.err) != 2 || !strings.Contains(r.stderr, "unknown flag: --addr") {
		t.Errorf("serve --addr: exit %d, stderr %q; want a usage error", cli.ExitCode(r.err), r.stderr)
	}
}

func TestConnectionErrorNamesTheAddressAndHowToSetIt(t *testing.T) {
	// A port nothing listens on: bound, then released.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := "http://" + ln.Addr().String()
	ln.Close()
	for _, args := range [][]string{{"--addr", addr, "collections", "list"}, {"jobs", "--addr", addr}, {"healthcheck", "--addr", addr}} {
		r := runArgs(t, args...)
		if cli.ExitCode(r.err) != 1 {
			t.Fatalf("%v: exit %d, want 1; stderr %s", args, cli.ExitCode(r.err), r.stderr)
		}
		for _, want := range []string{"no compactor answered at " + addr, "--addr", "COMPACTOR_ADDR"} {
			if !strings.Contains(r.stderr, want) {
				t.Errorf("%v: stderr %q lacks %q", args, r.stderr, want)
			}
		}
	}
}

func TestUnknownCommandIsAUsageError(t *testing.T) {
	if r := runArgs(t, "compcat"); cli.ExitCode(r.err) != 2 || !strings.Contains(r.stderr, "unknown command") {
		t.Errorf("exit %d, stderr %q", cli.ExitCode(r.err), r.stderr)
	}
}

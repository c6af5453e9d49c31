package main

import (
	"bytes"
	"context"
	"encoding/json"
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
	for _, args := range [][]string{{"compact", "--help"}, {"collections", "get", "--help"}} {
		r := runArgs(t, args...)
		for _, flag := range []string{"--addr", "--protocol", "--output", "--timeout", "--context", "--cacert"} {
			if !strings.Contains(r.stdout, flag) {
				t.Errorf("%v lacks %s:\n%s", args, flag, r.stdout)
			}
		}
	}
	// healthcheck takes the address flags, not those it would ignore.
	hc := runArgs(t, "healthcheck", "--help")
	for _, flag := range []string{"--addr", "--timeout", "--context", "--cacert"} {
		if !strings.Contains(hc.stdout, flag) {
			t.Errorf("healthcheck --help lacks %s:\n%s", flag, hc.stdout)
		}
	}
	for _, flag := range []string{"--protocol", "--output", "--token"} {
		if strings.Contains(hc.stdout, flag) {
			t.Errorf("healthcheck --help lists %s, which it ignores:\n%s", flag, hc.stdout)
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

func TestVersionJSON(t *testing.T) {
	r := runArgs(t, "version", "-o", "json")
	if r.err != nil {
		t.Fatal(r.err)
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
		t.Fatalf("version -o json printed %q: %v", r.stdout, err)
	}
	bi := buildinfo.Get()
	if v["version"] != bi.Version || v["revision"] != bi.Revision || v["go_version"] != bi.GoVersion || v["build_time"] != bi.Time {
		t.Errorf("version -o json = %v, want the build %+v", v, bi)
	}
	if r := runArgs(t, "version", "-o", "yaml"); cli.ExitCode(r.err) != 2 {
		t.Errorf("version -o yaml: exit %d, want 2", cli.ExitCode(r.err))
	}
}

// TestRootHelpListsTheClientFlagsAndSaysTheExitStatusOnce: root --help
// lists the client flags that may come before a command and the exit
// status; the commands' help points there instead of repeating it.
func TestRootHelpListsTheClientFlagsAndSaysTheExitStatusOnce(t *testing.T) {
	root := runArgs(t, "--help")
	for _, want := range []string{"--addr", "--context", "--config", "--cacert", "--insecure", "--token", "--token-file", "--protocol", "--output", "--timeout",
		"Exit status of the client commands", "compactor --addr HOST:7070 jobs", "current-context"} {
		if !strings.Contains(root.stdout, want) {
			t.Errorf("root --help lacks %q", want)
		}
	}
	for _, args := range [][]string{{"jobs", "--help"}, {"push", "--help"}, {"collections", "list", "--help"}} {
		r := runArgs(t, args...)
		if strings.Contains(r.stdout, "Exit status of the client") || strings.Contains(r.stdout, "Exit status: 0 on success") {
			t.Errorf("%v repeats the exit status text", args)
		}
		if !strings.Contains(r.stdout, "see compactor --help") {
			t.Errorf("%v does not point to compactor --help", args)
		}
	}
}

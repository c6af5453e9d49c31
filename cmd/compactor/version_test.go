package main

import (
	"net"
	"strings"
	"testing"

	"github.com/compactorhq/compactor/internal/buildinfo"
)

func TestVersionCommandAndFlagPrintTheBuild(t *testing.T) {
	want := buildinfo.Get().String() + "\n"
	for _, args := range [][]string{{"version"}, {"--version"}} {
		r := cli(t, "http://127.0.0.1:1", nil, args...)
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

func TestConnectionErrorNamesTheAddressAndHowToSetIt(t *testing.T) {
	// A port nothing listens on: bound, then released.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := "http://" + ln.Addr().String()
	ln.Close()
	for _, args := range [][]string{{"collections", "list"}, {"jobs"}} {
		r := cli(t, addr, nil, args...)
		if r.code() != 1 {
			t.Fatalf("%v: exit %d, want 1; stderr %s", args, r.code(), r.stderr)
		}
		for _, want := range []string{"unavailable", "no compactor answered at " + addr, "--addr", "COMPACTOR_ADDR"} {
			if !strings.Contains(r.stderr, want) {
				t.Errorf("%v: stderr %q lacks %q", args, r.stderr, want)
			}
		}
	}
}

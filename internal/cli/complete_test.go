package cli

import (
	"bytes"
	"context"
	"io"
	"net"
	"slices"
	"strings"
	"testing"
)

// complete runs cobra's hidden __complete command as a shell would and
// returns the completions offered and the directive line (":4" is
// ShellCompDirectiveNoFileComp: the shell offers no files).
func complete(t *testing.T, args ...string) (values []string, directive string) {
	t.Helper()
	var out bytes.Buffer
	if err := run(context.Background(), append([]string{"__complete"}, args...), nil, &out, io.Discard); err != nil {
		t.Fatalf("__complete %v: %v", args, err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	return lines[:len(lines)-1], lines[len(lines)-1]
}

func TestCompletionOfEnumFlags(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want []string
	}{
		{[]string{"jobs", "-o", ""}, []string{"table", "json"}},
		{[]string{"jobs", "--protocol", ""}, []string{"connect", "grpc", "grpcweb"}},
		{[]string{"jobs", "--state", ""}, []string{"queued", "running", "succeeded", "failed", "cancelled"}},
		{[]string{"jobs", "--trigger", ""}, []string{"scheduled", "one-off"}},
		{[]string{"push", "--op", ""}, []string{"add", "update", "upsert", "delete"}},
		{[]string{"collections", "get", "-o", ""}, []string{"table", "json"}},
	} {
		got, directive := complete(t, tt.args...)
		if !slices.Equal(got, tt.want) || directive != ":4" {
			t.Errorf("%v: %v %s, want %v :4", tt.args, got, directive, tt.want)
		}
	}
}

// TestCompletionNeverOffersFiles: commands and flags without values to
// offer say so, rather than letting the shell list files; push's FILE is
// the one argument that is a file.
func TestCompletionNeverOffersFiles(t *testing.T) {
	for _, args := range [][]string{
		{"nodes", ""}, {"plan", ""}, {"throttle", ""}, {"collections", "create", ""},
		{"jobs", "--limit", ""}, {"jobs", "--addr", ""}, {"compact", "--reason", ""}, {"push", "--batch", ""},
	} {
		if _, directive := complete(t, args...); directive != ":4" {
			t.Errorf("%v: directive %s, want :4 (no files)", args, directive)
		}
	}
	if _, directive := complete(t, "push", "--collection", "x", ""); directive != ":0" {
		t.Errorf("push FILE: directive %s, want :0 (the shell's default: files)", directive)
	}
}

// TestCompletionOfCollectionsAndJobs asks the server at --addr.
func TestCompletionOfCollectionsAndJobs(t *testing.T) {
	t.Parallel()
	addr := startServer(t, nil)
	a := createCollection(t, addr, "debian-bookworm")
	b := createCollection(t, addr, "debian-trixie")
	createCollection(t, addr, "ubuntu")

	got, directive := complete(t, "compact", "--addr", addr, "deb")
	want := []string{"debian-bookworm\t" + a, "debian-trixie\t" + b}
	if !slices.Equal(got, want) || directive != ":4" {
		t.Errorf("compact deb: %q %s, want %q :4", got, directive, want)
	}
	// Several collections: one already given is not offered again.
	got, _ = complete(t, "compact", "--addr", addr, "debian-bookworm", "deb")
	if !slices.Equal(got, []string{"debian-trixie\t" + b}) {
		t.Errorf("compact debian-bookworm deb: %q", got)
	}
	// Ids complete too, described by the name.
	got, _ = complete(t, "push", "--addr", addr, "--collection", a[:6])
	if !slices.Contains(got, a+"\tdebian-bookworm") {
		t.Errorf("push --collection %s: %q lacks the id", a[:6], got)
	}
	// One collection only: nothing after it.
	if got, _ := complete(t, "collections", "get", "--addr", addr, "ubuntu", ""); len(got) != 0 {
		t.Errorf("collections get ubuntu: %q, want nothing", got)
	}
	ok(t, addr, "compact", "ubuntu")
	got, _ = complete(t, "job", "--addr", addr, "")
	if len(got) != 1 || !strings.Contains(got[0], "\tubuntu ") {
		t.Errorf("job: %q, want the job of ubuntu with its state", got)
	}
}

// TestCompletionWithoutAServerIsQuiet: no server, no completions, and no
// message in the user's command line.
func TestCompletionWithoutAServerIsQuiet(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := "http://" + ln.Addr().String()
	ln.Close()
	for _, args := range [][]string{{"compact", "--addr", addr, ""}, {"job", "--addr", addr, ""}, {"compact", "--protocol", "bogus", ""}} {
		if got, directive := complete(t, args...); len(got) != 0 || directive != ":4" {
			t.Errorf("%v: %q %s, want nothing and :4", args, got, directive)
		}
	}
}

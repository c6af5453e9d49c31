package cli

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/compactorhq/compactor/client"
	compactorv1 "github.com/compactorhq/compactor/gen/compactor/v1"
)

// Every command's usage line (its Use, which usage errors and --help
// print) names each of the command's own flags: a user reading
// "usage: compactor query COLLECTION ..." learns --exact and --ef there,
// and "rollback" shows --operator. The client flags, shared by all, are
// the "[flags]" that cobra adds.
func TestUsageLinesNameEveryFlag(t *testing.T) {
	root := newTestRoot(Streams{In: strings.NewReader(""), Out: io.Discard, Err: io.Discard})
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			walk(sub)
		}
		if c.RunE == nil || c == root {
			return
		}
		c.LocalNonPersistentFlags().VisitAll(func(f *pflag.Flag) {
			if f.Hidden || f.Name == "help" {
				return
			}
			if !strings.Contains(c.Use, "--"+f.Name) && (f.Shorthand == "" || !strings.Contains(c.Use, "-"+f.Shorthand+" ")) {
				t.Errorf("usage of %q does not name --%s: %s", c.CommandPath(), f.Name, c.Use)
			}
		})
	}
	walk(root)
}

// A compaction window that never closes ("01:00-01:00", every day: 24
// hours from 01:00) is shown as such by plan, not as one that closes weeks
// later.
func TestPlanShowsAWindowThatNeverCloses(t *testing.T) {
	t.Parallel()
	addr := startServer(t, nil)
	id := createCollection(t, addr, "all-day", "--dimension", "2")
	ok(t, addr, "collections", "set", id, "--compaction-window", "01:00-01:00")
	plan := ok(t, addr, "plan", "--all").stdout
	if !strings.Contains(plan, "open, never closes") || strings.Contains(plan, "open until") {
		t.Errorf("plan of a window that never closes:\n%s", plan)
	}
}

// An error of the server prints its code once: not "not_found: get
// collection X: not found".
func TestErrorsSayTheirCodeOnce(t *testing.T) {
	t.Parallel()
	addr := startServer(t, nil)
	const unknown = "6a1b3c0e-8f1e-4a55-9f0e-5c1d2f3a4b5c"
	createCollection(t, addr, "taken")
	for _, tc := range []struct {
		want string
		args []string
	}{
		{"compactor: not_found: get collection " + unknown + "\n", []string{"collections", "get", unknown}},
		{"compactor: not_found: cancel job " + unknown + "\n", []string{"cancel", unknown}},
		{`compactor: already_exists: create collection "taken": name is taken` + "\n", []string{"collections", "create", "taken"}},
	} {
		if r := fails(t, addr, nil, 1, "compactor: ", tc.args...); r.stderr != tc.want {
			t.Errorf("%s: stderr %q, want %q", strings.Join(tc.args, " "), r.stderr, tc.want)
		}
	}
}

// plainError drops the code's words at the end or the start of the
// message, and keeps the code and the details.
func TestPlainErrorKeepsCodeAndDetails(t *testing.T) {
	ce := connect.NewError(connect.CodeInvalidArgument, errors.New("invalid argument: name: empty"))
	d, err := connect.NewErrorDetail(&compactorv1.ErrorDetail{Reason: compactorv1.ErrorReason_ERROR_REASON_INVALID_RECORD})
	if err != nil {
		t.Fatal(err)
	}
	ce.AddDetail(d)
	got := plainError(ce)
	if got.Error() != "invalid_argument: name: empty" || connect.CodeOf(got) != connect.CodeInvalidArgument ||
		client.Reason(got) != compactorv1.ErrorReason_ERROR_REASON_INVALID_RECORD {
		t.Errorf("plainError = %v (code %v, reason %v)", got, connect.CodeOf(got), client.Reason(got))
	}
	for _, keep := range []error{
		connect.NewError(connect.CodeNotFound, errors.New("not found")), // nothing else to say
		connect.NewError(connect.CodeUnavailable, errors.New("catalog unavailable")),
		io.EOF,
	} {
		if got := plainError(keep); got != keep {
			t.Errorf("plainError(%v) = %v; want it as it is", keep, got)
		}
	}
}

// An unknown command names the binary once, with cobra's suggestions, and
// is a usage error (exit status 2), below root as on it.
func TestUnknownCommandIsAUsageError(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"jbos"}, `compactor: unknown command "jbos" (did you mean jobs`},
		{[]string{"collections", "lst"}, `compactor: unknown command "lst" of collections` + "\nusage: compactor collections"},
		{[]string{"index", "rebuld"}, `compactor: unknown command "rebuld" of index`},
	} {
		var stderr strings.Builder
		err := run(context.Background(), tc.args, strings.NewReader(""), io.Discard, &stderr)
		if ExitCode(err) != 2 || !strings.HasPrefix(stderr.String(), tc.want) || strings.Contains(stderr.String(), `for "compactor`) {
			t.Errorf("%s: exit %d, stderr %q; want 2 and %q", strings.Join(tc.args, " "), ExitCode(err), stderr.String(), tc.want)
		}
	}
}

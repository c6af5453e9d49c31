package cli

import (
	"io"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
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

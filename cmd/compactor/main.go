// Command compactor is the compaction service and its client: `compactor
// serve` runs the server; the other subcommands talk to one over its Connect
// API.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/compactorhq/compactor/internal/buildinfo"
	"github.com/compactorhq/compactor/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(cli.ExitCode(err))
}

// run executes the command line args and returns the error that decides the
// exit status (cli.ExitCode; already printed to stderr).
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	s := cli.Streams{In: stdin, Out: stdout, Err: stderr}
	return cli.Execute(ctx, newRoot(s), args, s)
}

// newRoot is the binary's command tree: serve, demo and version here, the
// client commands from internal/cli (each with its own client flags).
func newRoot(s cli.Streams) *cobra.Command {
	root := &cobra.Command{
		Use:   "compactor",
		Short: "Compaction service for a log-structured collection store",
		Long: `compactor materializes per-collection write-ahead logs into immutable, versioned
segments. 'compactor serve' runs the service; the other commands control a
running one over its Connect API (flags fall back to COMPACTOR_* environment
variables, e.g. COMPACTOR_ADDR, COMPACTOR_TOKEN).

` + cli.RootHelp,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return cli.EnvFallback(cmd)
		},
	}
	// --version (and `compactor version`) print the build: version,
	// revision, build time, toolchain.
	root.Version = buildinfo.Get().String()
	root.SetVersionTemplate("{{.Version}}\n")
	// A malformed flag of any command is a usage error (exit status 2).
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return cli.UsageError(c, err) })
	// The client flags, listed in root's help and known to completion
	// before a command's name; each client command parses its own.
	cli.RegisterRootFlags(root)
	root.AddCommand(newServeCmd(s), newDemoCmd(s), newVersionCmd(s.Out))
	root.AddCommand(cli.Commands(s)...)
	return root
}

// newVersionCmd prints the build as one line, e.g.
// "compactor v1.4.0 (revision 3f2c9a1b7d4e, built 2026-11-30T09:12:00Z, go1.26.8)",
// or with -o json as one object.
func newVersionCmd(stdout io.Writer) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version [-o table|json]",
		Short: "Print the version, VCS revision and build time of this binary",
		Long: `Print the version, VCS revision and build time of this binary. -o json prints
one object: {"version", "revision", "build_time", "modified", "go_version"}
("unknown" for what the build did not record).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			bi := buildinfo.Get()
			switch output {
			case "table", "text":
				_, err := fmt.Fprintln(stdout, bi)
				return err
			case "json":
				enc := json.NewEncoder(stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(versionJSON{Version: bi.Version, Revision: bi.Revision, BuildTime: bi.Time, Modified: bi.Modified, GoVersion: bi.GoVersion})
			}
			return cli.UsageError(cmd, fmt.Errorf("--output %q: want table or json", output))
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "table", "output format: table (one line) or json")
	_ = cmd.RegisterFlagCompletionFunc("output", func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
		return []cobra.Completion{"table", "json"}, cobra.ShellCompDirectiveNoFileComp
	})
	return cmd
}

// versionJSON is the object of version -o json.
type versionJSON struct {
	Version   string `json:"version"`
	Revision  string `json:"revision"`
	BuildTime string `json:"build_time"`
	Modified  bool   `json:"modified"`
	GoVersion string `json:"go_version"`
}

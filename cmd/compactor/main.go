// Command compactor is the compaction service and its client: `compactor
// serve` runs the server; the other subcommands talk to one over its Connect
// API.
package main

import (
	"context"
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
variables, e.g. COMPACTOR_ADDR, COMPACTOR_TOKEN).`,
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
	root.AddCommand(newServeCmd(s), newDemoCmd(s), newVersionCmd(s.Out))
	root.AddCommand(cli.Commands(s)...)
	return root
}

// newVersionCmd prints the build as one line, e.g.
// "compactor v1.4.0 (revision 3f2c9a1b7d4e, built 2026-11-30T09:12:00Z, go1.26.8)".
func newVersionCmd(stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, VCS revision and build time of this binary",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			_, err := fmt.Fprintln(stdout, buildinfo.Get())
			return err
		},
	}
}

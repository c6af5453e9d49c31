// Command compactor is the compaction service and its client: `compactor
// serve` runs the server; the other subcommands talk to one over its Connect
// API.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/compactorhq/compactor/internal/buildinfo"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(exitCode(err))
}

// exitError carries a chosen exit status with an error already reported.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func exitCode(err error) int {
	var ee *exitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.code
	}
	return 1
}

// run executes the command line args and returns the error that decides the
// exit status (already printed to stderr).
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	root := newRoot(stdin, stdout, stderr)
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if cmd, _, ferr := root.Find(args); err != nil && ferr == nil && cmd != root && !serverCommands[cmd.Name()] {
		if f := root.PersistentFlags().Lookup("addr"); f != nil {
			err = connectionHint(err, f.Value.String())
		}
	}
	if err != nil && strings.HasPrefix(err.Error(), "unknown command") {
		err = &exitError{code: 2, err: err}
	}
	if err != nil {
		var ee *exitError
		if !errors.As(err, &ee) || ee.err != nil && ee.err.Error() != "" {
			fmt.Fprintf(stderr, "compactor: %v\n", err)
		}
	}
	return err
}

// serverCommands run a server rather than talk to one: their dial errors
// (a PostgreSQL catalog, S3) are not about --addr.
var serverCommands = map[string]bool{"serve": true, "demo": true, "version": true}

func newRoot(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	g := &globals{stdin: stdin, stdout: stdout, stderr: stderr}
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
			return envFallback(cmd)
		},
	}
	// --version (and `compactor version`) print the build: version,
	// revision, build time, toolchain.
	root.Version = buildinfo.Get().String()
	root.SetVersionTemplate("{{.Version}}\n")
	g.register(root.PersistentFlags())
	// A malformed flag of any command is a usage error (exit status 2).
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return usageError(c, err) })
	root.AddCommand(newServeCmd(g), newDemoCmd(g), newHealthcheckCmd(g), newVersionCmd(stdout))
	addClientCommands(root, g)
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

// envFallback sets every flag of cmd that was not given on the command line
// from its COMPACTOR_<NAME> environment variable (dashes become
// underscores), when set.
func envFallback(cmd *cobra.Command) error {
	var errs []error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Changed {
			return
		}
		name := "COMPACTOR_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		v, ok := os.LookupEnv(name)
		if !ok {
			return
		}
		if err := cmd.Flags().Set(f.Name, v); err != nil {
			errs = append(errs, fmt.Errorf("environment variable %s=%q: %w", name, v, err))
		}
	})
	return errors.Join(errs...)
}

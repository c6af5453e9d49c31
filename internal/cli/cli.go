// Package cli is compactor's client: the commands that control a running
// server over its Connect API (compact, jobs, job, watch, cancel,
// collections, push, get, nodes, pause, resume, plan, throttle, audit,
// healthcheck). cmd/compactor wires them into the binary next to serve.
//
// One file per command. Each command reads its flags into an options
// struct, validates it before it calls the server (a bad value is a usage
// error, exit status 2), then runs with a session: the API clients and the
// output. The client flags (--addr, --context, --config, --cacert,
// --insecure, --protocol, --token, --token-file, -o, --timeout) are
// registered on the client commands only, so `compactor serve --help` does
// not list them; the root lists copies for its help and for completion
// before a command's name (RegisterRootFlags). A flag not given falls back
// to its COMPACTOR_* variable, then to the named context of the client
// configuration file (config.go). The calls go through the public client
// package (pushing, waiting, reading error details); this package keeps the
// flags, their validation and the rendering. Wherever a command takes a
// collection it takes its id or its name (resolve.go), and shell completion
// offers both (complete.go).
//
// Exit status of every client command (RootHelp says it to users): 0 on
// success; 1 when a call fails (printed as "compactor: <code>: <message>"),
// when a waited-for job ends FAILED or CANCELLED, or for bad input; 2 for a
// usage error (unknown flag, wrong arguments, a bad flag value or a bad
// COMPACTOR_* value); 130 when interrupted while `compact --wait` or `push`
// was in progress.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Streams are a command's standard input, output and error.
type Streams struct {
	In  io.Reader
	Out io.Writer
	Err io.Writer
}

// ExitError carries the exit status of an error; Execute has printed it.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

// ExitCode is the exit status for the error Execute returned: 0 for nil,
// the code of an ExitError, else 1.
func ExitCode(err error) int {
	var ee *ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.Code
	}
	return 1
}

// UsageError is err with exit status 2 and the command's usage line.
func UsageError(cmd *cobra.Command, err error) error {
	return &ExitError{Code: 2, Err: fmt.Errorf("%w\nusage: %s (see --help)", err, cmd.UseLine())}
}

// Execute runs root with args and prints the error, if any, to s.Err as
// "compactor: <error>"; an unknown command is a usage error. The returned
// error gives the exit status through ExitCode.
func Execute(ctx context.Context, root *cobra.Command, args []string, s Streams) error {
	root.SetArgs(args)
	root.SetIn(s.In)
	root.SetOut(s.Out)
	root.SetErr(s.Err)
	err := root.ExecuteContext(ctx)
	if err != nil && strings.HasPrefix(err.Error(), "unknown command") {
		err = &ExitError{Code: 2, Err: err}
	}
	var ee *ExitError
	if err != nil && (!errors.As(err, &ee) || ee.Err != nil && ee.Err.Error() != "") {
		fmt.Fprintf(s.Err, "compactor: %v\n", err)
	}
	return err
}

// EnvFallback sets every flag of cmd that was not given on the command line
// from its COMPACTOR_<NAME> environment variable (dashes become
// underscores), when set. Root commands call it before running. A value
// the flag does not accept is a usage error (exit status 2), as the same
// value on the command line is, naming the variable.
func EnvFallback(cmd *cobra.Command) error {
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
	if len(errs) > 0 {
		return UsageError(cmd, errors.Join(errs...))
	}
	return nil
}

// Commands returns the client commands, each with the client flags, the
// usage-error handling (exit status 2) and, for a failed connection, the
// address tried and how to set another.
func Commands(s Streams) []*cobra.Command {
	g := &globals{streams: s}
	cmds := []*cobra.Command{
		newCompactCmd(g),
		newJobsCmd(g),
		newJobCmd(g),
		newWatchCmd(g),
		newCancelCmd(g),
		newCollectionsCmd(g),
		newPushCmd(g),
		newGetCmd(g),
		newQueryCmd(g),
		newVersionsCmd(g),
		newRollbackCmd(g),
		newNodesCmd(g),
		newPauseCmd(g),
		newResumeCmd(g),
		newPlanCmd(g),
		newThrottleCmd(g),
		newIndexCmd(g),
		newVerifyCmd(g),
		newAuditCmd(g),
	}
	for _, c := range cmds {
		g.register(c, allFlags)
	}
	// healthcheck reads the address only: no token, protocol or output.
	hc := newHealthcheckCmd(g)
	g.register(hc, addressFlags)
	cmds = append(cmds, hc)
	for _, c := range cmds {
		prepare(c, g)
	}
	return cmds
}

// prepare makes flag and argument errors of cmd and its subcommands usage
// errors (exit status 2), adds the output help, adds the connection hint to
// their errors, and keeps shell completion from offering files.
func prepare(cmd *cobra.Command, g *globals) {
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return UsageError(c, err)
	})
	if cmd.Args != nil {
		args := cmd.Args
		cmd.Args = func(c *cobra.Command, a []string) error {
			if err := args(c, a); err != nil {
				return UsageError(c, err)
			}
			return nil
		}
	}
	if run := cmd.RunE; run != nil {
		cmd.RunE = func(c *cobra.Command, a []string) error {
			return g.connectionHint(run(c, a))
		}
		if cmd.Name() != "healthcheck" {
			cmd.Long += "\n" + outputHelp
		}
	}
	// Completion never offers files: no client command reads one but push,
	// whose FILE argument keeps the shell's file completion.
	if cmd.ValidArgsFunction == nil && len(cmd.ValidArgs) == 0 && cmd.Name() != "push" {
		cmd.ValidArgsFunction = cobra.NoFileCompletions
	}
	for _, fs := range []*pflag.FlagSet{cmd.LocalNonPersistentFlags(), cmd.PersistentFlags()} {
		fs.VisitAll(func(f *pflag.Flag) {
			if _, ok := cmd.GetFlagCompletionFunc(f.Name); !ok {
				_ = cmd.RegisterFlagCompletionFunc(f.Name, cobra.NoFileCompletions)
			}
		})
	}
	for _, sub := range cmd.Commands() {
		prepare(sub, g)
	}
}

// session is what a client command runs with: its clients and its output.
type session struct {
	g   *globals
	c   *clients
	out *output
}

// newSession validates the client flags (a bad one is a usage error) and
// builds the clients.
func newSession(cmd *cobra.Command, g *globals) (*session, error) {
	c, err := g.connect(cmd)
	if err != nil {
		return nil, UsageError(cmd, err)
	}
	return &session{g: g, c: c, out: newOutput(g)}, nil
}

// callUnary calls f with a context bounded by --timeout.
func callUnary[T any](ctx context.Context, s *session, f func(context.Context) (*T, error)) (*T, error) {
	cctx, cancel := s.g.callCtx(ctx)
	defer cancel()
	return f(cctx)
}

// interrupted reports whether err comes from the command's context ending
// (Ctrl-C), as opposed to a call failing.
func interrupted(ctx context.Context, err error) bool {
	return ctx.Err() != nil && (errors.Is(err, context.Canceled) || connect.CodeOf(err) == connect.CodeCanceled)
}

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
// COMPACTOR_* value); 130 when interrupted while a --wait (compact, index
// rebuild, verify) or push was in progress.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"google.golang.org/protobuf/proto"

	compactorv1 "github.com/compactorhq/compactor/gen/compactor/v1"
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
	var ee *ExitError
	if err != nil && !errors.As(err, &ee) && strings.HasPrefix(err.Error(), "unknown command") {
		err = &ExitError{Code: 2, Err: fmt.Errorf("%w\nusage: %s COMMAND (see --help)", unknownCommand(root, err), root.Name())}
	}
	if err != nil && (!errors.As(err, &ee) || ee.Err != nil && ee.Err.Error() != "") {
		fmt.Fprintf(s.Err, "compactor: %v\n", err)
	}
	return err
}

// unknownCommandRE matches cobra's error for an unknown command: its name
// and the path of the command that does not have it.
var unknownCommandRE = regexp.MustCompile(`^unknown command ("(?:[^"\\]|\\.)*") for "([^"]*)"`)

// unknownCommand rewords cobra's unknown command error, which names the
// binary twice ("compactor: unknown command "jbos" for "compactor"..."),
// as `unknown command "jbos" (did you mean jobs?)`, naming the parent
// command when it is not root (`unknown command "lst" of collections`).
// Other errors are returned as they are.
func unknownCommand(root *cobra.Command, err error) error {
	m := unknownCommandRE.FindStringSubmatch(err.Error())
	if m == nil {
		return err
	}
	msg := "unknown command " + m[1]
	if parent := strings.TrimPrefix(strings.TrimPrefix(m[2], root.Name()), " "); parent != "" {
		msg += " of " + parent
	}
	if _, did, ok := strings.Cut(err.Error()[len(m[0]):], "Did you mean this?"); ok {
		msg += " (did you mean " + strings.Join(strings.Fields(did), " or ") + "?)"
	}
	return errors.New(msg)
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
				return UsageError(c, unknownCommand(c.Root(), err))
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

// clientRun is the RunE of a client command: check (when not nil) reads
// and validates the arguments and flags before any call, its error a usage
// error (exit status 2); then run gets a session (a bad client flag is a
// usage error too) and the command's context.
func clientRun(g *globals, check func(cmd *cobra.Command, args []string) error,
	run func(ctx context.Context, s *session, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if check != nil {
			if err := check(cmd, args); err != nil {
				return UsageError(cmd, err)
			}
		}
		s, err := newSession(cmd, g)
		if err != nil {
			return err
		}
		return run(cmd.Context(), s, args)
	}
}

// onCollection is the run of clientRun for a command whose first argument
// is a collection (an id or a name): f gets the collection's id.
func onCollection(f func(ctx context.Context, s *session, id string) error) func(context.Context, *session, []string) error {
	return func(ctx context.Context, s *session, args []string) error {
		id, err := s.resolveCollection(ctx, args[0])
		if err != nil {
			return err
		}
		return f(ctx, s, id)
	}
}

// unary calls one unary procedure of the API (a method of the session's
// clients, such as s.c.collection.GetCollection) with req, bounded by
// --timeout, and returns the response message. Errors: the call's.
func unary[Req, Res any](ctx context.Context, s *session, call func(context.Context, *connect.Request[Req]) (*connect.Response[Res], error), req *Req) (*Res, error) {
	cctx, cancel := s.g.callCtx(ctx)
	defer cancel()
	res, err := call(cctx, connect.NewRequest(req))
	if err != nil {
		return nil, err
	}
	return res.Msg, nil
}

// listPageSize is the page size of the CLI's list calls: the server's
// largest.
const listPageSize = 1000

// collect follows the pages of a list call: page gets the page size and
// the page token and returns the page's items and the next page's token
// ("" after the last page). It stops after limit items (0: every item), and
// returns at most limit. Errors: page's.
func collect[T any](ctx context.Context, limit int, page func(ctx context.Context, size int32, token string) ([]T, string, error)) ([]T, error) {
	var all []T
	token := ""
	for {
		size := int32(listPageSize)
		if limit > 0 {
			size = int32(min(limit-len(all), listPageSize))
		}
		items, next, err := page(ctx, size, token)
		if err != nil {
			return nil, err
		}
		all = append(all, items...)
		if token = next; token == "" || limit > 0 && len(all) >= limit {
			break
		}
	}
	if limit > 0 && len(all) > limit {
		all = all[:limit]
	}
	return all, nil
}

// show prints m as one JSON object with -o json, else as table prints it.
func (s *session) show(m proto.Message, table func() error) error {
	if s.out.json {
		return s.out.writeProto(m)
	}
	return table()
}

// showList prints ms as one JSON array with -o json; else, when ms is
// empty, the note none on stderr, or the rows as table prints them.
func showList[M proto.Message](s *session, ms []M, none string, table func() error) error {
	switch {
	case s.out.json:
		return writeProtoList(s.out, ms)
	case len(ms) == 0:
		s.out.note("%s", none)
		return nil
	}
	return table()
}

// collection reads one collection by id.
func (s *session) collection(ctx context.Context, id string) (*compactorv1.Collection, error) {
	res, err := unary(ctx, s, s.c.collection.GetCollection, &compactorv1.GetCollectionRequest{Id: id})
	if err != nil {
		return nil, err
	}
	return res.GetCollection(), nil
}

// interrupted reports whether err comes from the command's context ending
// (Ctrl-C), as opposed to a call failing.
func interrupted(ctx context.Context, err error) bool {
	return ctx.Err() != nil && (errors.Is(err, context.Canceled) || connect.CodeOf(err) == connect.CodeCanceled)
}

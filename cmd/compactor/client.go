package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"
)

// addClientCommands adds the commands that control a running server:
// compact, jobs, job, watch, cancel, collections, push and get. Each talks to
// --addr over --protocol and prints in the --output format.
//
// Exit status of every client command: 0 on success; 1 when a call fails
// (the error is printed as "compactor: <code>: <message>", for example
// "compactor: not_found: collection … not found"), when a waited-for job
// ends FAILED or CANCELLED, or for bad input; 2 for a usage error (unknown
// flag, wrong arguments, a bad --output or --protocol value); 130 when
// interrupted while `compact --wait` or `push` was in progress.
func addClientCommands(root *cobra.Command, g *globals) {
	cmds := []*cobra.Command{
		newCompactCmd(g),
		newJobsCmd(g),
		newJobCmd(g),
		newWatchCmd(g),
		newCancelCmd(g),
		newCollectionsCmd(g),
		newPushCmd(g),
		newGetCmd(g),
		newNodesCmd(g),
		newPauseCmd(g),
		newResumeCmd(g),
		newPlanCmd(g),
		newThrottleCmd(g),
	}
	for _, c := range cmds {
		markUsage(c)
		root.AddCommand(c)
	}
}

// markUsage makes flag and argument errors of cmd and its subcommands usage
// errors (exit status 2) and adds the output help.
func markUsage(cmd *cobra.Command) {
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usageError(c, err)
	})
	if cmd.Args != nil {
		args := cmd.Args
		cmd.Args = func(c *cobra.Command, a []string) error {
			if err := args(c, a); err != nil {
				return usageError(c, err)
			}
			return nil
		}
	}
	if cmd.Runnable() {
		cmd.Long += "\n" + outputHelp
	}
	for _, sub := range cmd.Commands() {
		markUsage(sub)
	}
}

// usageError is err with exit status 2 and the command's usage line.
func usageError(cmd *cobra.Command, err error) error {
	return &exitError{code: 2, err: fmt.Errorf("%w\nusage: %s (see --help)", err, cmd.UseLine())}
}

// cliSession is what a client command runs with: its clients and its output.
type cliSession struct {
	g   *globals
	c   *clients
	out *output
}

// newSession validates the client flags (a bad one is a usage error) and
// builds the clients.
func newSession(cmd *cobra.Command, g *globals) (*cliSession, error) {
	c, err := g.connect()
	if err != nil {
		return nil, usageError(cmd, err)
	}
	return &cliSession{g: g, c: c, out: newOutput(g)}, nil
}

// callUnary calls f with a context bounded by --timeout.
func callUnary[T any](ctx context.Context, s *cliSession, f func(context.Context) (*T, error)) (*T, error) {
	cctx, cancel := s.g.callCtx(ctx)
	defer cancel()
	return f(cctx)
}

// interrupted reports whether err comes from the command's context ending
// (Ctrl-C), as opposed to a call failing.
func interrupted(ctx context.Context, err error) bool {
	return ctx.Err() != nil && (errors.Is(err, context.Canceled) || connect.CodeOf(err) == connect.CodeCanceled)
}

// retryDelay is the wait before retry n (1-based): first, doubled each time,
// capped at max.
func retryDelay(n int, first, max time.Duration) time.Duration {
	d := first
	for i := 1; i < n && d < max; i++ {
		d *= 2
	}
	return min(d, max)
}

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// connectionHint adds, to an error that says the server at addr could not be
// reached (refused, unresolvable, timed out dialling), the address tried and
// how to give another. Other errors are returned as they are.
func connectionHint(err error, addr string) error {
	var op *net.OpError
	var dns *net.DNSError
	if errors.As(err, &op) && op.Op == "dial" || errors.As(err, &dns) {
		return fmt.Errorf("%w\nno compactor answered at %s: give its address with --addr or the COMPACTOR_ADDR environment variable", err, addr)
	}
	return err
}

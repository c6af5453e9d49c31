package cli

import (
	"context"
	"strings"
	"time"

	"github.com/spf13/cobra"

	compactorv1 "github.com/compactorhq/compactor/gen/compactor/v1"
)

// Shell completion (cobra's `compactor completion bash|zsh|fish|powershell`)
// offers the values of the enum flags, and collection names and ids or job
// ids asked of the server at --addr. It never offers files: a command that
// takes none says so. A server that does not answer within
// completionTimeout, or an error of any kind, gives no completions and no
// message (a completion must not print into the user's command line).

// completionTimeout bounds the calls of one completion.
const completionTimeout = 2 * time.Second

// fixedCompletion completes one of values.
func fixedCompletion(values ...string) cobra.CompletionFunc {
	return func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
		return values, cobra.ShellCompDirectiveNoFileComp
	}
}

// completionSession is a session for a completion: the flags given so far
// (and their COMPACTOR_* fallbacks), a short timeout; nil when the flags are
// bad.
func completionSession(cmd *cobra.Command, g *globals) (*session, context.Context, context.CancelFunc) {
	if EnvFallback(cmd) != nil {
		return nil, nil, nil
	}
	c, err := g.connect(cmd)
	if err != nil {
		return nil, nil, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), completionTimeout)
	if cmd.Context() != nil {
		ctx, cancel = context.WithTimeout(cmd.Context(), completionTimeout)
	}
	return &session{g: g, c: c, out: newOutput(g)}, ctx, cancel
}

// completeCollections completes collection names and ids: for up to n
// arguments (n < 0: any number, or a flag's value); a collection already
// given as an argument is not offered again.
func completeCollections(g *globals, n int) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if n >= 0 && len(args) >= n {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		s, ctx, cancel := completionSession(cmd, g)
		if s == nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		defer cancel()
		all, err := s.listCollections(ctx)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return collectionCompletions(all, args, toComplete), cobra.ShellCompDirectiveNoFileComp
	}
}

// collectionCompletions are the names and ids of all that start with
// toComplete and are not in given, each described by the other.
func collectionCompletions(all []*compactorv1.Collection, given []string, toComplete string) []cobra.Completion {
	seen := map[string]bool{}
	for _, a := range given {
		seen[a] = true
	}
	var out []cobra.Completion
	for _, c := range all {
		if seen[c.GetName()] || seen[c.GetId()] {
			continue
		}
		if c.GetName() != "" && strings.HasPrefix(c.GetName(), toComplete) && !strings.ContainsAny(c.GetName(), "\t\n") {
			out = append(out, cobra.CompletionWithDesc(c.GetName(), c.GetId()))
		}
		if strings.HasPrefix(c.GetId(), strings.ToLower(toComplete)) {
			out = append(out, cobra.CompletionWithDesc(c.GetId(), safeText(c.GetName())))
		}
	}
	return out
}

// completeJobs completes the id of a job for a command's one argument: the
// most recent jobs, described by collection and state.
func completeJobs(g *globals) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		s, ctx, cancel := completionSession(cmd, g)
		if s == nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		defer cancel()
		res, err := unary(ctx, s, s.c.compaction.ListCompactions, &compactorv1.ListCompactionsRequest{PageSize: 100})
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []cobra.Completion
		for _, j := range res.GetJobs() {
			if strings.HasPrefix(j.GetId(), strings.ToLower(toComplete)) {
				out = append(out, cobra.CompletionWithDesc(j.GetId(), collectionLabel(j)+" "+stateName(j.GetState())))
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

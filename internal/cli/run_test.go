package cli

import (
	"context"
	"io"

	"github.com/spf13/cobra"
)

// run executes a command line the way cmd/compactor does, with the client
// commands only.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	s := Streams{In: stdin, Out: stdout, Err: stderr}
	return Execute(ctx, newTestRoot(s), args, s)
}

func newTestRoot(s Streams) *cobra.Command {
	root := &cobra.Command{
		Use:               "compactor",
		SilenceUsage:      true,
		SilenceErrors:     true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error { return EnvFallback(cmd) },
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return UsageError(c, err) })
	RegisterRootFlags(root)
	root.AddCommand(Commands(s)...)
	return root
}

func exitCode(err error) int { return ExitCode(err) }

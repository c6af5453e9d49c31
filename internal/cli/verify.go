package cli

import (
	"context"
	"fmt"
	"time"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	compactorv1 "github.com/compactorhq/compactor/gen/compactor/v1"
)

// verifyOptions are the settings of one verify request.
type verifyOptions struct {
	collection string // id or name
	version    int64
	replay     bool
	reason     string
	wait       bool
	rc         reconnect
}

func (o *verifyOptions) validate() error {
	if o.version < 0 {
		return fmt.Errorf("--version must not be negative, got %d (0: the current version)", o.version)
	}
	return o.rc.validate()
}

func newVerifyCmd(g *globals) *cobra.Command {
	var opts verifyOptions
	cmd := &cobra.Command{
		Use:   "verify COLLECTION [--version N] [--replay] [--reason TEXT] [--wait [--reconnect-timeout D]]",
		Short: "Verify a kept segment version: every blob re-read, checksums, digests and the manifest",
		Long: `Queue a job of kind verify for COLLECTION (an id or a name): it re-reads every
blob of a kept segment version (the current one, or --version N) and checks the
manifest, each blob's SHA-256 checksum, each block's and delta's record count
and digest, and the version's count and digest (docs/semantics.md, "Verified
versions"). With --replay it also re-materializes the version from the previous
kept version and the log between them, and compares the digests. It commits
nothing. The job runs in the queue with the compactions, one job of a
collection at a time; "compactor jobs", "watch" and the status page show it,
"cancel" stops it. A collection with a verify job queued already gets that job
back, with its own parameters.

With --wait, follow the job to its end with live progress on stderr (the
phases "verifying", with the blobs checked, and "replaying"), then print a
summary: the job's note says what was checked, or its error ("verification
failed: ...") names each blob that is wrong. Exit status 1 when the request
fails or the job ends FAILED (the version does not verify) or CANCELLED; 130
when interrupted while waiting (the job continues on the server).

-o json prints {"jobs": [{"job": Job, "created": bool}]}, with the job as it
finished when --wait is given.`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeCollections(g, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.collection = args[0]
			if err := opts.validate(); err != nil {
				return UsageError(cmd, err)
			}
			s, err := newSession(cmd, g)
			if err != nil {
				return err
			}
			return s.verify(cmd.Context(), opts)
		},
	}
	f := cmd.Flags()
	f.Int64Var(&opts.version, "version", 0, "the kept segment version to verify (0: the current one)")
	f.BoolVar(&opts.replay, "replay", false, "also re-materialize the version from the previous kept version and the log, and compare the digests")
	f.StringVar(&opts.reason, "reason", "", "why, kept on the job")
	f.BoolVar(&opts.wait, "wait", false, "wait until the job has finished, showing progress; exit 1 when the version fails verification")
	opts.rc.register(f, 10*time.Minute)
	for _, name := range []string{"version", "reason"} {
		_ = cmd.RegisterFlagCompletionFunc(name, cobra.NoFileCompletions)
	}
	return cmd
}

// verify requests the verification and, with --wait, follows it.
func (s *session) verify(ctx context.Context, opts verifyOptions) error {
	id, err := s.resolveCollection(ctx, opts.collection)
	if err != nil {
		return err
	}
	res, err := callUnary(ctx, s, func(ctx context.Context) (*connect.Response[compactorv1.VerifyCollectionResponse], error) {
		return s.c.compaction.VerifyCollection(ctx, connect.NewRequest(&compactorv1.VerifyCollectionRequest{
			CollectionId: id, Version: opts.version, Replay: opts.replay, Reason: opts.reason,
		}))
	})
	if err != nil {
		return err
	}
	return s.showJob(ctx, res.Msg.GetJob(), res.Msg.GetCreated(), opts.wait, opts.rc)
}

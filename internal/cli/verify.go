package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	compactorv1 "github.com/compactorhq/compactor/gen/compactor/v1"
)

func newVerifyCmd(g *globals) *cobra.Command {
	var (
		r       jobRequest
		version int64
		replay  bool
	)
	cmd := queueJobCmd(g, &cobra.Command{
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
	}, &r, "wait until the job has finished, showing progress; exit 1 when the version fails verification", func() error {
		if version < 0 {
			return fmt.Errorf("--version must not be negative, got %d (0: the current version)", version)
		}
		return nil
	}, func(ctx context.Context, s *session, id string) (*compactorv1.Job, bool, error) {
		res, err := unary(ctx, s, s.c.compaction.VerifyCollection, &compactorv1.VerifyCollectionRequest{
			CollectionId: id, Version: version, Replay: replay, Reason: r.reason,
		})
		return res.GetJob(), res.GetCreated(), err
	})
	f := cmd.Flags()
	f.Int64Var(&version, "version", 0, "the kept segment version to verify (0: the current one)")
	f.BoolVar(&replay, "replay", false, "also re-materialize the version from the previous kept version and the log, and compare the digests")
	_ = cmd.RegisterFlagCompletionFunc("version", cobra.NoFileCompletions)
	return cmd
}

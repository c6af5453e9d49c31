package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	compactorv1 "github.com/compactorhq/compactor/gen/compactor/v1"
)

func newIndexCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "index",
		Short: "Work on a collection's vector index",
		Long:  `Work on a collection's vector index. See "compactor index rebuild --help".`,
		Args:  cobra.NoArgs,
		// Runnable, so that an unknown subcommand is a usage error, not
		// this help with exit status 0.
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newIndexRebuildCmd(g))
	return cmd
}

func newIndexRebuildCmd(g *globals) *cobra.Command {
	var (
		r                 jobRequest
		m, efConstruction int
	)
	cmd := queueJobCmd(g, &cobra.Command{
		Use:   "rebuild COLLECTION [--m N] [--ef-construction N] [--reason TEXT] [--wait [--reconnect-timeout D]]",
		Short: "Rebuild a collection's vector index from its blocks, optionally with new parameters",
		Long: `Queue a job of kind index rebuild for COLLECTION (an id or a name): it builds
a fresh vector index from every record of the current segment version, read
from its blocks (so a damaged index is repaired), and commits a new version
with the same blocks and the new index. --m and --ef-construction build it with
new HNSW parameters, which become the collection's when the job commits (0 or
absent: the collection's). The job runs in the queue with the compactions, one
job of a collection at a time; "compactor jobs", "watch" and the status page
show it, "cancel" stops it (the previous index stays current). A collection
with a rebuild queued already gets that job back, with its own parameters.

With --wait, follow the job to its end with live progress on stderr (the
phase "indexing", with the vectors inserted), then print a summary; the
reconnection rules of "compact --wait" apply. Exit status 1 when the request
fails or the job ends FAILED or CANCELLED; 130 when interrupted while waiting
(the job continues on the server).

-o json prints {"jobs": [{"job": Job, "created": bool}]}, with the job as it
finished when --wait is given.`,
	}, &r, "wait until the job has finished, showing progress", func() error {
		switch {
		case m < 0:
			return fmt.Errorf("--m must not be negative, got %d (0: the collection's)", m)
		case efConstruction < 0:
			return fmt.Errorf("--ef-construction must not be negative, got %d (0: the collection's)", efConstruction)
		}
		return nil
	}, func(ctx context.Context, s *session, id string) (*compactorv1.Job, bool, error) {
		res, err := unary(ctx, s, s.c.compaction.RebuildIndex, &compactorv1.RebuildIndexRequest{
			CollectionId: id, M: int32(m), EfConstruction: int32(efConstruction), Reason: r.reason,
		})
		return res.GetJob(), res.GetCreated(), err
	})
	f := cmd.Flags()
	f.IntVar(&m, "m", 0, "HNSW neighbours per node and layer of the new index, 2 to 100 (0: the collection's)")
	f.IntVar(&efConstruction, "ef-construction", 0, "candidate list size while building, m to 10000 (0: the collection's)")
	for _, name := range []string{"m", "ef-construction"} {
		_ = cmd.RegisterFlagCompletionFunc(name, cobra.NoFileCompletions)
	}
	return cmd
}

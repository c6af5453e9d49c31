package cli

import (
	"context"
	"fmt"
	"time"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	compactorv1 "github.com/compactorhq/compactor/gen/compactor/v1"
)

// rebuildOptions are the settings of one index rebuild.
type rebuildOptions struct {
	collection        string // id or name
	m, efConstruction int
	reason            string
	wait              bool
	rc                reconnect
}

func (o *rebuildOptions) validate() error {
	switch {
	case o.m < 0:
		return fmt.Errorf("--m must not be negative, got %d (0: the collection's)", o.m)
	case o.efConstruction < 0:
		return fmt.Errorf("--ef-construction must not be negative, got %d (0: the collection's)", o.efConstruction)
	}
	return o.rc.validate()
}

func newIndexCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "index",
		Short: "Work on a collection's vector index",
		Long:  `Work on a collection's vector index. See "compactor index rebuild --help".`,
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newIndexRebuildCmd(g))
	return cmd
}

func newIndexRebuildCmd(g *globals) *cobra.Command {
	var opts rebuildOptions
	cmd := &cobra.Command{
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
			return s.rebuildIndex(cmd.Context(), opts)
		},
	}
	f := cmd.Flags()
	f.IntVar(&opts.m, "m", 0, "HNSW neighbours per node and layer of the new index, 2 to 100 (0: the collection's)")
	f.IntVar(&opts.efConstruction, "ef-construction", 0, "candidate list size while building, m to 10000 (0: the collection's)")
	f.StringVar(&opts.reason, "reason", "", "why, kept on the job")
	f.BoolVar(&opts.wait, "wait", false, "wait until the job has finished, showing progress")
	opts.rc.register(f, 10*time.Minute)
	for _, name := range []string{"m", "ef-construction", "reason"} {
		_ = cmd.RegisterFlagCompletionFunc(name, cobra.NoFileCompletions)
	}
	return cmd
}

// rebuildIndex requests the rebuild and, with --wait, follows it.
func (s *session) rebuildIndex(ctx context.Context, opts rebuildOptions) error {
	id, err := s.resolveCollection(ctx, opts.collection)
	if err != nil {
		return err
	}
	res, err := callUnary(ctx, s, func(ctx context.Context) (*connect.Response[compactorv1.RebuildIndexResponse], error) {
		return s.c.compaction.RebuildIndex(ctx, connect.NewRequest(&compactorv1.RebuildIndexRequest{
			CollectionId: id, M: int32(opts.m), EfConstruction: int32(opts.efConstruction), Reason: opts.reason,
		}))
	})
	if err != nil {
		return err
	}
	return s.showJob(ctx, res.Msg.GetJob(), res.Msg.GetCreated(), opts.wait, opts.rc)
}

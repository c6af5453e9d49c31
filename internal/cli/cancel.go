package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	compactorv1 "github.com/compactorhq/compactor/gen/compactor/v1"
)

func newCancelCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "cancel ID",
		Short: "Cancel a compaction job",
		Long: `Cancel a compaction job (ID: its id, or a unique start of it of at least 4
characters, as "compactor job" takes). A QUEUED job ends CANCELLED at once; a RUNNING job stops
at its next batch boundary, commits nothing and removes what it wrote (until
then it shows "cancel requested"). A finished job cannot be cancelled
(failed_precondition). -o json prints the Job object after the request.`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeJobs(g),
		RunE: clientRun(g, nil, func(ctx context.Context, s *session, args []string) error {
			res, err := unary(ctx, s, s.c.compaction.CancelCompaction, &compactorv1.CancelCompactionRequest{JobId: args[0]})
			if err != nil {
				return err
			}
			j := res.GetJob()
			return s.show(j, func() error {
				if j.GetState() == compactorv1.JobState_JOB_STATE_CANCELLED {
					fmt.Fprintf(s.out.w, "cancelled job %s (collection %s)\n", j.GetId(), collectionLabel(j))
				} else {
					fmt.Fprintf(s.out.w, "cancel requested: job %s (collection %s) is %s and stops at its next batch boundary\n",
						j.GetId(), collectionLabel(j), stateName(j.GetState()))
				}
				return nil
			})
		}),
	}
}

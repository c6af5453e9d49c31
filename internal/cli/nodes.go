package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	compactorv1 "github.com/compactorhq/compactor/gen/compactor/v1"
)

func newNodesCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "nodes",
		Aliases: []string{"node"},
		Short:   "List the replicas of the server that share one catalog",
		Long: `List the replicas of compactor serve registered in the catalog, by name: each
one's address, version, start and last heartbeat. A replica that missed three
heartbeats is shown as gone; its running jobs are taken over by the others
once their lease expires. -o json prints an array of Node objects.`,
		Args: cobra.NoArgs,
		RunE: clientRun(g, nil, func(ctx context.Context, s *session, _ []string) error {
			res, err := unary(ctx, s, s.c.compaction.ListNodes, &compactorv1.ListNodesRequest{})
			if err != nil {
				return err
			}
			nodes := res.GetNodes()
			return showList(s, nodes, "no nodes", func() error {
				tw := s.out.table()
				fmt.Fprintln(tw, "NODE\tSTATE\tADDRESS\tVERSION\tSTARTED\tLAST HEARTBEAT")
				for _, n := range nodes {
					state := "alive"
					if !n.GetAlive() {
						state = "gone"
					}
					name := safeText(n.GetName())
					if n.GetSelf() {
						name += " (answered)"
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", name, state, safeText(n.GetAddress()), safeText(n.GetVersion()),
						s.out.fmtTime(n.GetStartTime()), s.out.fmtTime(n.GetHeartbeatTime()))
				}
				return tw.Flush()
			})
		}),
	}
}

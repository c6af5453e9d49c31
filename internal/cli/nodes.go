package cli

import (
	"context"
	"fmt"

	"connectrpc.com/connect"
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
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := newSession(cmd, g)
			if err != nil {
				return err
			}
			res, err := callUnary(cmd.Context(), s, func(ctx context.Context) (*connect.Response[compactorv1.ListNodesResponse], error) {
				return s.c.compaction.ListNodes(ctx, connect.NewRequest(&compactorv1.ListNodesRequest{}))
			})
			if err != nil {
				return err
			}
			nodes := res.Msg.GetNodes()
			if s.out.json {
				return writeProtoList(s.out, nodes)
			}
			if len(nodes) == 0 {
				s.out.note("no nodes")
				return nil
			}
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
		},
	}
}

package cli

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/user"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/durationpb"

	compactorv1 "github.com/compactorhq/compactor/gen/compactor/v1"
	"github.com/compactorhq/compactor/internal/format"
)

// defaultOperator names who runs the CLI for pauses: user@host.
func defaultOperator() string {
	name := "unknown"
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	if h, err := os.Hostname(); err == nil && h != "" {
		name += "@" + h
	}
	return name
}

func newPauseCmd(g *globals) *cobra.Command {
	var reason, operator string
	cmd := &cobra.Command{
		Use:   "pause [COLLECTION]",
		Short: "Pause automatic compaction of every collection, or of one",
		Long: `Pause automatic compaction: of every collection without an argument, of one
collection with its id or name. The scheduler skips what is paused from its next run;
queued and running jobs go on (cancel them to stop them), and one-off
compactions ('compactor compact') still run. The pause is kept in the catalog:
it survives restarts and holds for every replica. 'compactor resume' ends it.
-o json prints the PauseCompactionsResponse.`,
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: completeCollections(g, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := newSession(cmd, g)
			if err != nil {
				return err
			}
			req := &compactorv1.PauseCompactionsRequest{Reason: reason, Operator: operator}
			if req.CollectionId, err = s.resolveOptionalCollection(cmd.Context(), firstArg(args)); err != nil {
				return err
			}
			res, err := callUnary(cmd.Context(), s, func(ctx context.Context) (*connect.Response[compactorv1.PauseCompactionsResponse], error) {
				return s.c.control.PauseCompactions(ctx, connect.NewRequest(req))
			})
			if err != nil {
				return err
			}
			if s.out.json {
				return s.out.writeProto(res.Msg)
			}
			return s.printPause(res.Msg.GetPause(), res.Msg.GetCollection())
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why, kept with the pause and shown on the page (at most 1,024 bytes)")
	cmd.Flags().StringVar(&operator, "operator", defaultOperator(), "who pauses, kept with the pause")
	return cmd
}

func newResumeCmd(g *globals) *cobra.Command {
	var operator string
	cmd := &cobra.Command{
		Use:   "resume [COLLECTION]",
		Short: "Resume automatic compaction paused by 'compactor pause'",
		Long: `Resume automatic compaction: the global pause without an argument (the pauses
of single collections stay), one collection's pause with its id or name.
-o json prints the ResumeCompactionsResponse.`,
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: completeCollections(g, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := newSession(cmd, g)
			if err != nil {
				return err
			}
			req := &compactorv1.ResumeCompactionsRequest{Operator: operator}
			if req.CollectionId, err = s.resolveOptionalCollection(cmd.Context(), firstArg(args)); err != nil {
				return err
			}
			res, err := callUnary(cmd.Context(), s, func(ctx context.Context) (*connect.Response[compactorv1.ResumeCompactionsResponse], error) {
				return s.c.control.ResumeCompactions(ctx, connect.NewRequest(req))
			})
			if err != nil {
				return err
			}
			if s.out.json {
				return s.out.writeProto(res.Msg)
			}
			return s.printPause(res.Msg.GetPause(), res.Msg.GetCollection())
		},
	}
	cmd.Flags().StringVar(&operator, "operator", defaultOperator(), "who resumes, for the server's log")
	return cmd
}

// printPause prints the global pause and, when given, a collection's.
func (s *session) printPause(p *compactorv1.PauseState, c *compactorv1.Collection) error {
	rows := [][2]string{{"Automatic compaction", pauseText(p.GetPaused(), p.GetReason(), p.GetPausedBy(), s.out.fmtTime(p.GetPauseTime()))}}
	if c != nil {
		rows = append(rows, [2]string{"Collection " + safeText(ellipsize(c.GetName(), 40)),
			pauseText(c.GetPaused(), c.GetPauseReason(), c.GetPausedBy(), s.out.fmtTime(c.GetPauseTime()))})
	}
	return s.out.kv(rows)
}

func pauseText(paused bool, reason, by, since string) string {
	if !paused {
		return "running"
	}
	text := "paused since " + since
	if by != "" {
		text += " by " + safeText(by)
	}
	if reason != "" {
		text += ": " + safeText(ellipsize(reason, 80))
	}
	return text
}

func newPlanCmd(g *globals) *cobra.Command {
	var estimate, all bool
	cmd := &cobra.Command{
		Use:   "plan",
		Short: "Show what the scheduler would compact on its next run, and why",
		Long: `Show what the scheduler would do on its next run: the collections it would
compact, in the order it would queue them, with the threshold each reached;
and the collections it skips with what holds them back (paused, dead-lettered,
backing off until a time, a job queued or running, under the thresholds).
Nothing is written. --estimate adds, for each collection it would compact, the
records, blocks and bytes its job would rewrite (from the manifest and the
log). Collections with nothing to compact are left out unless --all.
-o json prints the PlanCompactionsResponse.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := newSession(cmd, g)
			if err != nil {
				return err
			}
			res, err := callUnary(cmd.Context(), s, func(ctx context.Context) (*connect.Response[compactorv1.PlanCompactionsResponse], error) {
				return s.c.control.PlanCompactions(ctx, connect.NewRequest(&compactorv1.PlanCompactionsRequest{Estimate: estimate}))
			})
			if err != nil {
				return err
			}
			if s.out.json {
				return s.out.writeProto(res.Msg)
			}
			p := res.Msg
			if p.GetPause().GetPaused() {
				fmt.Fprintf(s.out.w, "Automatic compaction is %s.\n\n", pauseText(true, p.GetPause().GetReason(), p.GetPause().GetPausedBy(), s.out.fmtTime(p.GetPause().GetPauseTime())))
			}
			tw := s.out.table()
			header := "COLLECTION\tDECISION\tBACKLOG\tWHY"
			if estimate {
				header += "\tRECORDS\tBLOCKS TO REWRITE\tBYTES TO REWRITE\tINDEX"
			}
			fmt.Fprintln(tw, header)
			shown := 0
			for _, e := range p.GetEntries() {
				if e.GetDecision() == compactorv1.PlanDecision_PLAN_DECISION_EMPTY && !all {
					continue
				}
				shown++
				decision := strings.ToLower(strings.TrimPrefix(e.GetDecision().String(), "PLAN_DECISION_"))
				decision = strings.ReplaceAll(decision, "_", " ")
				why := e.GetReason()
				if j := e.GetIndexRebuild(); j != nil {
					why += fmt.Sprintf("; index rebuild %.8s %s", j.GetId(), strings.ToLower(stateName(j.GetState())))
				}
				line := fmt.Sprintf("%s\t%s\t%d\t%s", safeText(ellipsize(e.GetCollectionName(), 40)), decision, e.GetBacklog(), safeText(ellipsize(why, 100)))
				if estimate {
					if x := e.GetEstimate(); x != nil {
						line += fmt.Sprintf("\t%d\t%d of %d\t%s\t%s", x.GetRecords(), x.GetBlocksToRewrite(), x.GetBlocksTotal(), format.Bytes(x.GetBytesToRewrite()), indexWork(x))
					} else if e.GetEstimateError() != "" {
						line += "\t-\t-\t" + safeText(ellipsize("estimate failed: "+e.GetEstimateError(), 60)) + "\t-"
					} else {
						line += "\t-\t-\t-\t-"
					}
				}
				fmt.Fprintln(tw, line)
			}
			if shown == 0 {
				tw.Flush()
				s.out.note("nothing to compact in any collection")
				return nil
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&estimate, "estimate", false, "estimate the records, blocks and bytes of each planned job (reads manifests and log slices)")
	cmd.Flags().BoolVar(&all, "all", false, "also list collections with nothing to compact")
	return cmd
}

func newCollectionsSetCmd(g *globals) *cobra.Command {
	var minSize int64
	var maxAge time.Duration
	cmd := &cobra.Command{
		Use:   "set COLLECTION",
		Short: "Set a collection's scheduler thresholds",
		Long: `Set a collection's (an id or a name) overrides of the scheduler's thresholds: --min-compaction-size
(records) and --max-uncompacted-age (a duration, at least 1s). 0, the default of
each flag, inherits the server's flag. Both are replaced at once.
-o json prints the Collection.`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeCollections(g, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case minSize < 0:
				return UsageError(cmd, fmt.Errorf("--min-compaction-size must not be negative, got %d", minSize))
			case maxAge < 0:
				return UsageError(cmd, fmt.Errorf("--max-uncompacted-age must not be negative, got %s", maxAge))
			}
			s, err := newSession(cmd, g)
			if err != nil {
				return err
			}
			id, err := s.resolveCollection(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			req := &compactorv1.UpdateCollectionSettingsRequest{CollectionId: id, MinCompactionSize: minSize}
			if maxAge != 0 {
				req.MaxUncompactedAge = durationpb.New(maxAge)
			}
			res, err := callUnary(cmd.Context(), s, func(ctx context.Context) (*connect.Response[compactorv1.UpdateCollectionSettingsResponse], error) {
				return s.c.control.UpdateCollectionSettings(ctx, connect.NewRequest(req))
			})
			if err != nil {
				return err
			}
			return s.printCollection(res.Msg.GetCollection())
		},
	}
	cmd.Flags().Int64Var(&minSize, "min-compaction-size", 0, "backlog (records) at which the scheduler compacts this collection; 0: the server's")
	cmd.Flags().DurationVar(&maxAge, "max-uncompacted-age", 0, "age of the oldest uncompacted record at which the scheduler compacts this collection; 0: the server's")
	return cmd
}

func newThrottleCmd(g *globals) *cobra.Command {
	var operator string
	cmd := &cobra.Command{
		Use:   "throttle [BYTES_PER_SECOND]",
		Short: "Show or set the cap on bytes per second written by compactions",
		Long: `Without an argument, show the cap on bytes per second that compactions write
on the node that answers. With one, set the cap for every node (each applies
it within a second, also to running compactions), like Cassandra's
setcompactionthroughput: a size per second such as 64MiB, 500MB or 1.5GB; 0
removes the cap set here, and each node's --max-throughput applies again.
-o json prints the ThroughputState with every field, 0 and empty ones
included: {"bytes_per_second": "0", "override_bytes_per_second": "0",
"set_by": "", "set_time": null} when no cap is set.`,
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := newSession(cmd, g)
			if err != nil {
				return err
			}
			var tp *compactorv1.ThroughputState
			if len(args) == 0 {
				res, err := callUnary(cmd.Context(), s, func(ctx context.Context) (*connect.Response[compactorv1.GetControlsResponse], error) {
					return s.c.control.GetControls(ctx, connect.NewRequest(&compactorv1.GetControlsRequest{}))
				})
				if err != nil {
					return err
				}
				tp = res.Msg.GetThroughput()
			} else {
				n, err := humanize.ParseBytes(args[0])
				if err != nil || n > math.MaxInt64 {
					return UsageError(cmd, fmt.Errorf("%q is not a size per second (e.g. 64MiB, 500MB, 0)", args[0]))
				}
				res, err := callUnary(cmd.Context(), s, func(ctx context.Context) (*connect.Response[compactorv1.SetThroughputResponse], error) {
					return s.c.control.SetThroughput(ctx, connect.NewRequest(&compactorv1.SetThroughputRequest{BytesPerSecond: int64(n), Operator: operator}))
				})
				if err != nil {
					return err
				}
				tp = res.Msg.GetThroughput()
			}
			if s.out.json {
				if tp == nil {
					tp = &compactorv1.ThroughputState{}
				}
				return s.out.writeProtoState(tp)
			}
			inForce := "no cap"
			if b := tp.GetBytesPerSecond(); b > 0 {
				inForce = format.Rate(b)
			}
			override := "none (each node's --max-throughput applies)"
			if b := tp.GetOverrideBytesPerSecond(); b > 0 {
				override = format.Bytes(b) + "/s, set " + s.out.fmtTime(tp.GetSetTime())
				if by := tp.GetSetBy(); by != "" {
					override += " by " + safeText(by)
				}
			}
			return s.out.kv([][2]string{{"Cap in force", inForce}, {"Set for every node", override}})
		},
	}
	cmd.Flags().StringVar(&operator, "operator", defaultOperator(), "who sets the cap, kept with it")
	return cmd
}

// indexWork is the index column of a plan estimate: "off", "+12 -3
// vectors", or "full build (why)".
func indexWork(x *compactorv1.JobEstimate) string {
	switch {
	case !x.GetIndexed():
		return "off"
	case x.GetIndexFullBuild():
		return "full build (" + safeText(x.GetIndexFullBuildReason()) + ")"
	}
	return fmt.Sprintf("+%d -%d vectors", x.GetVectorsToInsert(), x.GetVectorsToDelete())
}

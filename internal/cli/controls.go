package cli

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/user"
	"strconv"
	"strings"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	compactorv1 "github.com/compactorhq/compactor/gen/compactor/v1"
	"github.com/compactorhq/compactor/internal/format"
	"github.com/compactorhq/compactor/internal/window"
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
		Use:   "pause [COLLECTION] [--reason TEXT] [--operator WHO]",
		Short: "Pause automatic compaction of every collection, or of one",
		Long: `Pause automatic compaction: of every collection without an argument, of one
collection with its id or name. The scheduler skips what is paused from its next run;
queued and running jobs go on (cancel them to stop them), and one-off
compactions ('compactor compact') still run. The pause is kept in the catalog:
it survives restarts and holds for every replica. 'compactor resume' ends it.
-o json prints the PauseCompactionsResponse.`,
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: completeCollections(g, 1),
		RunE: clientRun(g, nil, pauseRun(func(ctx context.Context, s *session, id string) (*compactorv1.PauseCompactionsResponse, error) {
			return unary(ctx, s, s.c.control.PauseCompactions, &compactorv1.PauseCompactionsRequest{CollectionId: id, Reason: reason, Operator: operator})
		})),
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why, kept with the pause and shown on the page (at most 1,024 bytes)")
	cmd.Flags().StringVar(&operator, "operator", defaultOperator(), "who pauses, kept with the pause")
	return cmd
}

func newResumeCmd(g *globals) *cobra.Command {
	var operator string
	cmd := &cobra.Command{
		Use:   "resume [COLLECTION] [--operator WHO]",
		Short: "Resume automatic compaction paused by 'compactor pause'",
		Long: `Resume automatic compaction: the global pause without an argument (the pauses
of single collections stay), one collection's pause with its id or name.
-o json prints the ResumeCompactionsResponse.`,
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: completeCollections(g, 1),
		RunE: clientRun(g, nil, pauseRun(func(ctx context.Context, s *session, id string) (*compactorv1.ResumeCompactionsResponse, error) {
			return unary(ctx, s, s.c.control.ResumeCompactions, &compactorv1.ResumeCompactionsRequest{CollectionId: id, Operator: operator})
		})),
	}
	cmd.Flags().StringVar(&operator, "operator", defaultOperator(), "who resumes, for the server's log")
	return cmd
}

// pauseAnswer is the answer of a pause or a resume.
type pauseAnswer interface {
	proto.Message
	GetPause() *compactorv1.PauseState
	GetCollection() *compactorv1.Collection
}

// pauseRun is the run of pause and resume: call pauses or resumes the
// collection of the optional argument (an id or a name; "": the global
// pause), and its answer is printed: -o json as it is, else the global
// pause and, when the answer has one, the collection's.
func pauseRun[R pauseAnswer](call func(ctx context.Context, s *session, id string) (R, error)) func(context.Context, *session, []string) error {
	return func(ctx context.Context, s *session, args []string) error {
		id, err := s.resolveOptionalCollection(ctx, firstArg(args))
		if err != nil {
			return err
		}
		res, err := call(ctx, s, id)
		if err != nil {
			return err
		}
		p, c := res.GetPause(), res.GetCollection()
		return s.show(res, func() error {
			rows := [][2]string{{"Automatic compaction", pauseText(p.GetPaused(), p.GetReason(), p.GetPausedBy(), s.out.fmtTime(p.GetPauseTime()))}}
			if c != nil {
				rows = append(rows, [2]string{"Collection " + safeText(ellipsize(c.GetName(), 40)),
					pauseText(c.GetPaused(), c.GetPauseReason(), c.GetPausedBy(), s.out.fmtTime(c.GetPauseTime()))})
			}
			return s.out.kv(rows)
		})
	}
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

// nextWindowText is a plan entry's window: "any time" without windows,
// "open, never closes" inside windows that chain all week (no end),
// "open until T" inside one, else "T1 - T2".
func (s *session) nextWindowText(e *compactorv1.PlanEntry) string {
	switch {
	case len(e.GetCompactionWindows()) == 0:
		return "any time"
	case e.GetWindowOpen() && e.GetNextWindowEnd() == nil:
		return "open, never closes"
	case e.GetWindowOpen():
		return "open until " + s.out.fmtTime(e.GetNextWindowEnd())
	}
	return s.out.fmtTime(e.GetNextWindowStart()) + " - " + s.out.fmtTime(e.GetNextWindowEnd())
}

func newPlanCmd(g *globals) *cobra.Command {
	var estimate, all bool
	cmd := &cobra.Command{
		Use:   "plan [--estimate] [--all]",
		Short: "Show what the scheduler would compact on its next run, and why",
		Long: `Show what the scheduler would do on its next run: the collections it would
compact, in the order it would queue them, with the threshold each reached;
and the collections it skips with what holds them back (paused, dead-lettered,
backing off until a time, outside its compaction windows, a job queued or
running, under the thresholds), each with its priority class, its freshness
debt (1 and more: an objective broken) and its next compaction window.
Nothing is written. --estimate prices, for each collection it would compact,
its job (from the manifest and the log): operation records read, blocks
rewritten of the version's, bytes read from and written to the blob store,
blob GETs and PUTs, write amplification (records written per operation
record), index work (+vectors inserted/-deleted, "full build" when one is
due) and the predicted duration from the throughput the answering node
measured (and the cap in force), then the totals. Collections with nothing
to compact are left out unless --all.
-o json prints the PlanCompactionsResponse.`,
		Args: cobra.NoArgs,
		RunE: clientRun(g, nil, func(ctx context.Context, s *session, _ []string) error {
			p, err := unary(ctx, s, s.c.control.PlanCompactions, &compactorv1.PlanCompactionsRequest{Estimate: estimate})
			if err != nil {
				return err
			}
			return s.show(p, func() error { return s.printPlan(p, estimate, all) })
		}),
	}
	cmd.Flags().BoolVar(&estimate, "estimate", false, "price each planned job: records, blocks, bytes read and written, blob calls, write amplification, index work and predicted duration (reads manifests and log slices)")
	cmd.Flags().BoolVar(&all, "all", false, "also list collections with nothing to compact")
	return cmd
}

// printPlan prints the plan's table: the collections with something to
// compact (all: every one), with the estimate's columns and the totals when
// estimated.
func (s *session) printPlan(p *compactorv1.PlanCompactionsResponse, estimate, all bool) error {
	if p.GetPause().GetPaused() {
		fmt.Fprintf(s.out.w, "Automatic compaction is %s.\n\n", pauseText(true, p.GetPause().GetReason(), p.GetPause().GetPausedBy(), s.out.fmtTime(p.GetPause().GetPauseTime())))
	}
	tw := s.out.table()
	header := "COLLECTION\tPRIORITY\tDECISION\tBACKLOG\tDEBT\tNEXT WINDOW\tWHY"
	if estimate {
		header += "\tRECORDS\tREWRITE\tREAD\tWRITE\tGETS\tPUTS\tW-AMP\tINDEX\tDURATION\tWINDOW"
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
		debt := "-"
		if e.GetFreshnessDebt() > 0 {
			debt = strconv.FormatFloat(e.GetFreshnessDebt(), 'f', 2, 64)
		}
		line := fmt.Sprintf("%s\t%s\t%s\t%d\t%s\t%s\t%s", safeText(ellipsize(e.GetCollectionName(), 40)), priorityName(e.GetPriority()), decision,
			e.GetBacklog(), debt, s.nextWindowText(e), safeText(ellipsize(why, 100)))
		if estimate {
			if x := e.GetEstimate(); x != nil {
				line += "\t" + estimateColumns(x)
			} else if e.GetEstimateError() != "" {
				line += "\t-\t-\t" + safeText(ellipsize("estimate failed: "+e.GetEstimateError(), 60)) + "\t-\t-\t-\t-\t-\t-\t-"
			} else {
				line += strings.Repeat("\t-", 10)
			}
		}
		fmt.Fprintln(tw, line)
	}
	if shown == 0 {
		tw.Flush()
		s.out.note("nothing to compact in any collection")
		return nil
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if t := p.GetTotals(); estimate && t != nil {
		fmt.Fprintln(s.out.w, totalsText(t, p.GetWorkers()))
	}
	return nil
}

func newCollectionsSetCmd(g *globals) *cobra.Command {
	var (
		minSize, objBacklog int64
		maxAge, objAge      time.Duration
		priority            string
		windows             []string
		noWindows           bool
		share               float64

		// Set by the checks.
		minGiven, ageGiven bool                                    // the thresholds' flags given
		policy             *compactorv1.SetCollectionPolicyRequest // nil: no policy flag given
	)
	cmd := &cobra.Command{
		Use:   "set COLLECTION [--min-compaction-size N] [--max-uncompacted-age D] [--priority P] [--compaction-window W]... [--no-compaction-windows] [--objective-max-age D] [--objective-max-backlog N] [--throughput-share F]",
		Short: "Set a collection's scheduler thresholds and scheduling policy",
		Long: `Set a collection's (an id or a name) scheduler settings.

Thresholds: --min-compaction-size (records) and --max-uncompacted-age (a
duration, at least 1s); 0, the default of each, inherits the server's flag.
Both are replaced at once when either is given (or when no policy flag is).

Scheduling policy (only the flags given change):
  --priority critical|normal|low    the claim order's class (one-offs go first)
  --compaction-window WINDOW        a window in which scheduled jobs may start,
                                    "[DAYS] HH:MM-HH:MM [ZONE]", e.g.
                                    "Mon-Fri 01:00-05:00 Europe/Berlin" (UTC by
                                    default); repeat for several; replaces them
  --no-compaction-windows           remove its windows (the server's apply)
  --objective-max-age D             objective: oldest uncompacted record at most D
  --objective-max-backlog N         objective: at most N uncompacted records
                                    (0 removes an objective)
  --throughput-share F              at most this fraction (0 < F <= 1) of the
                                    throughput cap while other compactions write
                                    on the node (0 removes it)
-o json prints the Collection.`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeCollections(g, 1),
		RunE: clientRun(g, func(cmd *cobra.Command, _ []string) error {
			f := cmd.Flags()
			minGiven, ageGiven = f.Changed("min-compaction-size"), f.Changed("max-uncompacted-age")
			policy = &compactorv1.SetCollectionPolicyRequest{}
			hasPolicy := false
			switch {
			case minSize < 0:
				return fmt.Errorf("--min-compaction-size must not be negative, got %d", minSize)
			case maxAge < 0:
				return fmt.Errorf("--max-uncompacted-age must not be negative, got %s", maxAge)
			case objAge < 0 || (objAge > 0 && objAge < time.Second):
				return fmt.Errorf("--objective-max-age must be 0 (none) or at least 1s, got %s", objAge)
			case objBacklog < 0:
				return fmt.Errorf("--objective-max-backlog must not be negative, got %d", objBacklog)
			case noWindows && len(windows) > 0:
				return errors.New("give --compaction-window or --no-compaction-windows, not both")
			}
			if f.Changed("priority") {
				p, ok := priorityByName[strings.ToLower(priority)]
				if !ok {
					return fmt.Errorf("--priority must be critical, normal or low, got %q", priority)
				}
				policy.Priority, hasPolicy = p, true
			}
			if len(windows) > 0 || noWindows {
				if _, err := window.ParseSet(windows); err != nil {
					return fmt.Errorf("--compaction-window: %w", err)
				}
				policy.CompactionWindows, hasPolicy = &compactorv1.CompactionWindows{Windows: windows}, true
			}
			if f.Changed("objective-max-age") {
				policy.ObjectiveMaxAge, hasPolicy = durationpb.New(objAge), true
			}
			if f.Changed("objective-max-backlog") {
				policy.ObjectiveMaxBacklog, hasPolicy = &objBacklog, true
			}
			if f.Changed("throughput-share") {
				if !(share >= 0 && share <= 1) {
					return fmt.Errorf("--throughput-share must be 0 (none) or a fraction in (0, 1], got %v", share)
				}
				policy.ThroughputShare, hasPolicy = &share, true
			}
			if !hasPolicy {
				policy = nil
			}
			if !minGiven && !ageGiven && policy == nil {
				return errors.New("give at least one setting to change (see --help)")
			}
			return nil
		}, onCollection(func(ctx context.Context, s *session, id string) error {
			var coll *compactorv1.Collection
			if minGiven || ageGiven {
				// UpdateCollectionSettings replaces both thresholds: the one
				// not given keeps the collection's current value.
				cur, err := s.collection(ctx, id)
				if err != nil {
					return err
				}
				if !minGiven {
					minSize = cur.GetMinCompactionSize()
				}
				if !ageGiven {
					maxAge = cur.GetMaxUncompactedAge().AsDuration()
				}
				req := &compactorv1.UpdateCollectionSettingsRequest{CollectionId: id, MinCompactionSize: minSize}
				if maxAge != 0 {
					req.MaxUncompactedAge = durationpb.New(maxAge)
				}
				res, err := unary(ctx, s, s.c.control.UpdateCollectionSettings, req)
				if err != nil {
					return err
				}
				coll = res.GetCollection()
			}
			if policy != nil {
				policy.CollectionId = id
				res, err := unary(ctx, s, s.c.control.SetCollectionPolicy, policy)
				if err != nil {
					return err
				}
				coll = res.GetCollection()
			}
			return s.printCollection(coll)
		})),
	}
	cmd.Flags().Int64Var(&minSize, "min-compaction-size", 0, "backlog (records) at which the scheduler compacts this collection; 0: the server's")
	cmd.Flags().DurationVar(&maxAge, "max-uncompacted-age", 0, "age of the oldest uncompacted record at which the scheduler compacts this collection; 0: the server's")
	cmd.Flags().StringVar(&priority, "priority", "", "priority class: critical, normal or low")
	cmd.Flags().StringArrayVar(&windows, "compaction-window", nil, `compaction window "[DAYS] HH:MM-HH:MM [ZONE]"; repeatable; replaces the collection's windows`)
	cmd.Flags().BoolVar(&noWindows, "no-compaction-windows", false, "remove the collection's compaction windows (the server's apply)")
	cmd.Flags().DurationVar(&objAge, "objective-max-age", 0, "freshness objective: the oldest uncompacted record at most this old; 0 removes it")
	cmd.Flags().Int64Var(&objBacklog, "objective-max-backlog", 0, "freshness objective: at most this many uncompacted records; 0 removes it")
	cmd.Flags().Float64Var(&share, "throughput-share", 0, "fraction (0 < F <= 1) of the throughput cap this collection's compactions may write while others write on the node; 0 removes it")
	_ = cmd.RegisterFlagCompletionFunc("priority", cobra.FixedCompletions([]string{"critical", "normal", "low"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

var priorityByName = map[string]compactorv1.PriorityClass{
	"critical": compactorv1.PriorityClass_PRIORITY_CLASS_CRITICAL,
	"normal":   compactorv1.PriorityClass_PRIORITY_CLASS_NORMAL,
	"low":      compactorv1.PriorityClass_PRIORITY_CLASS_LOW,
}

// priorityName is the CLI's name of a priority class.
func priorityName(p compactorv1.PriorityClass) string {
	for n, q := range priorityByName {
		if p == q {
			return n
		}
	}
	return "normal"
}

func newThrottleCmd(g *globals) *cobra.Command {
	var (
		operator string
		setCap   *compactorv1.SetThroughputRequest // nil: show the cap
	)
	cmd := &cobra.Command{
		Use:   "throttle [BYTES_PER_SECOND] [--operator WHO]",
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
		RunE: clientRun(g, func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return nil
			}
			n, err := humanize.ParseBytes(args[0])
			if err != nil || n > math.MaxInt64 {
				return fmt.Errorf("%q is not a size per second (e.g. 64MiB, 500MB, 0)", args[0])
			}
			setCap = &compactorv1.SetThroughputRequest{BytesPerSecond: int64(n), Operator: operator}
			return nil
		}, func(ctx context.Context, s *session, _ []string) error {
			var tp *compactorv1.ThroughputState
			if setCap == nil {
				res, err := unary(ctx, s, s.c.control.GetControls, &compactorv1.GetControlsRequest{})
				if err != nil {
					return err
				}
				tp = res.GetThroughput()
			} else {
				res, err := unary(ctx, s, s.c.control.SetThroughput, setCap)
				if err != nil {
					return err
				}
				tp = res.GetThroughput()
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
		}),
	}
	cmd.Flags().StringVar(&operator, "operator", defaultOperator(), "who sets the cap, kept with it")
	return cmd
}

// estimateColumns is a priced estimate's columns of the plan table.
func estimateColumns(x *compactorv1.JobEstimate) string {
	rewrite := fmt.Sprintf("%d of %d", x.GetBlocksToRewrite(), x.GetBlocksTotal())
	if x.GetDelta() {
		rewrite = "delta"
	}
	return fmt.Sprintf("%d\t%s\t%s\t%s\t%d\t%d\t%.2f\t%s\t%s\t%s", x.GetRecords(), rewrite,
		format.Bytes(x.GetBytesRead()), format.Bytes(x.GetBytesWritten()), x.GetBlobGets(), x.GetBlobPuts(),
		x.GetWriteAmplification(), indexWorkText(x), predictedText(x.GetPredictedDuration()), orDash(x.GetWindow()))
}

// indexWorkText is an estimate's index work: "off", or +inserted/-deleted
// vectors, with "full build (why)" when one is due.
func indexWorkText(x *compactorv1.JobEstimate) string {
	if !x.GetIndexed() {
		return "off"
	}
	t := fmt.Sprintf("+%d/-%d", x.GetVectorsToInsert(), x.GetVectorsToDelete())
	if x.GetIndexFullBuild() {
		t += " full build (" + safeText(x.GetIndexFullBuildReason()) + ")"
	}
	return t
}

// predictedText is a predicted duration, "unknown" when unset (nothing
// measured yet).
func predictedText(d *durationpb.Duration) string {
	if d == nil {
		return "unknown"
	}
	return format.Duration(d.AsDuration())
}

// totalsText is the plan's totals line.
func totalsText(t *compactorv1.PlanTotals, workers int32) string {
	dur := predictedText(t.GetPredictedDuration())
	if n := t.GetDurationUnknown(); n > 0 {
		dur += fmt.Sprintf(" (+%d unknown)", n)
	}
	return fmt.Sprintf("total: %d jobs, %d records, %d blocks rewritten, read %s, write %s, %d GETs, %d PUTs, write amplification %.2f, index +%d/-%d vectors, %s of job time (%d at once)",
		t.GetJobs(), t.GetRecords(), t.GetBlocksToRewrite(), format.Bytes(t.GetBytesRead()), format.Bytes(t.GetBytesWritten()),
		t.GetBlobGets(), t.GetBlobPuts(), t.GetWriteAmplification(), t.GetVectorsToInsert(), t.GetVectorsToDelete(), dur, workers)
}

func newCollectionsUndeadCmd(g *globals) *cobra.Command {
	var reason, operator string
	cmd := &cobra.Command{
		Use:     "undead COLLECTION [--reason TEXT] [--operator WHO]",
		Aliases: []string{"clear-dead-letter"},
		Short:   "Clear a collection's dead-letter state by hand",
		Long: `Clear the dead-letter state of a collection (an id or a name): its failure
and retry counts and the dead-letter mark, so that the scheduler compacts it
again from its next run. Who (--operator, default user@host) and why
(--reason) are kept in the collection's dead-letter history, which
'compactor collections get' shows. A collection that is not dead-lettered is
left as it is. -o json prints the ClearDeadLetterResponse.`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeCollections(g, 1),
		RunE: clientRun(g, nil, onCollection(func(ctx context.Context, s *session, id string) error {
			if operator == "" {
				operator = defaultOperator()
			}
			res, err := unary(ctx, s, s.c.control.ClearDeadLetter, &compactorv1.ClearDeadLetterRequest{CollectionId: id, Reason: reason, Operator: operator})
			if err != nil {
				return err
			}
			return s.show(res, func() error {
				c := res.GetCollection()
				if !res.GetCleared() {
					s.out.note("collection %s (%s) is not dead-lettered: nothing to clear", safeText(c.GetName()), c.GetId())
					return nil
				}
				fmt.Fprintf(s.out.w, "cleared the dead-letter state of collection %s (%s); the scheduler compacts it again from its next run\n", safeText(c.GetName()), c.GetId())
				return nil
			})
		})),
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why, kept in the collection's dead-letter history")
	cmd.Flags().StringVar(&operator, "operator", "", "who, kept likewise (default: user@host)")
	return cmd
}

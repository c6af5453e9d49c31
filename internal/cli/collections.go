package cli

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	compactorv1 "github.com/compactorhq/compactor/gen/compactor/v1"
)

func newCollectionsCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "collections",
		Aliases: []string{"collection"},
		Short:   "List, create, inspect and delete collections",
		Long: `List, create, inspect and delete collections. Without a subcommand: list.

A collection's backlog is the number of log records not yet compacted; its
records count is what its current segment version holds.`,
		Args: cobra.NoArgs,
		RunE: clientRun(g, nil, collectionsList),
	}
	cmd.AddCommand(
		&cobra.Command{
			Use:     "list",
			Aliases: []string{"ls"},
			Short:   "List the collections, by name",
			Long: `List the collections, ordered by name, with their compaction figures.
-o json prints an array of Collection objects.`,
			Args: cobra.NoArgs,
			RunE: clientRun(g, nil, collectionsList),
		},
		newCollectionsCreateCmd(g),
		newCollectionsSetCmd(g),
		newCollectionsUndeadCmd(g),
		&cobra.Command{
			Use:               "get COLLECTION",
			Short:             "Show one collection with every field",
			Long:              `Show one collection (an id or a name) with every field, and its dead-letter history (the 10 newest events) when it has one. -o json prints a Collection object.`,
			Args:              cobra.ExactArgs(1),
			ValidArgsFunction: completeCollections(g, 1),
			RunE: clientRun(g, nil, onCollection(func(ctx context.Context, s *session, id string) error {
				c, err := s.collection(ctx, id)
				if err != nil {
					return err
				}
				if err := s.printCollection(c); err != nil || s.out.json {
					return err
				}
				return s.printDeadLetterHistory(ctx, id)
			})),
		},
		&cobra.Command{
			Use:   "delete COLLECTION",
			Short: "Delete a collection with its log, segments and job history",
			Long: `Delete a collection (an id or a name) with its log, its segment versions and
its job history. Its queued and running jobs are cancelled first. This cannot
be undone. -o json prints the Collection object as it was just before its
deletion.`,
			Args:              cobra.ExactArgs(1),
			ValidArgsFunction: completeCollections(g, 1),
			RunE: clientRun(g, nil, onCollection(func(ctx context.Context, s *session, id string) error {
				res, err := unary(ctx, s, s.c.collection.DeleteCollection, &compactorv1.DeleteCollectionRequest{Id: id})
				if err != nil {
					return err
				}
				c := res.GetCollection()
				return s.show(c, func() error {
					_, err := fmt.Fprintf(s.out.w, "deleted collection %s (%s)\n", safeText(c.GetName()), c.GetId())
					return err
				})
			})),
		},
	)
	return cmd
}

func newCollectionsCreateCmd(g *globals) *cobra.Command {
	var (
		dimension int32
		opts      createIndexOptions
		req       *compactorv1.CreateCollectionRequest
	)
	cmd := &cobra.Command{
		Use:   "create NAME [--dimension D] [--distance l2|cosine|ip] [--m N] [--ef-construction N] [--ef-search N] [--no-index]",
		Short: "Create an empty collection",
		Long: `Create an empty collection named NAME (1 to 256 bytes, unique). Its
embedding dimension is --dimension, or, when 0, fixed by the first pushed
record that carries an embedding.

--distance (l2, cosine or ip; default cosine) ranks query results, and
--m, --ef-construction and --ef-search are the parameters of its vector
index (an HNSW graph per segment version; defaults 16, 200 and 100);
--no-index makes every query scan. All are fixed at creation. -o json prints the new Collection
object.`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: clientRun(g, func(_ *cobra.Command, args []string) error {
			req = &compactorv1.CreateCollectionRequest{Name: args[0], Dimension: dimension}
			return opts.apply(req)
		}, func(ctx context.Context, s *session, _ []string) error {
			res, err := unary(ctx, s, s.c.collection.CreateCollection, req)
			if err != nil {
				return err
			}
			return s.printCollection(res.GetCollection())
		}),
	}
	cmd.Flags().Int32Var(&dimension, "dimension", 0, "embedding dimension (0: fixed by the first write)")
	_ = cmd.RegisterFlagCompletionFunc("dimension", cobra.NoFileCompletions)
	opts.register(cmd)
	return cmd
}

// collectionsList prints every collection.
func collectionsList(ctx context.Context, s *session, _ []string) error {
	all, err := s.listCollections(ctx)
	if err != nil {
		return err
	}
	return showList(s, all, "no collections", func() error {
		tw := s.out.table()
		fmt.Fprintln(tw, "ID\tNAME\tDIM\tDISTANCE\tRECORDS\tBACKLOG\tVERSION\tLAST COMPACTION\tFAILURES")
		for _, c := range all {
			failures := strconv.Itoa(int(c.GetFailureCount()))
			if c.GetDeadLettered() {
				failures += " (dead-lettered)"
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\t%d\t%d\t%s\t%s\n", c.GetId(), safeText(ellipsize(c.GetName(), 40)), c.GetDimension(),
				distanceName(c.GetDistance()), c.GetRecordCount(), c.GetBacklog(), c.GetSegmentVersion(), s.out.fmtTime(c.GetLastCompactionTime()), failures)
		}
		return tw.Flush()
	})
}

// shareText is a collection's throughput share.
func shareText(f float64) string {
	if f <= 0 {
		return "none"
	}
	return strconv.FormatFloat(f*100, 'f', -1, 64) + " % of the throughput cap while others write"
}

// windowsText lists a collection's compaction windows.
func windowsText(ws []string) string {
	if len(ws) == 0 {
		return "the server's"
	}
	return safeText(strings.Join(ws, "; "))
}

// objectivesText lists a collection's freshness objectives.
func objectivesText(c *compactorv1.Collection) string {
	var parts []string
	if d := c.GetObjectiveMaxAge(); d != nil {
		parts = append(parts, "oldest record at most "+d.AsDuration().String())
	}
	if n := c.GetObjectiveMaxBacklog(); n > 0 {
		parts = append(parts, fmt.Sprintf("at most %d records", n))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// printCollection prints every field of c.
func (s *session) printCollection(c *compactorv1.Collection) error {
	if s.out.json {
		return s.out.writeProto(c)
	}
	dim := strconv.Itoa(int(c.GetDimension()))
	if c.GetDimension() == 0 {
		dim = "0 (fixed by the first write)"
	}
	dead := "no"
	if c.GetDeadLettered() {
		dead = "yes, since " + s.out.fmtTime(c.GetDeadLetterTime())
	}
	o := s.out
	minSize := "the server's"
	if n := c.GetMinCompactionSize(); n > 0 {
		minSize = fmt.Sprintf("%d records", n)
	}
	maxAge := "the server's"
	if d := c.GetMaxUncompactedAge(); d != nil {
		maxAge = d.AsDuration().String()
	}
	return o.kv([][2]string{
		{"ID", c.GetId()},
		{"Name", safeText(c.GetName())},
		{"Dimension", dim},
		{"Records", fmt.Sprintf("%d (in segment version %d; the log tail is not counted)", c.GetRecordCount(), c.GetSegmentVersion())},
		{"Segment version", strconv.FormatInt(c.GetSegmentVersion(), 10)},
		{"Log position", strconv.FormatInt(c.GetLogPosition(), 10)},
		{"Compaction offset", strconv.FormatInt(c.GetCompactionOffset(), 10)},
		{"Backlog", fmt.Sprintf("%d records", c.GetBacklog())},
		{"Oldest uncompacted", o.fmtTime(c.GetOldestUncompactedTime())},
		{"Last compaction", o.fmtTime(c.GetLastCompactionTime())},
		{"Failures", strconv.Itoa(int(c.GetFailureCount()))},
		{"Dead-lettered", dead},
		{"Automatic compaction", pauseText(c.GetPaused(), c.GetPauseReason(), c.GetPausedBy(), o.fmtTime(c.GetPauseTime()))},
		{"Min compaction size", minSize},
		{"Max uncompacted age", maxAge},
		{"Priority", priorityName(c.GetPriority())},
		{"Compaction windows", windowsText(c.GetCompactionWindows())},
		{"Freshness objectives", objectivesText(c)},
		{"Throughput share", shareText(c.GetThroughputShare())},
		{"Distance", distanceName(c.GetDistance())},
		{"Index settings", indexText(c.GetIndex())},
		{"Created", o.fmtTime(c.GetCreateTime())},
		{"Updated", o.fmtTime(c.GetUpdateTime())},
	})
}

// printDeadLetterHistory prints the newest dead-letter events of a
// collection, nothing when it has none.
func (s *session) printDeadLetterHistory(ctx context.Context, id string) error {
	res, err := unary(ctx, s, s.c.control.GetDeadLetterHistory, &compactorv1.GetDeadLetterHistoryRequest{CollectionId: id, Limit: 10})
	if err != nil || len(res.GetEvents()) == 0 {
		return err
	}
	fmt.Fprintln(s.out.w, "\nDead-letter history (newest first):")
	tw := s.out.table()
	fmt.Fprintln(tw, "TIME\tEVENT\tBUILD\tFAILURES\tBY\tJOB\tDETAIL")
	for _, e := range res.GetEvents() {
		ev := e.GetEvent()
		if e.GetCause() != "" {
			ev += " (" + e.GetCause() + ")"
		}
		job := e.GetJobId()
		if len(job) > 8 {
			job = job[:8]
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", s.out.fmtTime(e.GetTime()), ev, orDash(safeText(e.GetBuild())), e.GetFailures(),
			orDash(safeText(e.GetOperator())), orDash(job), orDash(safeText(ellipsize(e.GetReason(), 80))))
	}
	return tw.Flush()
}

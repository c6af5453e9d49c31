package cli

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	compactorv1 "github.com/compactorhq/compactor/gen/compactor/v1"
	"github.com/compactorhq/compactor/internal/format"
)

// jobsOptions are the filters of one jobs.
type jobsOptions struct {
	states     []string
	collection string // id or name
	trigger    string
	kinds      []string
	limit      int

	// Set by validate.
	stateValues  []compactorv1.JobState
	triggerValue compactorv1.Trigger
	kindValues   []compactorv1.JobKind
}

func (o *jobsOptions) validate() error {
	o.stateValues = nil
	for _, st := range o.states {
		v, ok := parseEnum[compactorv1.JobState](st, "JOB_STATE_", compactorv1.JobState_value)
		if !ok {
			return fmt.Errorf("--state %q: want %s", st, strings.Join(jobStates, ", "))
		}
		o.stateValues = append(o.stateValues, v)
	}
	if o.trigger != "" {
		v, ok := parseEnum[compactorv1.Trigger](o.trigger, "TRIGGER_", compactorv1.Trigger_value)
		if !ok {
			return fmt.Errorf("--trigger %q: want scheduled or one-off", o.trigger)
		}
		o.triggerValue = v
	}
	var err error
	if o.kindValues, err = parseKinds(o.kinds); err != nil {
		return err
	}
	if o.limit < 0 {
		return fmt.Errorf("--limit must not be negative, got %d", o.limit)
	}
	return nil
}

// Values of --state and --trigger, also offered by shell completion.
var (
	jobStates = []string{"queued", "running", "succeeded", "failed", "cancelled"}
	triggers  = []string{"scheduled", "one-off"}
	jobKinds  = []string{"compaction", "index-rebuild", "verify"}
)

// parseKinds reads the values of --kind.
func parseKinds(kinds []string) ([]compactorv1.JobKind, error) {
	var out []compactorv1.JobKind
	for _, k := range kinds {
		v, ok := parseEnum[compactorv1.JobKind](k, "JOB_KIND_", compactorv1.JobKind_value)
		if !ok {
			return nil, fmt.Errorf("--kind %q: want %s", k, strings.Join(jobKinds, ", "))
		}
		out = append(out, v)
	}
	return out, nil
}

func newJobsCmd(g *globals) *cobra.Command {
	var opts jobsOptions
	cmd := &cobra.Command{
		Use:   "jobs [--state S]... [--kind K]... [--collection COLLECTION] [--trigger T] [--limit N]",
		Short: "List jobs (compactions, index rebuilds), newest first",
		Long: `List jobs, newest first: running and queued jobs and the most recent
finished ones still held in the server's history (which has a retention and is
not an audit log). Filters combine: --state may be repeated (queued, running,
succeeded, failed, cancelled), --kind too (compaction, index-rebuild, verify),
--collection takes an id or a name, --trigger is scheduled or one-off. --limit 0
lists every matching job. -o json prints an array of Job objects.`,
		Args: cobra.NoArgs,
		RunE: clientRun(g, func(*cobra.Command, []string) error { return opts.validate() },
			func(ctx context.Context, s *session, _ []string) error { return s.jobs(ctx, opts) }),
	}
	f := cmd.Flags()
	f.StringArrayVar(&opts.states, "state", nil, "only jobs in this state (repeatable): queued, running, succeeded, failed, cancelled")
	f.StringVar(&opts.collection, "collection", "", "only jobs of this collection (id or name)")
	f.StringVar(&opts.trigger, "trigger", "", "only jobs with this trigger: scheduled or one-off")
	f.StringArrayVar(&opts.kinds, "kind", nil, "only jobs of this kind (repeatable): compaction, index-rebuild, verify")
	f.IntVar(&opts.limit, "limit", 50, "most jobs to list (0: all)")
	_ = cmd.RegisterFlagCompletionFunc("state", fixedCompletion(jobStates...))
	_ = cmd.RegisterFlagCompletionFunc("trigger", fixedCompletion(triggers...))
	_ = cmd.RegisterFlagCompletionFunc("kind", fixedCompletion(jobKinds...))
	_ = cmd.RegisterFlagCompletionFunc("collection", completeCollections(g, -1))
	_ = cmd.RegisterFlagCompletionFunc("limit", cobra.NoFileCompletions)
	return cmd
}

func (s *session) jobs(ctx context.Context, opts jobsOptions) error {
	id, err := s.resolveOptionalCollection(ctx, opts.collection)
	if err != nil {
		return err
	}
	jobs, err := collect(ctx, opts.limit, func(ctx context.Context, size int32, token string) ([]*compactorv1.Job, string, error) {
		res, err := unary(ctx, s, s.c.compaction.ListCompactions, &compactorv1.ListCompactionsRequest{
			CollectionId: id, States: opts.stateValues, Trigger: opts.triggerValue, Kinds: opts.kindValues, PageSize: size, PageToken: token,
		})
		return res.GetJobs(), res.GetNextPageToken(), err
	})
	if err != nil {
		return err
	}
	return showList(s, jobs, "no jobs", func() error { return s.jobsTable(jobs) })
}

// jobsTable prints one line per job.
func (s *session) jobsTable(jobs []*compactorv1.Job) error {
	tw := s.out.table()
	fmt.Fprintln(tw, "JOB\tKIND\tCOLLECTION\tTRIGGER\tSTATE\tCREATED\tDURATION\tRECORDS\tDETAIL")
	for _, j := range jobs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\n", j.GetId(), kindName(j.GetKind()), ellipsize(collectionLabel(j), 40), triggerName(j.GetTrigger()),
			stateName(j.GetState()), s.out.fmtTime(j.GetCreateTime()), s.out.jobDuration(j), j.GetRecordsRead(), jobDetail(j))
	}
	return tw.Flush()
}

func newJobCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "job ID",
		Short: "Show one job with every field",
		Long: `Show one job (a compaction, an index rebuild) with every field. ID is the job's id or its first
characters (at least 4) when they name one job only, such as the 8 that the
status page and "compactor jobs" show. -o json prints a Job object.`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeJobs(g),
		RunE: clientRun(g, nil, func(ctx context.Context, s *session, args []string) error {
			res, err := unary(ctx, s, s.c.compaction.GetCompaction, &compactorv1.GetCompactionRequest{JobId: args[0]})
			if err != nil {
				return err
			}
			return s.printJob(res.GetJob())
		}),
	}
}

// printJob prints every field of j.
func (s *session) printJob(j *compactorv1.Job) error {
	o := s.out
	if o.json {
		return o.writeProto(j)
	}
	state := stateName(j.GetState())
	if j.GetCancelRequested() {
		state += " (cancel requested)"
	}
	coll := j.GetCollectionId()
	if n := j.GetCollectionName(); n != "" {
		coll = safeText(n) + " (" + coll + ")"
	} else {
		coll += " (deleted)"
	}
	wait := "-"
	if j.GetStartTime() != nil && j.GetCreateTime() != nil {
		wait = format.Duration(j.GetStartTime().AsTime().Sub(j.GetCreateTime().AsTime()))
	}
	progress := "-"
	if p := j.GetProgress(); p != nil {
		progress = progressText(p) + ", " + format.Bytes(p.GetBytesWritten()) + " written"
	}
	return o.kv([][2]string{
		{"ID", j.GetId()},
		{"Kind", kindName(j.GetKind())},
		{"Collection", coll},
		{"Trigger", triggerName(j.GetTrigger())},
		{"Triggered by", triggeredByText(j.GetTriggeredBy())},
		{"State", state},
		{"Reason", orDash(safeText(j.GetReason()))},
		{"Attempt", strconv.Itoa(int(j.GetAttempt()))},
		{"Created", o.fmtTime(j.GetCreateTime())},
		{"Started", o.fmtTime(j.GetStartTime())},
		{"Finished", o.fmtTime(j.GetFinishTime())},
		{"Queued for", wait},
		{"Duration", o.jobDuration(j)},
		{"Log offsets", fmt.Sprintf("(%d, %d]", j.GetOffsetStart(), j.GetOffsetEnd())},
		{"Records read", strconv.FormatInt(j.GetRecordsRead(), 10)},
		{"Records written", strconv.FormatInt(j.GetRecordsWritten(), 10)},
		{"Bytes written", fmt.Sprintf("%s (%d bytes)", format.Bytes(j.GetBytesWritten()), j.GetBytesWritten())},
		{"Version", fmt.Sprintf("%d -> %d", j.GetVersionBefore(), j.GetVersionAfter())},
		{"Node", orDash(safeText(j.GetNode()))},
		{"Progress", progress},
		{"Error", orDash(safeText(j.GetError()))},
		{"Failure class", failureClassText(j.GetFailureClass())},
		{"Note", orDash(safeText(j.GetNote()))},
		{"Predicted", predictedJobText(j.GetPredicted())},
		{"Actual", actualJobText(j)},
		{"Prediction basis", orDash(safeText(j.GetPredicted().GetBasis()))},
	})
}

// failureClassText is a failure class in words, with what it does.
func failureClassText(c compactorv1.FailureClass) string {
	switch c {
	case compactorv1.FailureClass_FAILURE_CLASS_INFRASTRUCTURE:
		return "infrastructure (retried with backoff, not counted toward the dead-letter state)"
	case compactorv1.FailureClass_FAILURE_CLASS_DATA:
		return "data (counted toward the dead-letter state)"
	case compactorv1.FailureClass_FAILURE_CLASS_INTERNAL:
		return "internal (counted toward the dead-letter state)"
	}
	return "-"
}

// predictedJobText is a job's prediction in one line.
func predictedJobText(x *compactorv1.JobEstimate) string {
	if x == nil {
		return "-"
	}
	return fmt.Sprintf("%s, %d records, read %s, write %s, %d GETs, %d PUTs, index +%d/-%d",
		predictedText(x.GetPredictedDuration()), x.GetRecords(), format.Bytes(x.GetBytesRead()), format.Bytes(x.GetBytesWritten()),
		x.GetBlobGets(), x.GetBlobPuts(), x.GetVectorsToInsert(), x.GetVectorsToDelete())
}

// actualJobText is what a finished job did, in its prediction's terms.
func actualJobText(j *compactorv1.Job) string {
	a := j.GetActual()
	if a == nil {
		return "-"
	}
	dur := "-"
	if j.GetStartTime() != nil && j.GetFinishTime() != nil {
		dur = format.Duration(j.GetFinishTime().AsTime().Sub(j.GetStartTime().AsTime()))
	}
	written := a.GetBytesWritten() // every byte put, as predicted
	if written == 0 {
		written = j.GetBytesWritten()
	}
	return fmt.Sprintf("%s, %d records, read %s, write %s, %d GETs, %d PUTs, index +%d",
		dur, j.GetRecordsRead(), format.Bytes(a.GetBytesRead()), format.Bytes(written),
		a.GetBlobGets(), a.GetBlobPuts(), a.GetVectorsIndexed())
}

// triggeredByText is who asked for a job; the scheduler's jobs name no one.
func triggeredByText(by string) string {
	if by == "" {
		return "the scheduler"
	}
	return safeText(by)
}

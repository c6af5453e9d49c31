package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	compactorv1 "github.com/compactorhq/compactor/gen/compactor/v1"
)

func newJobsCmd(g *globals) *cobra.Command {
	var (
		states     []string
		collection string
		trigger    string
		limit      int
	)
	cmd := &cobra.Command{
		Use:   "jobs [--state S]... [--collection ID] [--trigger T] [--limit N]",
		Short: "List compaction jobs, newest first",
		Long: `List compaction jobs, newest first: running and queued jobs and the most recent
finished ones still held in the server's history (which has a retention and is
not an audit log). Filters combine: --state may be repeated (queued, running,
succeeded, failed, cancelled), --trigger is scheduled or one-off. --limit 0
lists every matching job. -o json prints an array of Job objects.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			req := &compactorv1.ListCompactionsRequest{CollectionId: collection}
			for _, st := range states {
				v, ok := parseJobState(st)
				if !ok {
					return usageError(cmd, fmt.Errorf("--state %q: want queued, running, succeeded, failed or cancelled", st))
				}
				req.States = append(req.States, v)
			}
			if trigger != "" {
				v, ok := parseTrigger(trigger)
				if !ok {
					return usageError(cmd, fmt.Errorf("--trigger %q: want scheduled or one-off", trigger))
				}
				req.Trigger = v
			}
			if limit < 0 {
				return usageError(cmd, fmt.Errorf("--limit must not be negative, got %d", limit))
			}
			s, err := newSession(cmd, g)
			if err != nil {
				return err
			}
			var jobs []*compactorv1.Job
			for {
				req.PageSize = 1000
				if limit > 0 {
					req.PageSize = int32(min(limit-len(jobs), 1000))
				}
				res, err := callUnary(cmd.Context(), s, func(ctx context.Context) (*connect.Response[compactorv1.ListCompactionsResponse], error) {
					return s.c.compaction.ListCompactions(ctx, connect.NewRequest(req))
				})
				if err != nil {
					return err
				}
				jobs = append(jobs, res.Msg.GetJobs()...)
				req.PageToken = res.Msg.GetNextPageToken()
				if req.PageToken == "" || limit > 0 && len(jobs) >= limit {
					break
				}
			}
			if limit > 0 && len(jobs) > limit {
				jobs = jobs[:limit]
			}
			if s.out.json {
				return writeProtoList(s.out, jobs)
			}
			if len(jobs) == 0 {
				s.out.note("no jobs")
				return nil
			}
			return s.jobsTable(jobs)
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&states, "state", nil, "only jobs in this state (repeatable): queued, running, succeeded, failed, cancelled")
	f.StringVar(&collection, "collection", "", "only jobs of this collection (id)")
	f.StringVar(&trigger, "trigger", "", "only jobs with this trigger: scheduled or one-off")
	f.IntVar(&limit, "limit", 50, "most jobs to list (0: all)")
	return cmd
}

// jobsTable prints one line per job.
func (s *cliSession) jobsTable(jobs []*compactorv1.Job) error {
	tw := s.out.table()
	fmt.Fprintln(tw, "JOB\tCOLLECTION\tTRIGGER\tSTATE\tCREATED\tDURATION\tRECORDS\tDETAIL")
	for _, j := range jobs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\n", j.GetId(), ellipsize(collectionLabel(j), 40), triggerName(j.GetTrigger()),
			stateName(j.GetState()), s.out.fmtTime(j.GetCreateTime()), s.out.jobDuration(j), j.GetRecordsRead(), jobDetail(j))
	}
	return tw.Flush()
}

func newJobCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "job ID",
		Short: "Show one compaction job with every field",
		Long:  `Show one compaction job with every field. -o json prints a Job object.`,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := newSession(cmd, g)
			if err != nil {
				return err
			}
			res, err := callUnary(cmd.Context(), s, func(ctx context.Context) (*connect.Response[compactorv1.GetCompactionResponse], error) {
				return s.c.compaction.GetCompaction(ctx, connect.NewRequest(&compactorv1.GetCompactionRequest{JobId: args[0]}))
			})
			if err != nil {
				return err
			}
			return s.printJob(res.Msg.GetJob())
		},
	}
}

// printJob prints every field of j.
func (s *cliSession) printJob(j *compactorv1.Job) error {
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
		wait = fmtDuration(j.GetStartTime().AsTime().Sub(j.GetCreateTime().AsTime()))
	}
	progress := "-"
	if p := j.GetProgress(); p != nil {
		progress = progressText(p) + ", " + fmtBytes(p.GetBytesWritten()) + " written"
	}
	return o.kv([][2]string{
		{"ID", j.GetId()},
		{"Collection", coll},
		{"Trigger", triggerName(j.GetTrigger())},
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
		{"Bytes written", fmt.Sprintf("%s (%d bytes)", fmtBytes(j.GetBytesWritten()), j.GetBytesWritten())},
		{"Version", fmt.Sprintf("%d -> %d", j.GetVersionBefore(), j.GetVersionAfter())},
		{"Node", orDash(safeText(j.GetNode()))},
		{"Progress", progress},
		{"Error", orDash(safeText(j.GetError()))},
		{"Note", orDash(safeText(j.GetNote()))},
	})
}

func newCancelCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "cancel ID",
		Short: "Cancel a compaction job",
		Long: `Cancel a compaction job. A QUEUED job ends CANCELLED at once; a RUNNING job stops
at its next batch boundary, commits nothing and removes what it wrote (until
then it shows "cancel requested"). A finished job cannot be cancelled
(failed_precondition). -o json prints the Job object after the request.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := newSession(cmd, g)
			if err != nil {
				return err
			}
			res, err := callUnary(cmd.Context(), s, func(ctx context.Context) (*connect.Response[compactorv1.CancelCompactionResponse], error) {
				return s.c.compaction.CancelCompaction(ctx, connect.NewRequest(&compactorv1.CancelCompactionRequest{JobId: args[0]}))
			})
			if err != nil {
				return err
			}
			j := res.Msg.GetJob()
			if s.out.json {
				return s.out.writeProto(j)
			}
			if j.GetState() == compactorv1.JobState_JOB_STATE_CANCELLED {
				fmt.Fprintf(s.out.w, "cancelled job %s (collection %s)\n", j.GetId(), collectionLabel(j))
			} else {
				fmt.Fprintf(s.out.w, "cancel requested: job %s (collection %s) is %s and stops at its next batch boundary\n",
					j.GetId(), collectionLabel(j), stateName(j.GetState()))
			}
			return nil
		},
	}
}

func newWatchCmd(g *globals) *cobra.Command {
	var (
		collection string
		progress   bool
		rc         reconnect
	)
	cmd := &cobra.Command{
		Use:   "watch [--collection ID] [--progress] [--reconnect-timeout D]",
		Short: "Stream compaction job changes until interrupted",
		Long: `Stream compaction job changes until interrupted (Ctrl-C ends it with exit
status 0). It starts with the queued and running jobs (event "snapshot"), then
prints one line per change: a job created or changed ("changed"), and with
--progress also the progress of running jobs ("progress"). Not limited by
--timeout. When the server drops the stream (restart, or this client fell
behind) it reconnects, starting again with a snapshot; after
--reconnect-timeout (default 10m) without an answer it gives up (exit
status 1).

-o json prints one WatchCompactionsResponse object per line, for example
{"type":"WATCH_EVENT_TYPE_CHANGED","job":{...}}, including the
{"type":"WATCH_EVENT_TYPE_SNAPSHOT_COMPLETE"} marker after the snapshot.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := newSession(cmd, g)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			if !s.out.json {
				fmt.Fprintf(s.out.w, "%-20s  %-9s  %-36s  %-24s  %-9s  %s\n", "TIME", "EVENT", "JOB", "COLLECTION", "STATE", "DETAIL")
			}
			err = s.watchJobs(ctx, rc, func() *compactorv1.WatchCompactionsRequest {
				return &compactorv1.WatchCompactionsRequest{CollectionId: collection, IncludeProgress: progress}
			}, func(m *compactorv1.WatchCompactionsResponse) (bool, error) {
				if s.out.json {
					return false, s.out.writeProtoLine(m)
				}
				if m.GetType() == compactorv1.WatchEventType_WATCH_EVENT_TYPE_SNAPSHOT_COMPLETE {
					s.out.note("watching for changes (Ctrl-C to stop)")
					return false, nil
				}
				j := m.GetJob()
				detail := jobDetail(j)
				if jobDone(j.GetState()) {
					detail = strings.TrimPrefix(strings.TrimPrefix(finishedText(j), stateName(j.GetState())), " ")
				}
				_, err := fmt.Fprintf(s.out.w, "%-20s  %-9s  %-36s  %-24s  %-9s  %s\n",
					s.out.now().UTC().Format("2006-01-02T15:04:05Z"), eventName(m.GetType()), j.GetId(),
					ellipsize(collectionLabel(j), 24), stateName(j.GetState()), orDash(detail))
				return false, err
			}, s.out.note)
			if interrupted(ctx, err) {
				return nil
			}
			return err
		},
	}
	cmd.Flags().StringVar(&collection, "collection", "", "only jobs of this collection (id)")
	cmd.Flags().BoolVar(&progress, "progress", false, "also print the progress of running jobs")
	rc.register(cmd.Flags(), 10*time.Minute)
	return cmd
}

// eventName is a watch event type for a table: "changed".
func eventName(t compactorv1.WatchEventType) string {
	return strings.ToLower(strings.TrimPrefix(t.String(), "WATCH_EVENT_TYPE_"))
}

// reconnect is how watch and compact --wait follow jobs through an
// unreachable or restarting server: they retry, with a delay from
// watchRetryFirst doubling up to maxDelay, until the server has not answered
// for timeout (0: no limit). A message received ends the outage.
type reconnect struct {
	timeout  time.Duration
	maxDelay time.Duration
}

const watchRetryFirst = 200 * time.Millisecond

// register adds --reconnect-timeout and the hidden --reconnect-max-delay to
// fs, with the default timeout given.
func (r *reconnect) register(fs *pflag.FlagSet, timeout time.Duration) {
	fs.DurationVar(&r.timeout, "reconnect-timeout", timeout,
		"how long to keep reconnecting to a server that does not answer (restarting, unreachable) before giving up; 0: no limit")
	fs.DurationVar(&r.maxDelay, "reconnect-max-delay", 5*time.Second, "longest wait between two reconnection attempts")
	_ = fs.MarkHidden("reconnect-max-delay")
}

// errUnreachable: the server did not answer for the whole --reconnect-timeout.
var errUnreachable = errors.New("server unavailable")

// definitive reports whether a watch error is an answer that retrying
// cannot change (a bad request, an unknown job, a missing token). Anything
// else (UNAVAILABLE, a connection refused or reset, a stream cut by a
// restart, RESOURCE_EXHAUSTED of a busy server) is retried.
func definitive(err error) bool {
	switch connect.CodeOf(err) {
	case connect.CodeInvalidArgument, connect.CodeNotFound, connect.CodeAlreadyExists, connect.CodePermissionDenied,
		connect.CodeUnauthenticated, connect.CodeFailedPrecondition, connect.CodeUnimplemented, connect.CodeOutOfRange:
		return true
	}
	return false
}

// watchJobs runs WatchCompactions with the request req returns (called
// again at each reconnection), handing every message to on until on
// returns stop, ctx ends (ctx's error is returned) or the stream fails with
// a definitive error. Other failures, and a stream that ends, are retried
// as rc says; when the server has not answered for rc.timeout the error
// wraps errUnreachable. note tells the user about reconnections.
func (s *cliSession) watchJobs(ctx context.Context, rc reconnect, req func() *compactorv1.WatchCompactionsRequest,
	on func(*compactorv1.WatchCompactionsResponse) (stop bool, err error), note func(string, ...any)) error {
	var (
		failures  int
		downSince time.Time // first failure since the last message; zero while answering
	)
	for {
		stop, err := s.watchOnce(ctx, req(), on, func() { failures, downSince = 0, time.Time{} })
		switch {
		case stop:
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case err != nil && definitive(err):
			return err
		}
		failures++
		if downSince.IsZero() {
			downSince = time.Now()
		}
		down := time.Since(downSince)
		if rc.timeout > 0 && down >= rc.timeout {
			return fmt.Errorf("%w for %s (--reconnect-timeout %s; %d attempts): %w", errUnreachable,
				fmtDuration(down), rc.timeout, failures, errOr(err, "stream ended"))
		}
		wait := retryDelay(failures, min(watchRetryFirst, rc.maxDelay), rc.maxDelay)
		limit := "no limit"
		if rc.timeout > 0 {
			wait = min(wait, rc.timeout-down)
			limit = "gives up after " + rc.timeout.String()
		}
		note("watch: %v; reconnecting in %s (attempt %d, %s)", errOr(err, "stream ended"), fmtDuration(wait), failures, limit)
		if err := sleepCtx(ctx, wait); err != nil {
			return err
		}
	}
}

func errOr(err error, text string) error {
	if err == nil {
		return errors.New(text)
	}
	return err
}

// watchOnce runs one stream; received is called on every message.
func (s *cliSession) watchOnce(ctx context.Context, req *compactorv1.WatchCompactionsRequest,
	on func(*compactorv1.WatchCompactionsResponse) (bool, error), received func()) (stop bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := s.c.compaction.WatchCompactions(ctx, connect.NewRequest(req))
	if err != nil {
		return false, err
	}
	defer stream.Close()
	for stream.Receive() {
		received()
		stop, err := on(stream.Msg())
		if err != nil || stop {
			return stop, err
		}
	}
	return false, stream.Err()
}

// parseJobState accepts "running", "RUNNING" or "JOB_STATE_RUNNING".
func parseJobState(s string) (compactorv1.JobState, bool) {
	name := strings.ToUpper(strings.TrimSpace(s))
	if !strings.HasPrefix(name, "JOB_STATE_") {
		name = "JOB_STATE_" + name
	}
	v, ok := compactorv1.JobState_value[name]
	if !ok || v == 0 {
		return 0, false
	}
	return compactorv1.JobState(v), true
}

// parseTrigger accepts "scheduled", "one-off", "one_off" or the enum name.
func parseTrigger(s string) (compactorv1.Trigger, bool) {
	name := strings.ToUpper(strings.ReplaceAll(strings.TrimSpace(s), "-", "_"))
	if !strings.HasPrefix(name, "TRIGGER_") {
		name = "TRIGGER_" + name
	}
	v, ok := compactorv1.Trigger_value[name]
	if !ok || v == 0 {
		return 0, false
	}
	return compactorv1.Trigger(v), true
}

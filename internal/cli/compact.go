package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/compactorhq/compactor/client"
	compactorv1 "github.com/compactorhq/compactor/gen/compactor/v1"
)

// compactOptions are the settings of one compact.
type compactOptions struct {
	collections []string // ids or names
	all, wait   bool
	reason      string
	rc          reconnect
}

// validate rejects what the server would: neither or both of collections
// and --all.
func (o *compactOptions) validate() error {
	switch {
	case o.all && len(o.collections) > 0:
		return errors.New("give collections or --all, not both")
	case !o.all && len(o.collections) == 0:
		return errors.New("give the collections to compact (ids or names), or --all")
	}
	return o.rc.validate()
}

func newCompactCmd(g *globals) *cobra.Command {
	var opts compactOptions
	cmd := &cobra.Command{
		Use:   "compact (--all | COLLECTION...) [--reason TEXT] [--wait [--reconnect-timeout D]]",
		Short: "Request one-off compactions, and optionally wait for them",
		Long: `Request a one-off compaction of the given collections (each an id or a name),
or of every collection with --all. One-off jobs bypass the minimum compaction
size and the dead-letter gate, and run before scheduled jobs. A collection that
already has a queued job gets that job back ("already queued") instead of a new
one.

With --wait, follow the jobs until each has finished, with live progress on
stderr (a bar per job when stderr is a terminal: collection, phase, fraction of
the whole job, ETA; otherwise, with -o table, one line per state change), then
print a summary. Waiting is not limited by --timeout (only the request is). A
job that reaches the server's maximum compaction size leaves the rest of the
backlog to a continuation job, which the server queues at once: --wait follows
the continuations too, until the backlog the request found is compacted, and
the summary names them.

While waiting, a server that restarts or cannot be reached does not end the
wait: --wait keeps following the job ids it has, reconnecting with backoff,
and reports their real outcome once the server answers again (a job the
server finished meanwhile included). It gives up after --reconnect-timeout
(default 10m) without an answer, naming the jobs whose outcome it does not
know; the jobs continue on the server.

Exit status 1 when the request fails, any job ends FAILED or CANCELLED, or
the server stayed unreachable for --reconnect-timeout; 130 when interrupted
while waiting (the jobs continue on the server).

-o json prints one object: {"jobs": [{"job": Job, "created": bool}, ...]},
with each job as it finished when --wait is given, plus, after --wait,
"continuations": [Job, ...] with the continuation jobs it followed.`,
		ValidArgsFunction: completeCollections(g, -1),
		RunE: clientRun(g, func(_ *cobra.Command, args []string) error {
			opts.collections = args
			return opts.validate()
		}, func(ctx context.Context, s *session, _ []string) error { return s.compact(ctx, opts) }),
	}
	f := cmd.Flags()
	f.BoolVar(&opts.all, "all", false, "compact every collection")
	f.StringVar(&opts.reason, "reason", "", "why, kept on the jobs (shown by 'job' and on the status page)")
	f.BoolVar(&opts.wait, "wait", false, "wait until every job has finished, showing progress")
	opts.rc.register(f, 10*time.Minute)
	_ = cmd.RegisterFlagCompletionFunc("reason", cobra.NoFileCompletions)
	return cmd
}

// compact requests the jobs and, with --wait, follows them and their
// continuations to the end.
func (s *session) compact(ctx context.Context, opts compactOptions) error {
	ids, err := s.resolveCollections(ctx, opts.collections)
	if err != nil {
		return err
	}
	res, err := unary(ctx, s, s.c.compaction.Compact, &compactorv1.CompactRequest{CollectionIds: ids, All: opts.all, Reason: opts.reason})
	if err != nil {
		return err
	}
	return s.follow(ctx, res.GetJobs(), opts.wait, opts.rc, true)
}

// follow shows the jobs a request queued (results; created false: the one
// already queued): the table (or -o json) at once, or with wait, the table,
// then the wait for their ends (following them across reconnects by rc)
// and the summary. continued also follows the continuation jobs that the
// server queues for a backlog larger than one job, until none is left. It
// exits non-zero (unsuccessful) when a waited job did not succeed.
func (s *session) follow(ctx context.Context, results []*compactorv1.CompactResult, wait bool, rc reconnect, continued bool) error {
	if !wait {
		if s.out.json {
			return s.compactJSON(results, nil)
		}
		if len(results) == 0 {
			s.out.note("no collections to compact")
			return nil
		}
		return s.compactTable(results)
	}
	if !s.out.json && len(results) > 0 {
		if err := s.compactTable(results); err != nil {
			return err
		}
	}
	final, err := s.waitJobs(ctx, rc, results)
	if err != nil {
		return waitError(ctx, err)
	}
	var conts []*compactorv1.Job
	if continued {
		if conts, err = s.followContinuations(ctx, rc, final); err != nil {
			return waitError(ctx, err)
		}
	}
	if s.out.json {
		err = s.compactJSON(final, conts)
	} else {
		err = s.waitSummary(final, conts)
	}
	if err != nil {
		return err
	}
	all := slices.Clone(final)
	for _, c := range conts {
		all = append(all, &compactorv1.CompactResult{Job: c, Created: true})
	}
	return unsuccessful(all)
}

// jobRequest is what the commands that queue one job of a collection
// (index rebuild, verify) share: why, and whether to follow the job to its
// end.
type jobRequest struct {
	reason string
	wait   bool
	rc     reconnect
}

// queueJobCmd completes cmd as a command that queues one job of the
// collection of its one argument (an id or a name), with --reason, --wait
// (helped by waitHelp) and the reconnection flags: check validates the
// command's own flags (a usage error), request queues the job for the
// collection's id and returns it with whether it is new (else the one
// already queued), and the job is then shown as compact shows its jobs
// (follow, without continuations).
func queueJobCmd(g *globals, cmd *cobra.Command, r *jobRequest, waitHelp string, check func() error,
	request func(ctx context.Context, s *session, id string) (job *compactorv1.Job, created bool, err error)) *cobra.Command {
	cmd.Args = cobra.ExactArgs(1)
	cmd.ValidArgsFunction = completeCollections(g, 1)
	cmd.RunE = clientRun(g, func(*cobra.Command, []string) error {
		if err := check(); err != nil {
			return err
		}
		return r.rc.validate()
	}, onCollection(func(ctx context.Context, s *session, id string) error {
		job, created, err := request(ctx, s, id)
		if err != nil {
			return err
		}
		return s.follow(ctx, []*compactorv1.CompactResult{{Job: job, Created: created}}, r.wait, r.rc, false)
	}))
	f := cmd.Flags()
	f.StringVar(&r.reason, "reason", "", "why, kept on the job")
	f.BoolVar(&r.wait, "wait", false, waitHelp)
	r.rc.register(f, 10*time.Minute)
	_ = cmd.RegisterFlagCompletionFunc("reason", cobra.NoFileCompletions)
	return cmd
}

// followContinuations waits for the continuation jobs of final, and for
// theirs, until none is left: a backlog larger than one job goes on in
// continuation jobs, and --wait returns when it is compacted. It returns
// them finished, in the order found.
func (s *session) followContinuations(ctx context.Context, rc reconnect, final []*compactorv1.CompactResult) ([]*compactorv1.Job, error) {
	var conts []*compactorv1.Job
	seen := map[string]bool{}
	for round := final; ; {
		var next []*compactorv1.CompactResult
		for _, c := range s.continuations(ctx, round) {
			if !seen[c.GetId()] {
				seen[c.GetId()] = true
				next = append(next, &compactorv1.CompactResult{Job: c, Created: true})
			}
		}
		if len(next) == 0 {
			return conts, nil
		}
		done, err := s.waitJobs(ctx, rc, next)
		if err != nil {
			return nil, err
		}
		for _, r := range done {
			conts = append(conts, r.GetJob())
		}
		round = done
	}
}

// waitError is the error of an interrupted or failed wait.
func waitError(ctx context.Context, err error) error {
	if interrupted(ctx, err) {
		return &ExitError{Code: 130, Err: errors.New("interrupted while waiting; the jobs continue on the server (see: compactor jobs)")}
	}
	return fmt.Errorf("wait for the jobs: %w", err)
}

// compactTable prints the jobs a Compact call returned.
func (s *session) compactTable(results []*compactorv1.CompactResult) error {
	tw := s.out.table()
	fmt.Fprintln(tw, "JOB\tKIND\tCOLLECTION\tSTATE\tRESULT")
	for _, r := range results {
		j := r.GetJob()
		what := "already queued"
		if r.GetCreated() {
			what = "created"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", j.GetId(), kindName(j.GetKind()), ellipsize(collectionLabel(j), 40), stateName(j.GetState()), what)
	}
	return tw.Flush()
}

// compactJSON prints {"jobs": [...], "continuations": [...]}.
func (s *session) compactJSON(results []*compactorv1.CompactResult, conts []*compactorv1.Job) error {
	var doc struct {
		Jobs          []json.RawMessage `json:"jobs"`
		Continuations []json.RawMessage `json:"continuations,omitempty"`
	}
	doc.Jobs = []json.RawMessage{}
	for _, r := range results {
		raw, err := marshalProto(r)
		if err != nil {
			return err
		}
		doc.Jobs = append(doc.Jobs, raw)
	}
	for _, j := range conts {
		raw, err := marshalProto(j)
		if err != nil {
			return err
		}
		doc.Continuations = append(doc.Continuations, raw)
	}
	return s.out.writeJSON(doc)
}

// waitSummary prints the finished jobs, then the continuation jobs that
// compacted the rest of the backlogs.
func (s *session) waitSummary(final []*compactorv1.CompactResult, conts []*compactorv1.Job) error {
	if len(final) == 0 {
		s.out.note("no collections to compact")
		return nil
	}
	fmt.Fprintln(s.out.w)
	tw := s.out.table()
	fmt.Fprintln(tw, "JOB\tKIND\tCOLLECTION\tSTATE\tDURATION\tREAD\tWRITTEN\tVERSION\tDETAIL")
	ok := 0
	for _, r := range final {
		j := r.GetJob()
		if j.GetState() == compactorv1.JobState_JOB_STATE_SUCCEEDED {
			ok++
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d -> %d\t%s\n", j.GetId(), kindName(j.GetKind()), ellipsize(collectionLabel(j), 40), stateName(j.GetState()),
			s.out.jobDuration(j), j.GetRecordsRead(), j.GetRecordsWritten(), j.GetVersionBefore(), j.GetVersionAfter(), jobDetail(j))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(s.out.w, "%d of %d jobs succeeded\n", ok, len(final))
	for _, c := range conts {
		fmt.Fprintf(s.out.w, "collection %s continued in job %s: %s in %s, %d records read\n",
			collectionLabel(c), c.GetId(), stateName(c.GetState()), s.out.jobDuration(c), c.GetRecordsRead())
	}
	return nil
}

// unsuccessful is an exit status 1 error naming every job that ended FAILED
// or CANCELLED, or nil.
func unsuccessful(final []*compactorv1.CompactResult) error {
	var bad []string
	for _, r := range final {
		j := r.GetJob()
		switch j.GetState() {
		case compactorv1.JobState_JOB_STATE_FAILED:
			bad = append(bad, fmt.Sprintf("job %s (collection %s) FAILED: %s", j.GetId(), collectionLabel(j), safeText(j.GetError())))
		case compactorv1.JobState_JOB_STATE_CANCELLED:
			bad = append(bad, fmt.Sprintf("job %s (collection %s) CANCELLED", j.GetId(), collectionLabel(j)))
		}
	}
	if len(bad) == 0 {
		return nil
	}
	return &ExitError{Code: 1, Err: fmt.Errorf("%d of %d jobs did not succeed: %s", len(bad), len(final), strings.Join(bad, "; "))}
}

// waitJobs follows the jobs of results until each is finished and returns
// them in their final state (client.Wait: watched by job id, so a job that
// finished before the watch started is not missed), drawing each update.
func (s *session) waitJobs(ctx context.Context, rc reconnect, results []*compactorv1.CompactResult) ([]*compactorv1.CompactResult, error) {
	jobs := make(map[string]*compactorv1.Job, len(results))
	var pending []string
	view := s.newJobView()
	defer view.close()
	for _, r := range results {
		j := r.GetJob()
		if _, dup := jobs[j.GetId()]; !dup && !jobDone(j.GetState()) {
			pending = append(pending, j.GetId())
		}
		jobs[j.GetId()] = j
		view.update(j)
	}
	if len(pending) > 0 {
		_, err := s.c.api.Wait(ctx, client.WaitOptions{
			Reconnect: rc.policy(view.note),
			Progress:  true,
			OnUpdate: func(j *compactorv1.Job) {
				jobs[j.GetId()] = j
				view.update(j)
			},
		}, pending...)
		var we *client.WaitError
		if errors.As(err, &we) {
			err = we.Err
		}
		if errors.Is(err, client.ErrUnreachable) {
			return nil, unknownOutcome(unreachableError(err), jobs, pending)
		}
		if err != nil {
			return nil, err
		}
	}
	final := make([]*compactorv1.CompactResult, len(results))
	for i, r := range results {
		final[i] = &compactorv1.CompactResult{Job: jobs[r.GetJob().GetId()], Created: r.GetCreated()}
	}
	return final, nil
}

// unknownOutcome is the error of a wait that gave up on an unreachable
// server: it names (at most 10 of) the jobs still unfinished when last
// seen, with that state.
func unknownOutcome(err error, jobs map[string]*compactorv1.Job, pending []string) error {
	var open []string
	for _, id := range pending {
		if j := jobs[id]; !jobDone(j.GetState()) {
			open = append(open, fmt.Sprintf("job %s (collection %s) %s", id, collectionLabel(j), stateName(j.GetState())))
		}
	}
	named := open[:min(len(open), 10)]
	more := ""
	if len(open) > len(named) {
		more = fmt.Sprintf(" and %d more", len(open)-len(named))
	}
	return fmt.Errorf("%w; outcome unknown of %s, last seen: %s%s (they continue on the server; see: compactor job ID)",
		err, plural(int64(len(open)), "job"), strings.Join(named, "; "), more)
}

// continuations finds the jobs the server queued to continue the
// successful jobs of final, whose backlog was larger than one job (a
// continuation's continues_job_id names the job it continues; a continuation
// may have its own). The server queues a continuation before it publishes the
// end of the job it continues, so one look suffices. Best effort: a failure
// to look is reported on stderr, not as the command's error.
func (s *session) continuations(ctx context.Context, final []*compactorv1.CompactResult) []*compactorv1.Job {
	var conts []*compactorv1.Job
	for _, r := range final {
		j := r.GetJob()
		if j.GetState() != compactorv1.JobState_JOB_STATE_SUCCEEDED || j.GetRecordsRead() == 0 {
			continue
		}
		found, err := s.continuationsOf(ctx, j)
		if err != nil {
			s.out.note("could not look for continuation jobs of collection %s: %v", collectionLabel(j), err)
		}
		conts = append(conts, found...)
	}
	return conts
}

func (s *session) continuationsOf(ctx context.Context, j *compactorv1.Job) ([]*compactorv1.Job, error) {
	res, err := unary(ctx, s, s.c.compaction.ListCompactions, &compactorv1.ListCompactionsRequest{
		CollectionId: j.GetCollectionId(), PageSize: 100,
	})
	if err != nil {
		return nil, err
	}
	chain := map[string]bool{j.GetId(): true}
	var found []*compactorv1.Job
	jobs := res.GetJobs()
	for i := len(jobs) - 1; i >= 0; i-- { // oldest first, to follow chains
		if c := jobs[i]; chain[c.GetContinuesJobId()] {
			chain[c.GetId()] = true
			found = append(found, c)
		}
	}
	return found, nil
}

package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/compactorhq/compactor/client"
	compactorv1 "github.com/compactorhq/compactor/gen/compactor/v1"
	"github.com/compactorhq/compactor/internal/format"
)

// watchOptions are the settings of one watch.
type watchOptions struct {
	collection string // id or name; "" for every collection
	progress   bool
	kinds      []string
	kindValues []compactorv1.JobKind // set by RunE from kinds
	rc         reconnect
}

func newWatchCmd(g *globals) *cobra.Command {
	var opts watchOptions
	cmd := &cobra.Command{
		Use:   "watch [--collection COLLECTION] [--kind K]... [--progress] [--reconnect-timeout D]",
		Short: "Stream job changes until interrupted",
		Long: `Stream job changes (compactions, index rebuilds) until interrupted (Ctrl-C ends it with exit
status 0). It starts with the queued and running jobs (event "snapshot"), then
prints one line per change: a job created or changed ("changed"), and with
--progress also the progress of running jobs ("progress"). --collection (an id
or a name) keeps the jobs of one collection, --kind (repeatable: compaction,
index-rebuild, verify) the jobs of those kinds. Not limited by --timeout. When
the server drops the stream (restart, or this client fell behind) it
reconnects with backoff, starting again with a snapshot; after
--reconnect-timeout (default 10m) without an answer it gives up (exit status
1).

-o json prints one WatchCompactionsResponse object per line, for example
{"type":"WATCH_EVENT_TYPE_CHANGED","job":{...}}, including the
{"type":"WATCH_EVENT_TYPE_SNAPSHOT_COMPLETE"} marker after the snapshot.`,
		Args: cobra.NoArgs,
		RunE: clientRun(g, func(*cobra.Command, []string) error {
			if err := opts.rc.validate(); err != nil {
				return err
			}
			var err error
			opts.kindValues, err = parseKinds(opts.kinds)
			return err
		}, func(ctx context.Context, s *session, _ []string) error { return s.watch(ctx, opts) }),
	}
	cmd.Flags().StringVar(&opts.collection, "collection", "", "only jobs of this collection (id or name)")
	cmd.Flags().BoolVar(&opts.progress, "progress", false, "also print the progress of running jobs")
	cmd.Flags().StringArrayVar(&opts.kinds, "kind", nil, "only jobs of this kind (repeatable): compaction, index-rebuild, verify")
	_ = cmd.RegisterFlagCompletionFunc("kind", fixedCompletion(jobKinds...))
	opts.rc.register(cmd.Flags(), 10*time.Minute)
	_ = cmd.RegisterFlagCompletionFunc("collection", completeCollections(g, -1))
	return cmd
}

func (s *session) watch(ctx context.Context, opts watchOptions) error {
	id, err := s.resolveOptionalCollection(ctx, opts.collection)
	if err != nil {
		return err
	}
	if !s.out.json {
		fmt.Fprintf(s.out.w, "%-20s  %-9s  %-36s  %-13s  %-24s  %-9s  %s\n", "TIME", "EVENT", "JOB", "KIND", "COLLECTION", "STATE", "DETAIL")
	}
	line := func(event string, j *compactorv1.Job, detail string) error {
		_, err := fmt.Fprintf(s.out.w, "%-20s  %-9s  %-36s  %-13s  %-24s  %-9s  %s\n",
			s.out.now().UTC().Format("2006-01-02T15:04:05Z"), event, j.GetId(), kindName(j.GetKind()),
			ellipsize(collectionLabel(j), 24), stateName(j.GetState()), orDash(detail))
		return err
	}
	etas := newETAWatch(s.afterFunc, func(j *compactorv1.Job, overdue time.Duration) {
		_ = line("progress", j, fmt.Sprintf("%s, no progress report since; ETA overdue by %s",
			strings.ToLower(stateName(j.GetState())), format.Duration(overdue.Round(time.Second))))
	})
	defer etas.stop()
	err = s.watchJobs(ctx, opts.rc, func() *compactorv1.WatchCompactionsRequest {
		return &compactorv1.WatchCompactionsRequest{CollectionId: id, IncludeProgress: opts.progress, Kinds: opts.kindValues}
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
		var err error
		etas.seen(j, func() { err = line(eventName(m.GetType()), j, detail) })
		return false, err
	}, s.out.note)
	if interrupted(ctx, err) {
		return nil
	}
	return err
}

// eventName is a watch event type for a table: "changed".
func eventName(t compactorv1.WatchEventType) string {
	return strings.ToLower(strings.TrimPrefix(t.String(), "WATCH_EVENT_TYPE_"))
}

// reconnect is how watch and compact --wait follow jobs through an
// unreachable or restarting server (client.Reconnect: exponential backoff
// with jitter up to maxDelay, until the server has not answered for timeout,
// 0: no limit). A message received ends the outage.
type reconnect struct {
	timeout  time.Duration
	maxDelay time.Duration
}

// register adds --reconnect-timeout and the hidden --reconnect-max-delay to
// fs, with the default timeout given.
func (r *reconnect) register(fs *pflag.FlagSet, timeout time.Duration) {
	fs.DurationVar(&r.timeout, "reconnect-timeout", timeout,
		"how long to keep reconnecting to a server that does not answer (restarting, unreachable) before giving up; 0: no limit")
	fs.DurationVar(&r.maxDelay, "reconnect-max-delay", 5*time.Second, "longest wait between two reconnection attempts")
	_ = fs.MarkHidden("reconnect-max-delay")
}

func (r *reconnect) validate() error {
	switch {
	case r.timeout < 0:
		return fmt.Errorf("--reconnect-timeout must not be negative, got %s", r.timeout)
	case r.maxDelay <= 0:
		return fmt.Errorf("--reconnect-max-delay must be positive, got %s", r.maxDelay)
	}
	return nil
}

// policy is r for the client, telling note about each reconnection.
func (r reconnect) policy(note func(string, ...any)) client.Reconnect {
	limit := "no limit"
	if r.timeout > 0 {
		limit = "gives up after " + r.timeout.String()
	}
	return client.Reconnect{Timeout: r.timeout, MaxDelay: r.maxDelay, Notify: func(err error, wait time.Duration, attempt int) {
		note("watch: %v; reconnecting in %s (attempt %d, %s)", err, format.Duration(wait), attempt, limit)
	}}
}

// unreachableError words the error of an outage that outlasted
// --reconnect-timeout; other errors are returned as they are.
func unreachableError(err error) error {
	var ue *client.UnreachableError
	if !errors.As(err, &ue) {
		return err
	}
	return fmt.Errorf("%w for %s (--reconnect-timeout %s; %d attempts): %w", client.ErrUnreachable,
		format.Duration(ue.For), ue.Timeout, ue.Attempts, ue.Last)
}

// watchJobs runs WatchCompactions with the request req returns (called
// again at each reconnection), handing every message to on until on
// returns stop, ctx ends or the stream fails with a definitive error
// (client.Watch); note tells the user about reconnections. After
// --reconnect-timeout without an answer the error wraps
// client.ErrUnreachable.
func (s *session) watchJobs(ctx context.Context, rc reconnect, req func() *compactorv1.WatchCompactionsRequest,
	on func(*compactorv1.WatchCompactionsResponse) (stop bool, err error), note func(string, ...any)) error {
	return unreachableError(s.c.api.Watch(ctx, rc.policy(note), req, on))
}

// etaGrace is how long past its ETA a running job may go without a report
// before watch says the ETA has run out: the server's last report may have
// just missed the job's end.
const etaGrace = 2 * time.Second

// etaWatch makes watch --progress say when a running job's ETA has run out
// with no newer report (a phase without a counter, such as committing,
// reports nothing until it ends): one line, printed etaGrace past the ETA,
// instead of leaving the last line's "ETA <1s" to stand for as long as the
// job takes. Lines of the stream and of the timers are serialized by mu.
type etaWatch struct {
	mu      sync.Mutex
	after   func(time.Duration, func()) (stop func() bool)
	overdue func(j *compactorv1.Job, by time.Duration)
	timers  map[string]etaTimer // job id → its pending timer
	gen     uint64              // numbers the timers, so that a superseded one that fires anyway does nothing
}

type etaTimer struct {
	stop func() bool
	gen  uint64
}

func newETAWatch(after func(time.Duration, func()) func() bool, overdue func(*compactorv1.Job, time.Duration)) *etaWatch {
	return &etaWatch{after: after, overdue: overdue, timers: map[string]etaTimer{}}
}

// seen prints the line of j's latest state (print, under the lock) and
// restarts j's timer: a running job with a known ETA gets one.
func (w *etaWatch) seen(j *compactorv1.Job, print func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	print()
	id := j.GetId()
	if t, ok := w.timers[id]; ok {
		t.stop()
		delete(w.timers, id)
	}
	eta := j.GetProgress().GetEta()
	if j.GetState() != compactorv1.JobState_JOB_STATE_RUNNING || eta == nil {
		return
	}
	w.gen++
	gen := w.gen
	stop := w.after(eta.AsDuration()+etaGrace, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if t, ok := w.timers[id]; !ok || t.gen != gen {
			return // superseded by a newer report
		}
		delete(w.timers, id)
		w.overdue(j, etaGrace)
	})
	w.timers[id] = etaTimer{stop: stop, gen: gen}
}

// stop cancels every pending timer.
func (w *etaWatch) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for id, t := range w.timers {
		t.stop()
		delete(w.timers, id)
	}
}

// afterFunc runs f after d on its own goroutine; the result stops it.
func (s *session) afterFunc(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop }

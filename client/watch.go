package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"connectrpc.com/connect"
	"github.com/sethvargo/go-retry"

	compactorv1 "github.com/compactorhq/compactor/gen/compactor/v1"
)

// ErrUnreachable is wrapped by the error of Watch and Wait when the server
// has not answered for the whole Reconnect.Timeout: an *UnreachableError.
var ErrUnreachable = errors.New("server unavailable")

// UnreachableError is the error of Watch and Wait after an outage of
// Reconnect.Timeout; errors.Is(err, ErrUnreachable) holds for it.
type UnreachableError struct {
	// For is how long the outage lasted, Attempts the reconnections tried.
	For      time.Duration
	Attempts int
	// Timeout is the Reconnect.Timeout that ran out.
	Timeout time.Duration
	// Last is the error of the last attempt.
	Last error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("%v for %s (reconnect timeout %s; %d attempts): %v", ErrUnreachable,
		e.For.Round(time.Millisecond), e.Timeout, e.Attempts, e.Last)
}

// Unwrap gives ErrUnreachable and the last error.
func (e *UnreachableError) Unwrap() []error { return []error{ErrUnreachable, e.Last} }

// Reconnect is how Watch and Wait follow jobs through a server that
// restarts, drains or cannot be reached: they watch again with exponential
// backoff (from 200 ms, doubling up to MaxDelay, with 20% jitter so that
// many clients do not reconnect in step) until a stream delivers a message
// again, or until the server has not answered for Timeout. The zero value
// reconnects forever, at most 5 s apart, silently.
type Reconnect struct {
	// Timeout is how long an outage may last before giving up with an error
	// wrapping ErrUnreachable; 0: no limit (ctx still ends it).
	Timeout time.Duration
	// MaxDelay is the longest wait between two attempts; 0: 5 s.
	MaxDelay time.Duration
	// Notify, when set, is called before each wait with the error that
	// started or continued the outage, the wait and the attempt number
	// (1, 2, ...).
	Notify func(err error, wait time.Duration, attempt int)
}

// reconnectFirst is the first wait of an outage.
const reconnectFirst = 200 * time.Millisecond

func (r Reconnect) maxDelay() time.Duration {
	if r.MaxDelay <= 0 {
		return 5 * time.Second
	}
	return r.MaxDelay
}

// backoff is the schedule of one outage; each delay is told to Notify
// before it is slept.
func (r Reconnect) backoff(last *error) retry.Backoff {
	var limit func(retry.Backoff) retry.Backoff
	if r.Timeout > 0 {
		limit = func(b retry.Backoff) retry.Backoff { return retry.WithMaxDuration(r.Timeout, b) }
	}
	attempt := 0
	return backoff(min(reconnectFirst, r.maxDelay()), r.maxDelay(), limit, func(d time.Duration, stop bool) {
		if !stop && r.Notify != nil {
			attempt++
			r.Notify(*last, d, attempt)
		}
	})
}

// Definitive reports whether err, of a watch or another call, is an answer
// that retrying cannot change: INVALID_ARGUMENT, NOT_FOUND, ALREADY_EXISTS,
// PERMISSION_DENIED, UNAUTHENTICATED, FAILED_PRECONDITION, UNIMPLEMENTED or
// OUT_OF_RANGE. Anything else (UNAVAILABLE, a connection refused or reset, a
// stream cut by a restart, RESOURCE_EXHAUSTED of a busy server) may pass.
func Definitive(err error) bool {
	switch connect.CodeOf(err) {
	case connect.CodeInvalidArgument, connect.CodeNotFound, connect.CodeAlreadyExists, connect.CodePermissionDenied,
		connect.CodeUnauthenticated, connect.CodeFailedPrecondition, connect.CodeUnimplemented, connect.CodeOutOfRange:
		return true
	}
	return false
}

// Watch runs WatchCompactions with the request that req returns (called
// again at each reconnection, so that it can narrow the request to what is
// still of interest), handing every message to on until on returns stop or
// an error (returned as it is), ctx ends (ctx's error is returned, as a
// *connect.Error with code CodeCanceled or CodeDeadlineExceeded), or a
// stream fails with a Definitive error (returned). Every other failure, and
// a stream that ends, start an outage: Watch reconnects as rc says until a
// stream delivers a message; each reconnection starts with the server's
// snapshot again, so on sees the jobs of the request once more. When the
// server has not answered for rc.Timeout the error wraps ErrUnreachable
// and the last error of a watch.
func (c *Client) Watch(ctx context.Context, rc Reconnect, req func() *compactorv1.WatchCompactionsRequest,
	on func(*compactorv1.WatchCompactionsResponse) (stop bool, err error)) error {
	stop, _, err := c.watchOnce(ctx, req(), on)
	for !stop {
		switch {
		case ctx.Err() != nil:
			return ctxError(ctx)
		case err != nil && endsWatch(err):
			return unwrapOn(err)
		}
		last := errOr(err, "stream ended")
		start, attempts := time.Now(), 1
		b := rc.backoff(&last)
		waited := false
		rerr := retry.Do(ctx, b, func(ctx context.Context) error {
			if !waited {
				// The stream has just failed: wait before the first reconnection.
				waited = true
				return retry.RetryableError(last)
			}
			attempts++
			var received bool
			stop, received, err = c.watchOnce(ctx, req(), on)
			switch {
			case stop || received:
				return nil // the outage is over; a stream that failed after messages starts the next one
			case err != nil && endsWatch(err):
				return err
			}
			last = errOr(err, "stream ended")
			return retry.RetryableError(last)
		})
		switch {
		case ctx.Err() != nil:
			return ctxError(ctx)
		case rerr != nil && endsWatch(rerr):
			return unwrapOn(rerr)
		case rerr != nil:
			return &UnreachableError{For: time.Since(start), Attempts: attempts - 1, Timeout: rc.Timeout, Last: last}
		}
	}
	return nil
}

// onError marks an error returned by the callback of Watch, which ends the
// watch as it is.
type onError struct{ err error }

func (e *onError) Error() string { return e.err.Error() }
func (e *onError) Unwrap() error { return e.err }

// endsWatch: err is the callback's or a Definitive one.
func endsWatch(err error) bool {
	var oe *onError
	return errors.As(err, &oe) || Definitive(err)
}

// unwrapOn is the callback's own error for an *onError, else err.
func unwrapOn(err error) error {
	if oe, ok := err.(*onError); ok {
		return oe.err
	}
	return err
}

// ctxError is ctx's error as a *connect.Error.
func ctxError(ctx context.Context) error {
	code := connect.CodeCanceled
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		code = connect.CodeDeadlineExceeded
	}
	return connect.NewError(code, ctx.Err())
}

func errOr(err error, text string) error {
	if err == nil {
		return connect.NewError(connect.CodeUnavailable, errors.New(text))
	}
	return err
}

// watchOnce runs one stream, handing each message to on. received reports
// whether any message arrived. An error of on comes back as an *onError.
func (c *Client) watchOnce(ctx context.Context, req *compactorv1.WatchCompactionsRequest,
	on func(*compactorv1.WatchCompactionsResponse) (bool, error)) (stop, received bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends the stream when we return early
	stream, err := c.Compactions.WatchCompactions(ctx, connect.NewRequest(req))
	if err != nil {
		return false, false, err
	}
	defer stream.Close()
	for stream.Receive() {
		received = true
		stop, err := on(stream.Msg())
		if err != nil {
			return false, received, &onError{err}
		}
		if stop {
			return true, received, nil
		}
	}
	return false, received, stream.Err()
}

// WaitOptions tune Wait.
type WaitOptions struct {
	// Reconnect says how to follow the jobs through an unreachable or
	// restarting server; the zero value reconnects until ctx ends.
	Reconnect Reconnect
	// Progress asks the server for the progress of running jobs (the
	// Job.Progress of the updates handed to OnUpdate).
	Progress bool
	// OnUpdate, when set, is called with every state of a waited-for job
	// that the server sends (the first one of each watch is its state at
	// that time), from the goroutine that called Wait.
	OnUpdate func(*compactorv1.Job)
}

// MaxWatchJobIDs is the most job ids one WatchCompactions accepts; Wait
// watches longer lists that many at a time.
const MaxWatchJobIDs = 1000

// Wait waits until every job of jobIDs (the Job.Id values that Compact
// returned; duplicates collapse) has finished, and returns the jobs in
// their final states, in the order of jobIDs (one entry per distinct id).
// A FAILED or CANCELLED job is returned with a nil error: its State and
// Error say how it ended.
//
// It watches the jobs with WatchCompactions filtered on their ids (at most
// MaxWatchJobIDs per stream, one stream after the other), whose snapshot
// holds each job in whatever state it is, so a job that finished before the
// call is returned at once. opts.OnUpdate sees each state of a job as it
// comes. A broken stream is watched again as
// opts.Reconnect says (see Watch), for the jobs not yet finished. Errors:
// NOT_FOUND for an unknown job id, UNAUTHENTICATED without the token a
// --protect-reads server wants, an error wrapping ErrUnreachable after
// opts.Reconnect.Timeout without an answer, ctx's error (as a
// *connect.Error with code CodeCanceled or CodeDeadlineExceeded) when ctx
// ends first; each wrapped in a *WaitError naming the jobs still awaited.
func (c *Client) Wait(ctx context.Context, opts WaitOptions, jobIDs ...string) ([]*compactorv1.Job, error) {
	if len(jobIDs) == 0 {
		return nil, errors.New("wait for jobs: no job id given")
	}
	var ids []string
	final := make(map[string]*compactorv1.Job, len(jobIDs))
	wanted := make(map[string]bool, len(jobIDs))
	for _, id := range jobIDs {
		if !wanted[id] {
			wanted[id] = true
			ids = append(ids, id)
		}
	}
	for start := 0; start < len(ids); start += MaxWatchJobIDs {
		chunk := ids[start:min(len(ids), start+MaxWatchJobIDs)]
		open := func() []string {
			var out []string
			for _, id := range chunk {
				if final[id] == nil {
					out = append(out, id)
				}
			}
			return out
		}
		err := c.Watch(ctx, opts.Reconnect, func() *compactorv1.WatchCompactionsRequest {
			return &compactorv1.WatchCompactionsRequest{JobIds: open(), IncludeProgress: opts.Progress}
		}, func(m *compactorv1.WatchCompactionsResponse) (bool, error) {
			j := m.GetJob()
			if j == nil || !wanted[j.GetId()] || final[j.GetId()] != nil {
				return false, nil
			}
			if opts.OnUpdate != nil {
				opts.OnUpdate(j)
			}
			if Finished(j.GetState()) {
				final[j.GetId()] = j
			}
			return len(open()) == 0, nil
		})
		if err != nil {
			return nil, &WaitError{JobIDs: open(), Err: err}
		}
	}
	jobs := make([]*compactorv1.Job, len(ids))
	for i, id := range ids {
		jobs[i] = final[id]
	}
	return jobs, nil
}

// WaitError is the error of Wait: the jobs it was still waiting for and
// why it stopped.
type WaitError struct {
	JobIDs []string
	Err    error
}

func (e *WaitError) Error() string { return fmt.Sprintf("wait for %s: %v", jobsLabel(e.JobIDs), e.Err) }
func (e *WaitError) Unwrap() error { return e.Err }

// WaitJob waits until the job with id jobID finishes and returns it in its
// final state (see Wait, with the zero WaitOptions).
func (c *Client) WaitJob(ctx context.Context, jobID string) (*compactorv1.Job, error) {
	jobs, err := c.WaitJobs(ctx, jobID)
	if err != nil {
		return nil, err
	}
	return jobs[0], nil
}

// WaitJobs waits until every job of jobIDs has finished (see Wait, with
// the zero WaitOptions: it reconnects until ctx ends).
func (c *Client) WaitJobs(ctx context.Context, jobIDs ...string) ([]*compactorv1.Job, error) {
	return c.Wait(ctx, WaitOptions{}, jobIDs...)
}

// jobsLabel names ids in an error message: all of them when few, else the
// count and the first one.
func jobsLabel(ids []string) string {
	if len(ids) <= 3 {
		return fmt.Sprintf("jobs %v", ids)
	}
	return fmt.Sprintf("%d jobs (%s, ...)", len(ids), ids[0])
}

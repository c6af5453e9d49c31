package client

import (
	"time"

	"github.com/sethvargo/go-retry"
)

// backoff is the schedule of the client's retries (a push's, a watch's
// reconnections): exponential from first, doubling up to maxDelay, with
// 20% jitter so that many clients do not retry in step, bounded by limit
// (retry.WithMaxRetries or retry.WithMaxDuration; nil: no bound). on, when
// set, sees each step: the wait before the next try, or stop when the
// bound has run out.
func backoff(first, maxDelay time.Duration, limit func(retry.Backoff) retry.Backoff, on func(wait time.Duration, stop bool)) retry.Backoff {
	b := retry.NewExponential(max(first, time.Nanosecond))
	b = retry.WithCappedDuration(max(maxDelay, time.Nanosecond), b)
	b = retry.WithJitterPercent(20, b)
	if limit != nil {
		b = limit(b)
	}
	return retry.BackoffFunc(func() (time.Duration, bool) {
		d, stop := b.Next()
		if on != nil {
			on(d, stop)
		}
		return d, stop
	})
}

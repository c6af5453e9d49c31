package segment

import (
	"context"
	"fmt"
	"testing"
	"time"

	"golang.org/x/time/rate"
)

// holding returns once lim holds a reservation that a wait sleeps on (its
// tokens below zero): the event after which the tests change the cap.
func holding(lim *rate.Limiter) {
	for lim.Tokens() >= 0 {
		time.Sleep(time.Millisecond)
	}
}

// A wait under a cap of a few bytes per second (the next burst is over an
// hour away) goes on at once when the cap is lifted or raised: a running
// compaction's writes follow `compactor throttle --off` without waiting
// out what the old cap asked. So does a wait on a compaction's share of
// the cap.
func TestLiftingTheCapReleasesTheWaitsInProgress(t *testing.T) {
	for _, to := range []int64{0, 1 << 30} {
		for _, shared := range []bool{false, true} {
			t.Run(fmt.Sprintf("to %d bytes per second, shared %v", to, shared), func(t *testing.T) {
				th := NewThrottle(32)
				ctx, lim, wait := context.Background(), th.lim, th.Wait
				if shared {
					defer th.Enter()()
					defer th.Enter()() // two writers: the share applies
					ctx = th.WithShare(ctx, 0.5)
					lim = ctx.Value(shareKey{}).(*share).lim
					wait = func(ctx context.Context, n int64) error { return th.waitShare(ctx, int(n)) }
				}
				if err := wait(ctx, minBurst); err != nil { // spends the first burst at once
					t.Fatal(err)
				}
				done := make(chan error, 1)
				go func() { done <- wait(ctx, minBurst) }()
				holding(lim)
				th.SetLimit(to)
				select {
				case err := <-done:
					if err != nil {
						t.Fatalf("the wait after the cap changed to %d: %v", to, err)
					}
				case <-time.After(time.Minute): // the old cap would hold it for over an hour
					t.Fatalf("a wait is still held a minute after the cap changed from 32 to %d bytes per second", to)
				}
			})
		}
	}
}

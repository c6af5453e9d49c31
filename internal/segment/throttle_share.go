package segment

import (
	"context"
	"fmt"

	"golang.org/x/time/rate"
)

// Throughput shares: a compaction may be given a share (0 < share <= 1) of
// a Throttle's cap, which its Puts do not exceed while another compaction
// writes through the same Throttle; alone, it may use the whole cap. The
// share's own limiter is consulted before the shared one, so a compaction
// over its share waits on its own and leaves the cap to the others.

// Enter counts a compaction that writes through t until the returned
// function is called (once). Shares apply only while more than one
// compaction has entered.
func (t *Throttle) Enter() (leave func()) {
	t.writers.Add(1)
	done := false
	return func() {
		if !done {
			done = true
			t.writers.Add(-1)
		}
	}
}

// shareKey is the context key of a compaction's share.
type shareKey struct{}

// share is one compaction's throughput share and its limiter.
type share struct {
	fraction float64
	lim      *rate.Limiter
}

// WithShare returns ctx carrying a throughput share of fraction (0 <
// fraction <= 1) of t's cap for the Puts made under it; another value
// returns ctx unchanged (no share).
func (t *Throttle) WithShare(ctx context.Context, fraction float64) context.Context {
	if !(fraction > 0 && fraction <= 1) {
		return ctx
	}
	return context.WithValue(ctx, shareKey{}, &share{fraction: fraction, lim: rate.NewLimiter(rate.Inf, minBurst)})
}

// ShareOf returns the throughput share ctx carries (WithShare), 0 for none.
func ShareOf(ctx context.Context) float64 {
	if s, _ := ctx.Value(shareKey{}).(*share); s != nil {
		return s.fraction
	}
	return 0
}

// shareLimit is the bytes per second a share of t allows now: fraction of
// the cap while another compaction writes, 0 (no limit of its own) when
// there is no cap or it writes alone.
func (t *Throttle) shareLimit(s *share) int64 {
	capBps := t.bps.Load()
	if capBps <= 0 || t.writers.Load() <= 1 {
		return 0
	}
	return max(int64(float64(capBps)*s.fraction), 1)
}

// waitShare blocks until n bytes fit the share ctx carries, if any.
func (t *Throttle) waitShare(ctx context.Context, n int) error {
	s, _ := ctx.Value(shareKey{}).(*share)
	if s == nil {
		return nil
	}
	for n > 0 {
		bps := t.shareLimit(s)
		if bps == 0 {
			return nil
		}
		burst := int(max(minBurst, bps/4))
		if rate.Limit(bps) != s.lim.Limit() {
			s.lim.SetLimit(rate.Limit(bps))
			s.lim.SetBurst(burst)
		}
		chunk := min(n, s.lim.Burst())
		// As in wait: a change of the cap wakes the wait, which goes on
		// under the share of the new one.
		took, err := t.take(ctx, s.lim, chunk)
		if err != nil {
			return fmt.Errorf("throttle %d bytes at a share of %.2f of %d bytes/s: %w", chunk, s.fraction, t.bps.Load(), err)
		}
		if took {
			n -= chunk
		}
	}
	return nil
}

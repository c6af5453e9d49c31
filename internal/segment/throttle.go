package segment

import (
	"context"
	"fmt"
	"sync/atomic"

	"golang.org/x/time/rate"
)

// Throttle caps the bytes per second that Puts through it write, shared by
// every compaction of a node (Cassandra's compaction_throughput). Reads and
// deletes are not throttled. The cap can change while compactions run; 0
// means no cap. It is safe for concurrent use.
type Throttle struct {
	lim *rate.Limiter
	bps atomic.Int64
}

// minBurst is the smallest slice of a Put that waits for tokens: small
// enough to keep the rate smooth, large enough not to wait per kilobyte.
const minBurst = 64 << 10

// NewThrottle returns a Throttle capped at bytesPerSecond (0: no cap).
func NewThrottle(bytesPerSecond int64) *Throttle {
	t := &Throttle{lim: rate.NewLimiter(rate.Inf, minBurst)}
	t.SetLimit(bytesPerSecond)
	return t
}

// SetLimit changes the cap to bytesPerSecond (0 or less: no cap); Puts
// waiting for tokens see the new rate at once.
func (t *Throttle) SetLimit(bytesPerSecond int64) {
	if bytesPerSecond <= 0 {
		t.bps.Store(0)
		t.lim.SetLimit(rate.Inf)
		return
	}
	t.bps.Store(bytesPerSecond)
	// A quarter second of bytes per wait: smooth, and within 10 % over any
	// interval of a few seconds.
	t.lim.SetBurst(int(max(minBurst, bytesPerSecond/4)))
	t.lim.SetLimit(rate.Limit(bytesPerSecond))
}

// Limit returns the cap in bytes per second; 0 when there is none.
func (t *Throttle) Limit() int64 { return t.bps.Load() }

// wait blocks until n bytes may be written, in slices of at most the burst.
func (t *Throttle) wait(ctx context.Context, n int) error {
	for n > 0 {
		if t.bps.Load() == 0 {
			return nil
		}
		chunk := min(n, t.lim.Burst())
		if err := t.lim.WaitN(ctx, chunk); err != nil {
			// rate refuses at once a wait that would end past ctx's
			// deadline; a burst lowered meanwhile is retried with it.
			cause := ctx.Err()
			if _, ok := ctx.Deadline(); cause == nil && ok {
				cause = context.DeadlineExceeded
			}
			if cause == nil {
				continue
			}
			return fmt.Errorf("throttle %d bytes at %d bytes/s: %w", chunk, t.bps.Load(), cause)
		}
		n -= chunk
	}
	return nil
}

// Wait blocks until n more bytes may pass under t's cap (at once when there
// is none): how a reader that is not a Put (the scrub's verification)
// keeps to a rate. Errors: ctx's end, wrapped.
func (t *Throttle) Wait(ctx context.Context, n int64) error {
	for n > 0 {
		chunk := int(min(n, 1<<30))
		if err := t.wait(ctx, chunk); err != nil {
			return err
		}
		n -= int64(chunk)
	}
	return nil
}

// Wrap returns b with its Puts throttled by t.
func (t *Throttle) Wrap(b Blobs) Blobs { return throttledBlobs{Blobs: b, t: t} }

type throttledBlobs struct {
	Blobs
	t *Throttle
}

func (b throttledBlobs) Put(ctx context.Context, key string, data []byte) error {
	if err := b.t.wait(ctx, len(data)); err != nil {
		return err
	}
	return b.Blobs.Put(ctx, key, data)
}

package segment

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// Throttle caps the bytes per second that Puts through it write, shared by
// every compaction of a node (Cassandra's compaction_throughput). Reads and
// deletes are not throttled. The cap can change while compactions run,
// and a Put waiting under the old one waits under the new one at once; 0
// means no cap. It is safe for concurrent use.
type Throttle struct {
	lim *rate.Limiter
	bps atomic.Int64
	// writers counts the compactions writing through it (Enter), for
	// throughput shares (throttle_share.go).
	writers atomic.Int32

	// mu serializes SetLimit; changed is closed (and replaced) by each
	// SetLimit that changes the cap, which wakes the waits in progress.
	mu      sync.Mutex
	changed chan struct{}
}

// minBurst is the smallest slice of a Put that waits for tokens: small
// enough to keep the rate smooth, large enough not to wait per kilobyte.
const minBurst = 64 << 10

// NewThrottle returns a Throttle capped at bytesPerSecond (0: no cap).
func NewThrottle(bytesPerSecond int64) *Throttle {
	t := &Throttle{lim: rate.NewLimiter(rate.Inf, minBurst), changed: make(chan struct{})}
	t.SetLimit(bytesPerSecond)
	return t
}

// SetLimit changes the cap to bytesPerSecond (0 or less: no cap). The Puts
// (and Waits) waiting for tokens wait under the new cap at once: a cap
// lifted or raised releases them without their waiting out what the old
// one asked, a cap lowered holds them to it. Setting the cap in force
// changes nothing.
func (t *Throttle) SetLimit(bytesPerSecond int64) {
	bytesPerSecond = max(bytesPerSecond, 0)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.bps.Load() == bytesPerSecond {
		return
	}
	if bytesPerSecond == 0 {
		t.lim.SetLimit(rate.Inf)
	} else {
		// A quarter second of bytes per wait: smooth, and within 10 %
		// over any interval of a few seconds.
		t.lim.SetBurst(int(max(minBurst, bytesPerSecond/4)))
		t.lim.SetLimit(rate.Limit(bytesPerSecond))
	}
	t.bps.Store(bytesPerSecond)
	// After the new cap is in force: a woken wait reserves under it.
	close(t.changed)
	t.changed = make(chan struct{})
}

// changes returns the channel the next change of the cap closes.
func (t *Throttle) changes() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.changed
}

// take waits until lim grants n tokens, and reports whether it did: false
// (the tokens given back) when n is over lim's burst (lowered meanwhile)
// or when the cap changed first; the caller then asks again under the
// limits in force. Errors: ctx's end, and a wait that would end past ctx's
// deadline (refused at once, as context.DeadlineExceeded).
func (t *Throttle) take(ctx context.Context, lim *rate.Limiter, n int) (bool, error) {
	changed := t.changes() // before the reservation: a change after it wakes the wait
	now := time.Now()
	r := lim.ReserveN(now, n)
	if !r.OK() {
		return false, nil
	}
	d := r.DelayFrom(now)
	if d == 0 {
		return true, nil
	}
	if deadline, ok := ctx.Deadline(); ok && now.Add(d).After(deadline) {
		r.CancelAt(now)
		return false, context.DeadlineExceeded
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true, nil
	case <-changed:
		r.Cancel()
		return false, nil
	case <-ctx.Done():
		r.Cancel()
		return false, ctx.Err()
	}
}

// Limit returns the cap in bytes per second; 0 when there is none.
func (t *Throttle) Limit() int64 { return t.bps.Load() }

// wait blocks until n bytes may be written, in slices of at most the burst,
// each under the cap in force.
func (t *Throttle) wait(ctx context.Context, n int) error {
	for n > 0 {
		if t.bps.Load() == 0 {
			return nil
		}
		chunk := min(n, t.lim.Burst())
		took, err := t.take(ctx, t.lim, chunk)
		if err != nil {
			return fmt.Errorf("throttle %d bytes at %d bytes/s: %w", chunk, t.bps.Load(), err)
		}
		if took {
			n -= chunk
		}
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
	if err := b.t.waitShare(ctx, len(data)); err != nil {
		return err
	}
	if err := b.t.wait(ctx, len(data)); err != nil {
		return err
	}
	return b.Blobs.Put(ctx, key, data)
}

package segment_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/compactorhq/compactor/internal/segment"
	"github.com/compactorhq/compactor/internal/segment/segmenttest"
)

func TestThrottleWaitsAndCancels(t *testing.T) {
	th := segment.NewThrottle(0)
	b := th.Wrap(segmenttest.NewMem(t))
	ctx := context.Background()
	if err := b.Put(ctx, "free", make([]byte, 10<<20)); err != nil { // no cap: no wait
		t.Fatal(err)
	}
	th.SetLimit(1 << 20) // 1 MiB/s: a 4 MiB Put cannot finish before the deadline
	if got := th.Limit(); got != 1<<20 {
		t.Fatalf("Limit() = %d", got)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := b.Put(short, "capped", make([]byte, 4<<20)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Put over the cap with a short deadline: %v, want DeadlineExceeded", err)
	}
	if _, err := b.Get(ctx, "capped"); !errors.Is(err, segment.ErrNotExist) {
		t.Fatalf("a throttled Put that gave up wrote the blob: %v", err)
	}
	th.SetLimit(0)
	if err := b.Put(ctx, "free-again", make([]byte, 10<<20)); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkThrottleHoldsTheCap writes 1 MiB blobs through a 32 MiB/s cap
// and reports the rate achieved as a fraction of the cap (cap_ratio, want
// within 0.9..1.1) next to the usual MB/s.
func BenchmarkThrottleHoldsTheCap(b *testing.B) {
	const capBytes = 32 << 20
	th := segment.NewThrottle(capBytes)
	sink := &discard{}
	blobs := th.Wrap(sink)
	data := make([]byte, 1<<20)
	ctx := context.Background()
	// Spend the initial burst, so that the measured interval is steady state.
	_ = blobs.Put(ctx, "warm", make([]byte, capBytes/4))
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	start := time.Now()
	for b.Loop() {
		if err := blobs.Put(ctx, "k", data); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)*float64(len(data))/time.Since(start).Seconds()/capBytes, "cap_ratio")
}

package segment

import (
	"context"
	"errors"
	"testing"
)

func TestAShareLimitsItsCompactionOnlyWhileAnotherWrites(t *testing.T) {
	th := NewThrottle(1 << 20)
	ctx := th.WithShare(context.Background(), 0.25)
	s := ctx.Value(shareKey{}).(*share)

	leaveA := th.Enter()
	if got := th.shareLimit(s); got != 0 {
		t.Errorf("alone: share limit %d; want none (the whole cap)", got)
	}
	leaveB := th.Enter()
	if got := th.shareLimit(s); got != 1<<18 {
		t.Errorf("with another compaction: share limit %d; want a quarter of the cap, %d", got, 1<<18)
	}
	if err := th.waitShare(ctx, 1024); err != nil {
		t.Fatal(err)
	}
	if got := s.lim.Limit(); got != 1<<18 {
		t.Errorf("the share's limiter runs at %v bytes/s; want %d", got, 1<<18)
	}
	// Over its share, it waits on its own limiter, and a cancelled wait
	// says so.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := th.waitShare(cctx, 4<<20); !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled wait over the share: %v; want context.Canceled", err)
	}
	leaveB()
	leaveB() // idempotent
	if got := th.shareLimit(s); got != 0 {
		t.Errorf("alone again: share limit %d; want none", got)
	}
	th.SetLimit(0)
	leaveB = th.Enter()
	if got := th.shareLimit(s); got != 0 {
		t.Errorf("no cap: share limit %d; want none", got)
	}
	leaveA()
	leaveB()
	for _, bad := range []float64{0, -1, 1.5} {
		if c := th.WithShare(context.Background(), bad); c.Value(shareKey{}) != nil {
			t.Errorf("WithShare(%v) carries a share", bad)
		}
	}
}

package clock_test

import (
	"testing"
	"time"

	"github.com/compactorhq/compactor/internal/clock"
)

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func TestFakeStepMovesOnlyTheWallClock(t *testing.T) {
	f := clock.NewFake(t0)
	free := clock.StepFree(f)
	f.Advance(time.Second)
	f.Step(24 * time.Hour)
	f.Advance(time.Second)
	if got, want := f.Now(), t0.Add(24*time.Hour+2*time.Second); !got.Equal(want) {
		t.Fatalf("wall %s, want %s", got, want)
	}
	if got := f.Mono(); got != 2*time.Second {
		t.Fatalf("monotonic %s, want 2s", got)
	}
	if got, want := free(), t0.Add(2*time.Second); !got.Equal(want) {
		t.Fatalf("step-free time %s, want %s (the step left out)", got, want)
	}
	f.Step(-time.Hour)
	if got, want := free(), t0.Add(2*time.Second); !got.Equal(want) {
		t.Fatalf("step-free time after a step back %s, want %s", got, want)
	}
}

func TestShiftedKeepsTheBaseMonotonicClock(t *testing.T) {
	f := clock.NewFake(t0)
	s := clock.Shift(f, 5*time.Minute)
	f.Advance(time.Second)
	s.Step(-10 * time.Minute)
	if got, want := s.Now(), t0.Add(time.Second-5*time.Minute); !got.Equal(want) {
		t.Fatalf("shifted wall %s, want %s", got, want)
	}
	if s.Mono() != time.Second {
		t.Fatalf("shifted monotonic %s, want 1s", s.Mono())
	}
}

func TestFuncFollowsItsWallClock(t *testing.T) {
	now := t0
	c := clock.Func(func() time.Time { return now })
	now = now.Add(3 * time.Second)
	if c.Mono() != 3*time.Second || !c.Now().Equal(now) {
		t.Fatalf("Func clock: %s, %s", c.Now(), c.Mono())
	}
}

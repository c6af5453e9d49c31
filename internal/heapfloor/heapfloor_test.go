package heapfloor

import (
	"runtime"
	"runtime/debug"
	"testing"
)

func TestPercent(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		name        string
		live, floor uint64
		base, want  int
	}{
		{"a small heap reaches the floor", 8 * mib, 64 * mib, 100, 700},
		{"a heap at half the floor takes the base", 32 * mib, 64 * mib, 100, 100},
		{"a heap above the floor takes the base", 400 * mib, 64 * mib, 100, 100},
		{"never below a higher base", 16 * mib, 64 * mib, 400, 400},
		{"a raised base still lifts to the floor", 4 * mib, 64 * mib, 200, 1500},
		{"an empty heap counts as 1 MiB", 0, 64 * mib, 100, 6300},
		{"a floor under 1 MiB does nothing", 0, mib / 2, 100, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Percent(tc.live, tc.floor, tc.base); got != tc.want {
				t.Errorf("Percent(%d, %d, %d) = %d, want %d", tc.live, tc.floor, tc.base, got, tc.want)
			}
		})
	}
}

// gogc reads the process's GOGC.
func gogc() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

func TestTunerFollowsTheLiveHeap(t *testing.T) {
	base := gogc()
	t.Cleanup(func() { debug.SetGCPercent(base) })
	debug.SetGCPercent(100)
	const floor = 256 << 20
	tu := Start(floor)
	if tu == nil {
		t.Fatal("Start(256 MiB) returned nil")
	}
	// The tuner runs on the finalizer goroutine after each collection:
	// collect until it has seen the heap each step sets up. A live heap
	// larger than half the floor brings the base back...
	big := make([]byte, 200<<20)
	for i := range big {
		big[i] = 1
	}
	for tu.GOGC() != 100 {
		runtime.GC()
		runtime.Gosched()
	}
	runtime.KeepAlive(big)
	if got := gogc(); got != 100 {
		t.Fatalf("with 200 MiB live and a 256 MiB floor GOGC = %d, want 100", got)
	}
	// ...and once it is gone, the floor lifts GOGC again: the finalizer
	// re-armed itself across the cycles.
	big = nil
	for tu.GOGC() == 100 {
		runtime.GC()
		runtime.Gosched()
	}
	if got := gogc(); got <= 100 || got != tu.GOGC() {
		t.Fatalf("with a small live heap and a 256 MiB floor GOGC = %d (tuner says %d), want above 100 and equal", got, tu.GOGC())
	}
	tu.Stop()
	if got := gogc(); got != 100 {
		t.Fatalf("after Stop GOGC = %d, want the 100 of before Start", got)
	}
}

func TestStartWithoutFloorOrCollectorDoesNothing(t *testing.T) {
	base := gogc()
	t.Cleanup(func() { debug.SetGCPercent(base) })
	if tu := Start(0); tu != nil {
		t.Error("Start(0) returned a tuner")
	}
	debug.SetGCPercent(-1)
	if tu := Start(64 << 20); tu != nil {
		t.Error("Start with GOGC=off returned a tuner")
	}
	if got := gogc(); got != -1 {
		t.Errorf("GOGC = %d after Start with GOGC=off, want -1 kept", got)
	}
	var tu *Tuner
	tu.Stop() // a nil tuner's Stop does nothing
}

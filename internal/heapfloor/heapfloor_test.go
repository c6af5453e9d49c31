package heapfloor

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
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
		{"a heap under 4 MiB is held to the runtime's minimum goal", 2 * mib, 64 * mib, 100, 1600},
		{"no live heap measured yet", 0, 64 * mib, 100, 1600},
		{"a floor under the runtime's minimum does nothing", 0, 2 * mib, 100, 100},
		{"a floor under 1 MiB does nothing", 0, mib / 2, 100, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Percent(tc.live, tc.floor, tc.base); got != tc.want {
				t.Errorf("Percent(%d, %d, %d) = %d, want %d", tc.live, tc.floor, tc.base, got, tc.want)
			}
		})
	}
}

// heapGoal reads the collector's heap goal, bytes.
func heapGoal() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/goal:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// TestStartPutsTheHeapGoalAtTheFloor: with the small live heap of a test
// binary, the goal the runtime computes is the floor, not a multiple of it
// (GOGC raised too far would put the runtime's own minimum, 4 MiB ×
// GOGC/100, above it).
func TestStartPutsTheHeapGoalAtTheFloor(t *testing.T) {
	base := gogc()
	t.Cleanup(func() { debug.SetGCPercent(base) })
	debug.SetGCPercent(100)
	runtime.GC()
	const floor = 64 << 20
	tu := Start(floor)
	defer tu.Stop()
	for _, when := range []string{"at Start", "after a collection"} {
		if goal := heapGoal(); goal < floor/2 || goal > floor+floor/16 {
			t.Errorf("%s: heap goal %d bytes (GOGC %d), want about the floor %d", when, goal, gogc(), floor)
		}
		runtime.GC()
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

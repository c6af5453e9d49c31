// Package heapfloor keeps the Go collector's heap goal from falling under a
// floor while the live heap is small.
//
// The collector starts a cycle when the heap reaches the live heap of the
// last cycle times 1 + GOGC/100. A server whose live heap is a few megabytes
// (one serving reads and listings between compactions: about 7 MB) then
// collects every few megabytes allocated: a paged read of 60,000 records
// from the log allocates about 400 MB and ran 53 cycles, a quarter of the
// server's CPU for that read. With a floor the collector runs once per floor
// allocated instead; once the live heap is half the floor or more (a
// compaction, a vector index in memory) GOGC applies unchanged, so the floor
// adds at most its own size to the heap and changes nothing for large heaps.
//
// The rule is that of the GOGC tuners of Uber's services and TiDB (a heap
// target met by raising GOGC while the live heap is under it), limited to a
// floor: GOGC is never set below the process's own value.
package heapfloor

import (
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// runtimeMinHeap is the runtime's least heap goal at GOGC=100: the collector
// starts no cycle under runtimeMinHeap × GOGC/100 (heapMinimum in
// runtime/mgcpacer.go, 4 MiB scaled by GOGC), whatever the live heap.
const runtimeMinHeap = 4 << 20

// Percent returns the GOGC value that puts the heap goal at floor bytes for
// a live heap of live bytes, and never below base (the process's own GOGC):
// the goal is live × (1 + GOGC/100), and at least runtimeMinHeap ×
// GOGC/100, so GOGC is at most floor/runtimeMinHeap × 100 (1,600 for a 64
// MiB floor): a live heap under 4 MiB (or none measured yet, live 0) gets
// that, and its goal is the floor, not a multiple of it.
func Percent(live, floor uint64, base int) int {
	limit := floor / runtimeMinHeap * 100
	if floor <= live {
		return base
	}
	p := limit
	if live > 0 {
		p = min(p, (floor-live)*100/live)
	}
	if p > math.MaxInt32 {
		p = math.MaxInt32
	}
	return max(base, int(p))
}

// Tuner adjusts GOGC after every collection from the live heap that
// collection measured. The zero value is not usable: call Start.
type Tuner struct {
	floor uint64
	base  int

	mu      sync.Mutex
	stopped bool
	current int
	samples []metrics.Sample
}

// Start installs a tuner that keeps the heap goal at floor bytes or more
// (floor 0 returns nil and changes nothing). The process's GOGC at the
// call (100 unless the GOGC variable says otherwise) is the lowest value
// the tuner sets; with GOGC=off (negative) Start returns nil and leaves
// the collector alone. Stop ends it and restores that GOGC.
func Start(floor uint64) *Tuner {
	if floor == 0 {
		return nil
	}
	base := debug.SetGCPercent(100)
	debug.SetGCPercent(base)
	if base < 0 {
		return nil
	}
	t := &Tuner{floor: floor, base: base, current: base,
		samples: []metrics.Sample{{Name: "/gc/heap/live:bytes"}}}
	t.tune()
	t.arm()
	return t
}

// arm sets a finalizer on a new object, which the next collection finds
// unreachable: the finalizer runs once after each cycle and re-arms.
func (t *Tuner) arm() {
	sentinel := new([16]byte)
	runtime.SetFinalizer(sentinel, func(*[16]byte) {
		if t.tune() {
			t.arm()
		}
	})
}

// tune sets GOGC from the live heap of the last cycle, and reports whether
// the tuner still runs.
func (t *Tuner) tune() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return false
	}
	metrics.Read(t.samples)
	if t.samples[0].Value.Kind() != metrics.KindUint64 {
		return false // the runtime no longer reports it: leave GOGC alone
	}
	p := Percent(t.samples[0].Value.Uint64(), t.floor, t.base)
	// Setting GOGC takes the heap lock: skip changes under a tenth.
	if p != t.current && (p == t.base || p*10 < t.current*9 || p*10 > t.current*11) {
		debug.SetGCPercent(p)
		t.current = p
	}
	return true
}

// GOGC returns the value the tuner last set (the process's own before any).
func (t *Tuner) GOGC() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.current
}

// Stop ends the tuner and restores the GOGC the process had at Start. A
// nil tuner's Stop does nothing.
func (t *Tuner) Stop() {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.stopped = true
	debug.SetGCPercent(t.base)
	t.current = t.base
}

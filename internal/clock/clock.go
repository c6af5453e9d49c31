// Package clock is the process's clock, injected where time matters: the
// wall clock for the times that rows record and surfaces show (it may step
// when the system time is set), and the monotonic clock for durations and
// timeouts (it never steps). The database's own clock, which decides leases
// shared by several replicas, is the catalog's (see catalog.Config).
package clock

import (
	"sync"
	"time"
)

// Clock is a process's clock.
type Clock interface {
	// Now is the wall-clock time. It may jump forwards or backwards.
	Now() time.Time
	// Mono is a reading of the monotonic clock: the time elapsed since an
	// arbitrary origin fixed for the Clock. Only differences of readings
	// mean anything; they never go backwards.
	Mono() time.Duration
}

// System is the operating system's clock.
func System() Clock { return system{origin: time.Now()} }

type system struct{ origin time.Time }

func (system) Now() time.Time        { return time.Now() }
func (s system) Mono() time.Duration { return time.Since(s.origin) }

// Func is the Clock of a wall-clock function whose time never steps (a test's
// fake clock that only moves forward): its monotonic reading is the wall
// time elapsed since the first call.
func Func(now func() time.Time) Clock {
	return &funcClock{now: now, origin: now()}
}

type funcClock struct {
	now    func() time.Time
	origin time.Time
}

func (f *funcClock) Now() time.Time      { return f.now() }
func (f *funcClock) Mono() time.Duration { return f.now().Sub(f.origin) }

// StepFree returns a wall time that never steps: c's wall time at the call,
// advanced by c's monotonic clock since. It drifts from c.Now by exactly the
// steps c's wall clock takes.
func StepFree(c Clock) func() time.Time {
	wall, mono := c.Now(), c.Mono()
	return func() time.Time { return wall.Add(c.Mono() - mono) }
}

// Fake is a Clock for tests: it stands still until moved. Advance moves
// both readings, as time passing does; Step moves only the wall clock, as
// setting the system time does. Safe for concurrent use.
type Fake struct {
	mu   sync.Mutex
	wall time.Time
	mono time.Duration
}

// NewFake returns a Fake whose wall clock reads t.
func NewFake(t time.Time) *Fake { return &Fake{wall: t} }

// Now implements Clock.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.wall
}

// Mono implements Clock.
func (f *Fake) Mono() time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mono
}

// Advance lets d (>= 0) pass and returns the new wall time.
func (f *Fake) Advance(d time.Duration) time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.wall, f.mono = f.wall.Add(d), f.mono+d
	return f.wall
}

// Step sets the wall clock d later (d < 0: earlier) without time passing.
func (f *Fake) Step(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.wall = f.wall.Add(d)
}

// Shifted is a Clock that follows another one with its wall clock off by a
// settable offset: a replica whose system clock is skewed, or is stepped
// while the process runs. Safe for concurrent use.
type Shifted struct {
	base Clock
	mu   sync.Mutex
	off  time.Duration
}

// Shift returns base with its wall clock off by offset.
func Shift(base Clock, offset time.Duration) *Shifted { return &Shifted{base: base, off: offset} }

// Now implements Clock.
func (s *Shifted) Now() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.base.Now().Add(s.off)
}

// Mono implements Clock: the base's, untouched by the offset.
func (s *Shifted) Mono() time.Duration { return s.base.Mono() }

// Step moves the wall clock by d more.
func (s *Shifted) Step(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.off += d
}

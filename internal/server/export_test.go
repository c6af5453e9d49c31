package server

import (
	"context"
	"time"
)

// HoldShutdownDelay makes Run wait for release to be closed instead of
// the shutdown delay.
func (a *App) HoldShutdownDelay(release <-chan struct{}) {
	a.after = func(time.Duration) <-chan time.Time {
		c := make(chan time.Time)
		go func() { <-release; close(c) }()
		return c
	}
}

// ProbeBlobs probes the blob store once, as the periodic probe does.
func (a *App) ProbeBlobs(ctx context.Context) { a.probe.check(ctx) }

// ClaimGate is the claim gate Open set on the manager (closed at shutdown
// and while the blob store is unreachable).
func (a *App) ClaimGate() func() error { return a.claimGate }

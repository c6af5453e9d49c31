package manager

import (
	"context"
	"fmt"

	"github.com/compactorhq/compactor/internal/catalog"
)

// SetClaimGate makes the workers consult gate before each claim: while it
// returns an error, this node claims no job (it polls again every
// Config.PollInterval), and jobs already running go on. The process uses
// it to stop claiming while a store the jobs need is unreachable, and at
// shutdown. It may be called at any time; nil removes the gate.
func (m *Manager) SetClaimGate(gate func() error) {
	if gate == nil {
		m.gate.Store(nil)
		return
	}
	m.gate.Store(&gate)
}

// claim claims the next job for this node, unless the claim gate is
// closed: then the error matches catalog.ErrNoJob.
func (m *Manager) claim(ctx context.Context) (catalog.Job, error) {
	if gate := m.gate.Load(); gate != nil {
		if err := (*gate)(); err != nil {
			return catalog.Job{}, fmt.Errorf("claims paused: %w: %w", err, catalog.ErrNoJob)
		}
	}
	return m.store.ClaimJob(ctx, m.owner, m.cfg.LeaseDuration)
}

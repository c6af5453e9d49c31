package manager

import (
	"context"
	"time"

	"github.com/compactorhq/compactor/internal/catalog"
)

// NodeStatus is a registered replica as surfaces show it.
type NodeStatus struct {
	catalog.Node
	// Alive: it heartbeat within three heartbeat intervals, by the
	// catalog's clock (Node.Silence), not this replica's.
	Alive bool
	// Self: this process.
	Self bool
}

// heartbeat registers or refreshes this node in the catalog.
func (m *Manager) heartbeat(ctx context.Context, startedAt time.Time) error {
	return m.store.Heartbeat(ctx, catalog.Node{Name: m.cfg.Node, Address: m.cfg.Address, Version: m.cfg.Version, StartedAt: startedAt})
}

// heartbeatLoop refreshes this node's registration every
// Config.HeartbeatInterval until ctx ends.
func (m *Manager) heartbeatLoop(ctx context.Context, startedAt time.Time) {
	every(ctx, m.cfg.HeartbeatInterval, func() bool {
		if err := m.heartbeat(ctx, startedAt); err != nil && ctx.Err() == nil {
			m.logger.Warn("node heartbeat", "err", err)
		}
		return true
	})
}

// Nodes returns every registered replica by name; one silent for more than
// three heartbeat intervals by the catalog's clock is shown as gone (Alive
// false).
func (m *Manager) Nodes(ctx context.Context) ([]NodeStatus, error) {
	nodes, err := m.store.ListNodes(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]NodeStatus, len(nodes))
	alive := 0
	for i, n := range nodes {
		out[i] = NodeStatus{Node: n, Alive: n.Silence <= 3*m.cfg.HeartbeatInterval, Self: n.Name == m.cfg.Node}
		if out[i].Alive {
			alive++
		}
	}
	m.metrics.nodes.Set(float64(alive))
	return out, nil
}

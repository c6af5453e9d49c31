package catalog

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// The nodes: every replica registers itself and heartbeats, by the
// database's clock.

// Node is one replica of compactor serve as registered in the catalog.
type Node struct {
	Name        string // unique per replica (host name by default)
	Address     string // where its RPC port answers
	Version     string // build version
	StartedAt   time.Time
	HeartbeatAt time.Time // last heartbeat, by the database's clock
	// Silence is the time since the last heartbeat by the database's clock
	// when ListNodes read it (no replica's own clock enters it); a node
	// silent past its TTL is gone. Ignored by Heartbeat.
	Silence time.Duration
}

// Heartbeat registers node n, or refreshes it: address, version and start
// time as given, HeartbeatAt now by the database's clock. Errors: ErrInvalidArgument (empty name),
// ErrUnavailable.
func (c *Catalog) Heartbeat(ctx context.Context, n Node) error {
	if n.Name == "" {
		return fmt.Errorf("heartbeat: node name must not be empty: %w", ErrInvalidArgument)
	}
	err := c.writeTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, c.d.q(`INSERT INTO nodes (name, address, version, started_at, heartbeat_at) VALUES (?, ?, ?, ?, `+c.d.clockMs+`)
			ON CONFLICT (name) DO UPDATE SET address = excluded.address, version = excluded.version,
				started_at = excluded.started_at, heartbeat_at = excluded.heartbeat_at`),
			n.Name, n.Address, n.Version, ms(n.StartedAt), c.dbNow())
		return err
	})
	return c.wrap(err, "heartbeat of node %s", n.Name)
}

// ListNodes returns the registered nodes by name, each with the time since
// its last heartbeat by the database's clock (Node.Silence).
func (c *Catalog) ListNodes(ctx context.Context) ([]Node, error) {
	rows, err := c.readQuery(ctx, `SELECT name, address, version, started_at, heartbeat_at, `+c.d.clockMs+` - heartbeat_at FROM nodes ORDER BY name`, c.dbNow())
	if err != nil {
		return nil, c.wrap(err, "list nodes")
	}
	defer rows.Close()
	nodes := []Node{}
	for rows.Next() {
		var (
			n                          Node
			started, lastBeat, silence int64
		)
		if err := rows.Scan(&n.Name, &n.Address, &n.Version, &started, &lastBeat, &silence); err != nil {
			return nil, c.wrap(err, "list nodes")
		}
		n.StartedAt, n.HeartbeatAt, n.Silence = fromMs(started), fromMs(lastBeat), time.Duration(max(silence, 0))*time.Millisecond
		nodes = append(nodes, n)
	}
	if err := rows.Err(); err != nil {
		return nil, c.wrap(err, "list nodes")
	}
	return nodes, nil
}

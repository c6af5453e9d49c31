package catalog

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// Leader leases: a named lease that one owner holds at a time, by the
// database's clock (the scheduler's, so that one replica schedules). Not to
// be confused with the job lease a worker holds on a RUNNING job (queue.go),
// which is a column of the job's row.

// AcquireLeaderLease takes or renews the named leader lease for owner until ttl from now
// by the database's clock, and reports whether owner holds it: it does when no one held it, when
// owner held it already, or when the holder's lease expired. Used for the
// scheduler's leader lease. Errors: ErrInvalidArgument, ErrUnavailable.
func (c *Catalog) AcquireLeaderLease(ctx context.Context, name, owner string, ttl time.Duration) (bool, error) {
	if name == "" || owner == "" || ttl <= 0 {
		return false, fmt.Errorf("acquire leader lease %q for %q for %s: name, owner and a positive ttl are required: %w", name, owner, ttl, ErrInvalidArgument)
	}
	dbNow := c.dbNow()
	var holder string
	err := c.writeTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, c.d.q(`INSERT INTO leases (name, owner, expires_at) VALUES (?, ?, `+c.d.clockMs+` + ?)
			ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at
			WHERE leases.owner = excluded.owner OR leases.expires_at < `+c.d.clockMs),
			name, owner, dbNow, ttl.Milliseconds(), dbNow)
		if err != nil {
			return err
		}
		return tx.QueryRowContext(ctx, c.d.q(`SELECT owner FROM leases WHERE name = ?`), name).Scan(&holder)
	})
	if err != nil {
		return false, c.wrap(err, "acquire leader lease %s for %s", name, owner)
	}
	return holder == owner, nil
}

// ReleaseLeaderLease gives up the named leader lease if owner holds it (at shutdown, so
// another replica takes it at once instead of after its expiry).
func (c *Catalog) ReleaseLeaderLease(ctx context.Context, name, owner string) error {
	err := c.writeTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, c.d.q(`DELETE FROM leases WHERE name = ? AND owner = ?`), name, owner)
		return err
	})
	return c.wrap(err, "release leader lease %s of %s", name, owner)
}

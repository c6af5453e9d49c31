package catalog

import (
	"context"
	"database/sql"
)

// readQuery runs a read query (dialect-translated) on the read pool.
// Statements are not prepared and kept: the pure-Go SQLite driver parses a
// statement at every execution anyway (a CPU profile of the RPC
// benchmarks shows it), and a prepared statement kept on a pooled connection
// held a stale read snapshot under load in a test of two replicas.
func (c *Catalog) readQuery(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return c.r.QueryContext(ctx, c.d.q(query), args...)
}

// readRow is readQuery for one row.
func (c *Catalog) readRow(ctx context.Context, query string, args ...any) *sql.Row {
	return c.r.QueryRowContext(ctx, c.d.q(query), args...)
}

// txQuery runs query (dialect-translated) in tx.
func (c *Catalog) txQuery(ctx context.Context, tx *sql.Tx, query string, args ...any) (*sql.Rows, error) {
	return tx.QueryContext(ctx, c.d.q(query), args...)
}

// txExec is txQuery for a statement without rows.
func (c *Catalog) txExec(ctx context.Context, tx *sql.Tx, query string, args ...any) (sql.Result, error) {
	return tx.ExecContext(ctx, c.d.q(query), args...)
}

package catalog

import (
	"context"
	"database/sql"
	"errors"
	"sync"
)

// stmtCache keeps the prepared statements of one pool by query text, so
// that a hot query is parsed once per connection instead of once per call
// (SQLite's parser was a seventh of the CPU of a read RPC). Only constant
// query texts (or a bounded set of them) go through it.
type stmtCache struct {
	db *sql.DB
	mu sync.Mutex
	m  map[string]*sql.Stmt
}

// get returns the statement of query, preparing it on first use.
func (s *stmtCache) get(ctx context.Context, query string) (*sql.Stmt, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st, ok := s.m[query]; ok {
		return st, nil
	}
	st, err := s.db.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	if s.m == nil {
		s.m = make(map[string]*sql.Stmt)
	}
	s.m[query] = st
	return st, nil
}

// cached returns the statement of query if it was prepared, else nil.
func (s *stmtCache) cached(query string) *sql.Stmt {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[query]
}

// close closes every statement.
func (s *stmtCache) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for _, st := range s.m {
		errs = append(errs, st.Close())
	}
	s.m = nil
	return errors.Join(errs...)
}

// readQuery runs a read query (dialect-translated) on the read pool. The
// statement cache is not used for it: the pure-Go SQLite driver parses a
// statement at every execution anyway (see the profile in README
// "Performance"), and a prepared statement kept on a pooled connection
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

// prepareWrites is kept for the enqueue path's call sites; it prepares
// nothing now (see readQuery).
func (c *Catalog) prepareWrites(context.Context) {}

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

// readQuery runs a cached read query (dialect-translated) on the read pool.
func (c *Catalog) readQuery(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	st, err := c.rs.get(ctx, c.d.q(query))
	if err != nil {
		return nil, err
	}
	return st.QueryContext(ctx, args...)
}

// readRow is readQuery for one row.
func (c *Catalog) readRow(ctx context.Context, query string, args ...any) *sql.Row {
	st, err := c.rs.get(ctx, c.d.q(query))
	if err != nil {
		// A *sql.Row cannot be made with an error: run it unprepared,
		// which reports the same error.
		return c.r.QueryRowContext(ctx, c.d.q(query), args...)
	}
	return st.QueryRowContext(ctx, args...)
}

// txQuery runs query (dialect-translated) in tx, through its prepared
// statement when one was prepared on the write pool (prepareWrites);
// never prepares itself: on SQLite the write pool is one connection, which
// tx holds.
func (c *Catalog) txQuery(ctx context.Context, tx *sql.Tx, query string, args ...any) (*sql.Rows, error) {
	if st := c.ws.cached(c.d.q(query)); st != nil {
		return tx.StmtContext(ctx, st).QueryContext(ctx, args...)
	}
	return tx.QueryContext(ctx, c.d.q(query), args...)
}

// txExec is txQuery for a statement without rows.
func (c *Catalog) txExec(ctx context.Context, tx *sql.Tx, query string, args ...any) (sql.Result, error) {
	if st := c.ws.cached(c.d.q(query)); st != nil {
		return tx.StmtContext(ctx, st).ExecContext(ctx, args...)
	}
	return tx.ExecContext(ctx, c.d.q(query), args...)
}

// prepareWrites prepares the statements of the enqueue path on the write
// pool, once, outside any transaction. A failure only leaves them
// unprepared.
func (c *Catalog) prepareWrites(ctx context.Context) {
	if c.ws.cached(c.d.q(c.insertJobQuery())) != nil {
		return
	}
	for _, q := range []string{c.insertJobQuery(), c.lockCollectionsQuery(1), queuedOfCollectionsQuery(1)} {
		if _, err := c.ws.get(ctx, c.d.q(q)); err != nil {
			return
		}
	}
}

package catalog

import (
	"context"
	"database/sql"
	"errors"
	"sync"
)

// maxReadStmts bounds the read statements a catalog keeps prepared. The
// package's read queries are constant texts or a bounded set of shapes (a
// filter's placeholders); a text beyond the bound runs unprepared.
const maxReadStmts = 256

// stmtCache keeps the read pool's prepared statements by query text, so
// that a hot read is parsed once per connection instead of at every call
// (modernc.org/sqlite keeps a single statement's compiled program with the
// *sql.Stmt and resets it when its rows close; the parse was about a
// seventh of a read RPC's CPU). It is used where the dialect asks for it
// (SQLite): pgx already caches the statements of each connection by text.
//
// A kept statement holds no read snapshot between calls: database/sql
// closes the rows of every read (sql.Row.Scan, the end of rows.Next, or
// the callers' deferred Close), and closing them resets the statement,
// which ends its read transaction. TestPreparedReadsSeeLaterWrites checks
// that a write committed on the writer is seen by the next prepared read.
type stmtCache struct {
	db *sql.DB
	mu sync.RWMutex
	m  map[string]*sql.Stmt // guarded by mu; nil once closed
}

func newStmtCache(db *sql.DB) *stmtCache {
	return &stmtCache{db: db, m: make(map[string]*sql.Stmt)}
}

// get returns the prepared statement of query (dialect-translated),
// preparing it on first use; nil when it cannot be kept (the cache is full
// or closed, or preparing failed: the caller runs the query unprepared,
// and meets the error there if it persists).
func (s *stmtCache) get(ctx context.Context, query string) *sql.Stmt {
	s.mu.RLock()
	st, ok := s.m[query]
	full := s.m == nil || len(s.m) >= maxReadStmts
	s.mu.RUnlock()
	if ok {
		return st
	}
	if full {
		return nil
	}
	st, err := s.db.PrepareContext(ctx, query)
	if err != nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.m[query]; ok || s.m == nil || len(s.m) >= maxReadStmts {
		// Another call prepared it first, or the cache filled or closed
		// meanwhile.
		_ = st.Close()
		return old
	}
	s.m[query] = st
	return st
}

// close closes every statement; get keeps none afterwards.
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

// readQuery runs a read query (dialect-translated) on the read pool,
// through a prepared statement where the dialect keeps them.
func (c *Catalog) readQuery(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	query = c.d.q(query)
	if c.stmts != nil {
		if st := c.stmts.get(ctx, query); st != nil {
			return st.QueryContext(ctx, args...)
		}
	}
	return c.r.QueryContext(ctx, query, args...)
}

// readRow is readQuery for one row.
func (c *Catalog) readRow(ctx context.Context, query string, args ...any) *sql.Row {
	query = c.d.q(query)
	if c.stmts != nil {
		if st := c.stmts.get(ctx, query); st != nil {
			return st.QueryRowContext(ctx, args...)
		}
	}
	return c.r.QueryRowContext(ctx, query, args...)
}

// txQuery runs query (dialect-translated) in tx.
func (c *Catalog) txQuery(ctx context.Context, tx *sql.Tx, query string, args ...any) (*sql.Rows, error) {
	return tx.QueryContext(ctx, c.d.q(query), args...)
}

// txExec is txQuery for a statement without rows.
func (c *Catalog) txExec(ctx context.Context, tx *sql.Tx, query string, args ...any) (sql.Result, error) {
	return tx.ExecContext(ctx, c.d.q(query), args...)
}

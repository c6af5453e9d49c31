package catalog_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/catalog/catalogtest"
	"github.com/compactorhq/compactor/internal/materialize"
)

// fakeClock is a settable clock for Config.Now.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 1, 2, 3, 4, 5, 678_000_000, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d and returns the new time.
func (c *fakeClock) Advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	return c.now
}

// env is one test's database on one backend.
type env struct {
	backend string
	driver  string
	dsn     string
	clock   *fakeClock
	// aging is the catalog's Config.PriorityAging (0: its default).
	aging time.Duration
}

// open opens the test's database (the same one on every call) with the fake
// clock; it is closed when the test ends.
func (e *env) open(t testing.TB) *catalog.Catalog {
	t.Helper()
	cfg := catalog.Config{Driver: e.driver, DSN: e.dsn, Now: e.clock.Now, PriorityAging: e.aging}
	if e.driver == "sqlite" {
		// The database's clock is the process's, the fake one.
		return catalogtest.OpenConfig(t, cfg)
	}
	// The fake clock stands in for the server's, so that tests move
	// leases forward without waiting.
	cfg.DatabaseClock = e.clock.Now
	c, err := catalog.Open(context.Background(), cfg)
	if err != nil {
		t.Fatalf("open %s catalog: %v", e.backend, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// forEachBackend runs fn on SQLite and, when catalogtest.PostgresEnv is set,
// PostgreSQL (a schema per test).
func forEachBackend(t *testing.T, fn func(t *testing.T, e *env)) {
	t.Helper()
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		fn(t, &env{backend: "sqlite", driver: "sqlite", dsn: filepath.Join(t.TempDir(), "data", "catalog.db"), clock: newClock()})
	})
	if base := postgresBase(); base != "" {
		t.Run("postgres", func(t *testing.T) {
			t.Parallel()
			fn(t, &env{backend: "postgres", driver: "postgres", dsn: postgresSchema(t, base), clock: newClock()})
		})
	}
}

func postgresBase() string { return catalogtest.PostgresBase() }

// postgresSchema creates a schema for the test and returns a DSN that uses
// it; the schema is dropped when the test ends.
func postgresSchema(t testing.TB, base string) string { return catalogtest.PostgresSchema(t, base) }

var ctx = context.Background()

// embedding returns a deterministic embedding of dimension dim.
func embedding(seed, dim int) []float32 {
	e := make([]float32, dim)
	for i := range e {
		e[i] = float32(seed%97)/7 + float32(i)/3
	}
	return e
}

func strp(s string) *string { return &s }

// adds returns n ADD records with ids prefix-0 .. prefix-(n-1).
func adds(prefix string, n, dim int) []materialize.OperationRecord {
	ops := make([]materialize.OperationRecord, n)
	for i := range ops {
		ops[i] = materialize.OperationRecord{
			Op:        materialize.OpAdd,
			ID:        fmt.Sprintf("%s-%d", prefix, i),
			Embedding: embedding(i, dim),
			Document:  strp(fmt.Sprintf("document %s %d", prefix, i)),
			Metadata:  materialize.Metadata{"n": float64(i), "even": i%2 == 0},
		}
	}
	return ops
}

func mustCreate(t testing.TB, c *catalog.Catalog, name string, dim int) catalog.Collection {
	t.Helper()
	col, err := c.CreateCollection(ctx, name, dim)
	if err != nil {
		t.Fatalf("CreateCollection(%q, %d): %v", name, dim, err)
	}
	return col
}

func mustAppend(t testing.TB, c *catalog.Catalog, id string, ops []materialize.OperationRecord) (int64, int64) {
	t.Helper()
	first, last, err := c.AppendLog(ctx, id, ops, catalog.AppendLimits{})
	if err != nil {
		t.Fatalf("AppendLog(%d records): %v", len(ops), err)
	}
	return first, last
}

func mustGet(t testing.TB, c *catalog.Catalog, id string) catalog.Collection {
	t.Helper()
	col, err := c.GetCollection(ctx, id)
	if err != nil {
		t.Fatalf("GetCollection: %v", err)
	}
	return col
}

func mustReadLog(t testing.TB, c *catalog.Catalog, id string, after, upTo int64, limit int) []materialize.OperationRecord {
	t.Helper()
	ops, err := c.ReadLog(ctx, id, after, upTo, limit)
	if err != nil {
		t.Fatalf("ReadLog(%d, %d, %d): %v", after, upTo, limit, err)
	}
	return ops
}

func offsets(ops []materialize.OperationRecord) []int64 {
	out := make([]int64, len(ops))
	for i, op := range ops {
		out[i] = op.Offset
	}
	return out
}

func span(from, to int64) []int64 {
	out := []int64{}
	for o := from; o <= to; o++ {
		out = append(out, o)
	}
	return out
}

// wantErr checks err against want: nil means no error; otherwise errors.Is.
func wantErr(t testing.TB, what string, err, want error) {
	t.Helper()
	switch {
	case want == nil && err != nil:
		t.Fatalf("%s: unexpected error %v", what, err)
	case want != nil && !errors.Is(err, want):
		t.Fatalf("%s: error %v, want one matching %v", what, err, want)
	}
}

func equal(t testing.TB, what string, got, want any) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s:\n got %+v\nwant %+v", what, got, want)
	}
}

// ms truncates t to the milliseconds the catalog stores.
func ms(t time.Time) time.Time { return time.UnixMilli(t.UnixMilli()).UTC() }

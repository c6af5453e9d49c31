package catalog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

func TestRebindNumbered(t *testing.T) {
	tests := []struct{ in, want string }{
		{"SELECT 1", "SELECT 1"},
		{"SELECT a FROM t WHERE b = ?", "SELECT a FROM t WHERE b = $1"},
		{"VALUES (?, ?), (?, ?)", "VALUES ($1, $2), ($3, $4)"},
		{"? ? ? ? ? ? ? ? ? ? ?", "$1 $2 $3 $4 $5 $6 $7 $8 $9 $10 $11"},
	}
	for _, tt := range tests {
		if got := rebindNumbered(tt.in); got != tt.want {
			t.Errorf("rebindNumbered(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	if got := sqliteDialect(time.Second).q("a = ?"); got != "a = ?" {
		t.Errorf("sqlite rewrote placeholders: %q", got)
	}
}

func TestTimeEncoding(t *testing.T) {
	if got := fromMs(ms(time.Time{})); !got.IsZero() || got != (time.Time{}) {
		t.Errorf("zero time round-trips to %#v", got)
	}
	if msOrNull(time.Time{}) != nil {
		t.Error("zero time is not stored as NULL")
	}
	at := time.Date(2026, 3, 4, 5, 6, 7, 891_234_567, time.FixedZone("X", 3600))
	want := time.Date(2026, 3, 4, 4, 6, 7, 891_000_000, time.UTC)
	if got := fromMs(ms(at)); got != want {
		t.Errorf("round trip of %v: %v, want %v", at, got, want)
	}
	var got time.Time
	for _, src := range []any{nil, int64(0)} {
		got = want
		if err := (msTime{&got}).Scan(src); err != nil || got != (time.Time{}) {
			t.Errorf("Scan(%v): %v, %v; want the zero time", src, got, err)
		}
	}
	if err := (msTime{&got}).Scan("2026"); err == nil {
		t.Error("Scan of a string: no error")
	}
}

// TestBusyDatabaseIsUnavailable holds the database's write lock from another
// connection: a write then fails after the busy timeout with ErrUnavailable.
func TestBusyDatabaseIsUnavailable(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "busy.db")
	c, err := openDialect(ctx, Config{DSN: path}, sqliteDialect(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	col, err := c.CreateCollection(ctx, "busy", 0)
	if err != nil {
		t.Fatal(err)
	}

	other, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	conn, err := other.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}

	_, err = c.CreateCollection(ctx, "blocked", 0)
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("CreateCollection while another connection writes: %v, want ErrUnavailable", err)
	}
	if err := c.RecordSuccess(ctx, col.ID); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("RecordSuccess while another connection writes: %v, want ErrUnavailable", err)
	}
	// Readers are not blocked by a writer in WAL mode.
	if _, err := c.GetCollection(ctx, col.ID); err != nil {
		t.Fatalf("GetCollection while another connection writes: %v", err)
	}
	if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateCollection(ctx, "unblocked", 0); err != nil {
		t.Fatalf("CreateCollection after the lock is released: %v", err)
	}
}

func TestStorageFullClassification(t *testing.T) {
	tests := []struct {
		name string
		kind func(error) errKind
		err  error
		want errKind
	}{
		{"postgres disk_full", postgresKind, &pgconn.PgError{Code: "53100"}, kindFull},
		{"postgres out_of_memory", postgresKind, fmt.Errorf("insert: %w", &pgconn.PgError{Code: "53200"}), kindFull},
		{"postgres too_many_connections stays transient", postgresKind, &pgconn.PgError{Code: "53300"}, kindUnavailable},
		{"postgres unique violation", postgresKind, &pgconn.PgError{Code: "23505"}, kindUnique},
		{"sqlite: ENOSPC from the file system", sqliteKind, &os.PathError{Op: "write", Path: "/x", Err: syscall.ENOSPC}, kindFull},
		{"sqlite: EDQUOT", sqliteKind, fmt.Errorf("w: %w", syscall.EDQUOT), kindFull},
		{"sqlite: another error", sqliteKind, errors.New("boom"), kindOther},
	}
	for _, tt := range tests {
		if got := tt.kind(tt.err); got != tt.want {
			t.Errorf("%s: kind %d, want %d", tt.name, got, tt.want)
		}
	}
	c := &Catalog{d: postgresDialect(), log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	err := c.classify(fmt.Errorf("insert log rows: %w", &pgconn.PgError{Code: "53100", Message: "could not extend file \"base/1/2\""}))
	var full *StorageFullError
	if !errors.As(err, &full) || full.Store != StoreCatalog || full.Code != "SQLSTATE 53100" || !errors.Is(err, ErrStorageFull) {
		t.Fatalf("classify(disk_full) = %v (%T), want a *StorageFullError of the catalog with code SQLSTATE 53100", err, err)
	}
	if strings.Contains(err.Error(), "base/1/2") {
		t.Fatalf("message %q carries the server's path", err.Error())
	}
	if c.full.Load() == nil {
		t.Fatal("classify did not record the full state")
	}
}

// A PostgreSQL session of the catalog ends a transaction left idle for
// defaultIdleTxTimeout, so that a replica frozen inside one (SIGSTOP) cannot
// hold the row lock of its job past its lease: other replicas skip locked
// rows, and would never take the job over. A DSN that sets its own value
// keeps it.
func TestPostgresIdleTxTimeout(t *testing.T) {
	for _, tc := range []struct{ dsn, want string }{
		{"postgres://u@h:5432/db?sslmode=disable", "postgres://u@h:5432/db?idle_in_transaction_session_timeout=10000&sslmode=disable"},
		{"postgres://u@h/db?idle_in_transaction_session_timeout=0", "postgres://u@h/db?idle_in_transaction_session_timeout=0"},
		{"host=h dbname=db", "host=h dbname=db idle_in_transaction_session_timeout=10000"},
		{"host=h idle_in_transaction_session_timeout=5000", "host=h idle_in_transaction_session_timeout=5000"},
	} {
		if got := withIdleTxTimeout(tc.dsn, defaultIdleTxTimeout); got != tc.want {
			t.Errorf("withIdleTxTimeout(%q) = %q, want %q", tc.dsn, got, tc.want)
		}
	}

	dsn := os.Getenv("COMPACTOR_TEST_POSTGRES_DSN")
	if dsn == "" {
		t.Skip("COMPACTOR_TEST_POSTGRES_DSN is not set: the session setting is not checked on a server")
	}
	p, err := postgresDialect().connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	db := p.w
	var got string
	if err := db.QueryRow("SHOW idle_in_transaction_session_timeout").Scan(&got); err != nil {
		t.Fatal(err)
	}
	if got != "10s" {
		t.Errorf("idle_in_transaction_session_timeout of a catalog session = %q, want 10s", got)
	}
}

package catalog_test

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/compactorhq/compactor/internal/catalog"
)

// TestExclusiveOpenRefusesASecondHolder opens one catalog exclusively twice,
// as two `compactor serve` processes would: the second is refused with an
// error naming the catalog and the first holder, and succeeds once the first
// closes. On SQLite the two opens take the same flock(2) on separate file
// descriptions, which exclude each other exactly as two processes do.
func TestExclusiveOpenRefusesASecondHolder(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		if e.driver == "postgres" {
			// Replicas share a PostgreSQL catalog: Exclusive changes nothing.
			a, err := catalog.Open(ctx, catalog.Config{Driver: e.driver, DSN: e.dsn, Exclusive: true, Holder: "a"})
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			b, err := catalog.Open(ctx, catalog.Config{Driver: e.driver, DSN: e.dsn, Exclusive: true, Holder: "b"})
			if err != nil {
				t.Fatalf("a second replica on one PostgreSQL catalog: %v", err)
			}
			_ = b.Close()
			return
		}
		first, err := catalog.Open(ctx, catalog.Config{Driver: e.driver, DSN: e.dsn, Exclusive: true, Holder: "node first, pid 1"})
		if err != nil {
			t.Fatalf("first exclusive open: %v", err)
		}
		closed := false
		t.Cleanup(func() {
			if !closed {
				_ = first.Close()
			}
		})

		second, err := catalog.Open(ctx, catalog.Config{Driver: e.driver, DSN: e.dsn, Exclusive: true, Holder: "node second, pid 2"})
		if err == nil {
			_ = second.Close()
			t.Fatal("second exclusive open succeeded while the first holds the catalog")
		}
		var locked *catalog.LockedError
		if !errors.As(err, &locked) || !errors.Is(err, catalog.ErrLocked) {
			t.Fatalf("second exclusive open: %v, want a *LockedError matching ErrLocked", err)
		}
		t.Logf("refused: %v", err)
		if !strings.Contains(locked.Holder, "node first, pid 1") {
			t.Errorf("holder %q does not name the first process", locked.Holder)
		}
		if !strings.Contains(err.Error(), "in use by another compactor serve") {
			t.Errorf("error %q does not say what holds the catalog", err)
		}

		// A non-exclusive open (tests, tools) is not affected.
		other, err := catalog.Open(ctx, catalog.Config{Driver: e.driver, DSN: e.dsn})
		if err != nil {
			t.Fatalf("non-exclusive open beside the holder: %v", err)
		}
		_ = other.Close()

		if err := first.Close(); err != nil {
			t.Fatalf("close the first: %v", err)
		}
		closed = true
		again, err := catalog.Open(ctx, catalog.Config{Driver: e.driver, DSN: e.dsn, Exclusive: true, Holder: "node second, pid 2"})
		if err != nil {
			t.Fatalf("exclusive open after the holder closed: %v", err)
		}
		if err := again.Close(); err != nil {
			t.Fatal(err)
		}
	})
}

func TestSQLiteLockFileNamesTheHolder(t *testing.T) {
	dsn := t.TempDir() + "/catalog.db"
	c, err := catalog.Open(ctx, catalog.Config{DSN: dsn, Exclusive: true, Holder: "node a, pid 7"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	b, err := os.ReadFile(dsn + ".lock")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(b), "node a, pid 7, since ") {
		t.Errorf("lock file holds %q", b)
	}
}

func TestParseLocation(t *testing.T) {
	for _, tt := range []struct {
		in, driver string
		bad        bool
	}{
		{"./data/catalog.db", "sqlite", false},
		{"/var/lib/compactor/catalog.db", "sqlite", false},
		{"file:/var/lib/compactor/catalog.db?_pragma=cache_size(-20000)", "sqlite", false},
		{"file:///var/lib/compactor/catalog.db", "sqlite", false},
		{"postgres://compactor@db:5432/compactor?sslmode=disable", "postgres", false},
		{"postgresql://compactor:secret@db/compactor", "postgres", false},
		{"POSTGRES://db/compactor", "", true}, // pgx reads lower-case schemes only
		{"postgres://db:notaport/compactor", "", true},
		{"postgres://db/compactor?sslmode=sometimes", "", true},
		{"mysql://db/compactor", "", true},
		{"", "", true},
	} {
		driver, err := catalog.ParseLocation(tt.in)
		if tt.bad {
			if !errors.Is(err, catalog.ErrInvalidArgument) {
				t.Errorf("ParseLocation(%q) = %q, %v; want ErrInvalidArgument", tt.in, driver, err)
			}
			continue
		}
		if err != nil || driver != tt.driver {
			t.Errorf("ParseLocation(%q) = %q, %v; want %q", tt.in, driver, err, tt.driver)
		}
	}
	_, err := catalog.ParseLocation("postgres://u:hunter2@db:x/c")
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("a bad URL's error must not repeat its password: %v", err)
	}
}

func TestRedactLocation(t *testing.T) {
	for in, want := range map[string]string{
		"./data/catalog.db": "./data/catalog.db",
		"postgres://compactor:hunter2@db:5432/c?sslmode=disable": "postgres://compactor:xxxxx@db:5432/c?sslmode=disable",
		"postgres://db/c?password=hunter2&sslmode=disable":       "postgres://db/c?password=xxxxx&sslmode=disable",
	} {
		if got := catalog.RedactLocation(in); got != want {
			t.Errorf("RedactLocation(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestOpenUnreachablePostgresIsUnavailable: a server that does not answer
// fails Open (it does not hang), as ErrUnavailable.
func TestOpenUnreachablePostgresIsUnavailable(t *testing.T) {
	// Port 1 on loopback: nothing listens there; the connection is refused.
	_, err := catalog.Open(ctx, catalog.Config{Driver: "postgres", DSN: "postgres://postgres@127.0.0.1:1/none?sslmode=disable", Exclusive: true})
	if !errors.Is(err, catalog.ErrUnavailable) {
		t.Fatalf("Open on a closed port: %v, want ErrUnavailable", err)
	}
	if !strings.Contains(err.Error(), "127.0.0.1") {
		t.Errorf("error %q does not name the server", err)
	}
}

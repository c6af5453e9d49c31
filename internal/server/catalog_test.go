package server_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/catalog/catalogtest"
	"github.com/compactorhq/compactor/internal/server"
)

// TestSecondServeOnOneCatalogIsRefused opens two apps on one SQLite
// catalog, as two `compactor serve` processes would: the second fails with
// an error naming --catalog and the first process, and the first keeps
// working. On PostgreSQL (when COMPACTOR_TEST_POSTGRES_DSN is set, one
// schema) both open: replicas share the catalog and its job queue.
func TestSecondServeOnOneCatalogIsRefused(t *testing.T) {
	run := func(t *testing.T, configure func(*server.Config)) {
		ctx := context.Background()
		cfg := server.DefaultConfig()
		cfg.DataDir = t.TempDir()
		cfg.Manager.Node = "first-node"
		configure(&cfg)
		if err := cfg.Validate(); err != nil {
			t.Fatal(err)
		}
		first, err := server.Open(ctx, cfg, nil)
		if err != nil {
			t.Fatalf("first open: %v", err)
		}
		defer first.Close()

		cfg2 := cfg
		cfg2.Manager.Node = "second-node"
		second, err := server.Open(ctx, cfg2, nil)
		if err == nil {
			_ = second.Close()
			t.Fatal("a second app opened the catalog the first holds")
		}
		if !errors.Is(err, catalog.ErrLocked) || !strings.Contains(err.Error(), "--catalog") || !strings.Contains(err.Error(), "node first-node, pid ") {
			t.Fatalf("second open: %v; want ErrLocked naming --catalog and the first node", err)
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("the error repeats the password: %v", err)
		}
		if err := first.Catalog.Ping(ctx); err != nil {
			t.Errorf("the first app's catalog after the refusal: %v", err)
		}
	}
	t.Run("sqlite", func(t *testing.T) { run(t, func(*server.Config) {}) })
	t.Run("postgres replicas share it", func(t *testing.T) {
		dsn := postgresSchema(t)
		ctx := context.Background()
		var apps []*server.App
		for _, node := range []string{"replica-1", "replica-2"} {
			cfg := server.DefaultConfig()
			cfg.DataDir, cfg.CatalogDSN, cfg.Manager.Node = t.TempDir(), dsn, node
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			app, err := server.Open(ctx, cfg, nil)
			if err != nil {
				t.Fatalf("open %s: %v", node, err)
			}
			defer app.Close()
			apps = append(apps, app)
		}
		for _, app := range apps {
			if err := app.Catalog.Ping(ctx); err != nil {
				t.Errorf("a replica's catalog: %v", err)
			}
		}
	})
}

// TestOpenNamesTheFlagOfAnUnreachableCatalog: a PostgreSQL server that does
// not answer fails Open at once with an error naming --catalog and the
// server, without the password.
func TestOpenNamesTheFlagOfAnUnreachableCatalog(t *testing.T) {
	cfg := server.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.CatalogDSN = "postgres://compactor:hunter2@127.0.0.1:1/compactor?sslmode=disable"
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	app, err := server.Open(context.Background(), cfg, nil)
	if err == nil {
		_ = app.Close()
		t.Fatal("open succeeded on a closed port")
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, "--catalog postgres://compactor:xxxxx@127.0.0.1:1/compactor") || !errors.Is(err, catalog.ErrUnavailable) || strings.Contains(msg, "hunter2") {
		t.Fatalf("open: %v; want ErrUnavailable naming --catalog and the server, password masked", err)
	}
}

// postgresSchema returns a DSN of a schema of the test's own on the server
// of COMPACTOR_TEST_POSTGRES_DSN, dropped when the test ends; it skips the
// test when the variable is unset.
func postgresSchema(t *testing.T) string {
	t.Helper()
	base := catalogtest.PostgresBase()
	if base == "" {
		t.Skip(catalogtest.PostgresEnv + " is not set: no PostgreSQL to test against")
	}
	return catalogtest.PostgresSchema(t, base)
}

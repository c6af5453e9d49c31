package catalog

import (
	"context"
	"embed"
	"fmt"
	"io/fs"

	"github.com/pressly/goose/v3"
)

// migrationFiles holds the versioned SQL migrations, one directory per
// dialect (migrations/sqlite, migrations/postgres). It is read-only.
//
//go:embed migrations
var migrationFiles embed.FS

// migrate applies the pending migrations of the dialect with goose's
// provider API (no goose global state). Applying is idempotent: an
// up-to-date database is left as it is.
func (c *Catalog) migrate(ctx context.Context) error {
	fsys, err := fs.Sub(migrationFiles, c.d.migrations)
	if err != nil {
		return fmt.Errorf("migrations %s: %w", c.d.migrations, err)
	}
	opts := []goose.ProviderOption{
		goose.WithDisableGlobalRegistry(true),
		goose.WithSlog(c.log),
	}
	opts = append(opts, c.d.gooseOptions...)
	p, err := goose.NewProvider(c.d.goose, c.w, fsys, opts...)
	if err != nil {
		return fmt.Errorf("load migrations: %w", err)
	}
	// p.Close would close c.w: the provider is simply dropped.
	results, err := p.Up(ctx)
	if err != nil {
		return fmt.Errorf("apply migrations: %w", err)
	}
	for _, r := range results {
		c.log.InfoContext(ctx, "migration applied", "dialect", c.d.name, "version", r.Source.Version, "duration", r.Duration)
	}
	return nil
}

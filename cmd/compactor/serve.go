package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/cli"
	"github.com/compactorhq/compactor/internal/heapfloor"
	"github.com/compactorhq/compactor/internal/server"
)

// logConfig selects the log format and level of serve and demo.
type logConfig struct {
	format string
	level  string
}

func (l *logConfig) register(fs *pflag.FlagSet, format string) {
	l.format = format
	l.level = "info"
	fs.StringVar(&l.format, "log-format", l.format, "log format: json or text")
	fs.StringVar(&l.level, "log-level", l.level, "log level: debug, info, warn or error")
}

func (l *logConfig) logger(w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(l.level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", l.level)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch l.format {
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want json or text", l.format)
}

func newServeCmd(s cli.Streams) *cobra.Command {
	cfg := server.DefaultConfig()
	var logs logConfig
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the compaction service (API, status page and metrics on one port)",
		Long: `Run the compaction service: the Connect API (gRPC, gRPC-Web and Connect on one
port), the status page at /, /metrics, /healthz and /readyz. Embedded storage
by default: SQLite and local files under --data-dir; --catalog postgres://...
and --blob-url s3://... for shared storage. One serve per catalog: a second
one on the same catalog is refused. Every flag falls back to
the environment variable COMPACTOR_<FLAG> (e.g. COMPACTOR_LISTEN).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			logger, err := logs.logger(s.Err)
			if err != nil {
				return err
			}
			if err := cfg.Validate(); err != nil {
				return err
			}
			return serve(cmd.Context(), cfg, logger, nil)
		},
	}
	cfg.RegisterFlags(cmd.Flags())
	logs.register(cmd.Flags(), "json")
	return cmd
}

// serve runs the server until ctx ends. started, when set, is called with
// the app and its address once it serves.
func serve(ctx context.Context, cfg server.Config, logger *slog.Logger, started func(*server.App, net.Addr)) error {
	// The Go memory limit follows the container's memory limit (cgroup),
	// 90 % of it by default, unless GOMEMLIMIT is set; AUTOMEMLIMIT=off
	// leaves it alone and AUTOMEMLIMIT=0.8 takes another ratio. The
	// in-flight request bound is derived from it.
	if _, err := memlimit.SetGoMemLimitWithOpts(memlimit.WithProvider(memlimit.FromCgroup),
		memlimit.WithLogger(logger.With("component", "memlimit"))); err != nil {
		logger.Warn("set the go memory limit from the container's", "err", err)
	}
	defer heapfloor.Start(cfg.HeapFloor()).Stop()
	app, err := server.Open(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer func() {
		if err := app.Close(); err != nil {
			logger.Warn("close storage", "err", err)
		}
	}()
	return app.Run(ctx, nil, func(addr net.Addr) {
		logger.Info("serving", "addr", addr.String(), "data_dir", cfg.DataDir,
			"catalog", catalog.RedactLocation(cfg.CatalogDSN), "blob_url", cfg.BlobURL,
			"auth", app.TokenRequired())
		if started != nil {
			started(app, addr)
		}
	})
}

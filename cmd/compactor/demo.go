package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	"github.com/compactorhq/compactor"
	"github.com/compactorhq/compactor/client"
	compactorv1 "github.com/compactorhq/compactor/gen/compactor/v1"
	"github.com/compactorhq/compactor/internal/cli"
	"github.com/compactorhq/compactor/internal/server"
)

// demoCollection is the name of the collection the demo loads.
const demoCollection = "debian-bookworm"

func newDemoCmd(s cli.Streams) *cobra.Command {
	cfg := server.DefaultConfig()
	cfg.ShutdownDelay = 0 // one local process, no load balancer to wait for
	var logs logConfig
	var dataDir string
	var exitAfterLoad bool
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Serve with embedded storage, load the bundled Debian sample, keep serving",
		Long: `Start the server with embedded storage in a fresh data directory, create the
collection "debian-bookworm", push the bundled real sample (5,000 Debian package
records with 64-dim embeddings) with the CLI's own push, compact it, push the
217 security and point updates, compact again, show two records, then print the
page URL and how to call the API with the CLI, buf curl, grpcurl and curl, and
keep serving with the scheduler running until Ctrl-C.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			logger, err := logs.logger(s.Err)
			if err != nil {
				return err
			}
			if dataDir == "" {
				if dataDir, err = os.MkdirTemp("", "compactor-demo-"); err != nil {
					return fmt.Errorf("create a data directory: %w", err)
				}
			}
			cfg.DataDir = dataDir
			if err := cfg.Validate(); err != nil {
				return err
			}
			return demo(cmd.Context(), s, cfg, logger, exitAfterLoad)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&cfg.Listen, "listen", cfg.Listen, "address to serve on (host:port)")
	fs.StringVar(&dataDir, "data-dir", "", "data directory (default: a new temporary directory)")
	fs.DurationVar(&cfg.Manager.Interval, "schedule-interval", cfg.Manager.Interval, "time between scheduler runs")
	fs.BoolVar(&exitAfterLoad, "exit-after-load", false, "stop once the sample is loaded and compacted (for scripts)")
	logs.register(fs, "text")
	logs.level = "warn"
	return cmd
}

// demo serves until ctx ends, loading the sample once the server is up.
func demo(ctx context.Context, s cli.Streams, cfg server.Config, logger *slog.Logger, exitAfterLoad bool) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ready := make(chan net.Addr, 1)
	served := make(chan error, 1)
	start := time.Now()
	go func() {
		served <- serve(ctx, cfg, logger, func(_ *server.App, addr net.Addr) { ready <- addr })
	}()
	var addr net.Addr
	select {
	case addr = <-ready:
	case err := <-served:
		return err
	}
	base := "http://" + addr.String()
	out := s.Out
	fmt.Fprintf(out, "compactor demo: serving on %s with data in %s\n\n", base, cfg.DataDir)

	id, err := loadSample(ctx, s, base)
	if err != nil {
		cancel()
		<-served
		return err
	}
	fmt.Fprintf(out, "\nReady in %s.\n", time.Since(start).Round(100*time.Millisecond))
	if exitAfterLoad {
		cancel()
		err := <-served
		fmt.Fprintf(out, "Stopped (--exit-after-load). The data is kept in %s: serve it with\n  go run ./cmd/compactor serve --data-dir %s\n", cfg.DataDir, cfg.DataDir)
		return err
	}
	printGuide(out, base, addr.String(), id)
	fmt.Fprintln(out, "\nServing with the scheduler running; press Ctrl-C to stop.")
	err = <-served
	if err == nil {
		fmt.Fprintf(out, "stopped; the data is kept in %s (remove it when done)\n", cfg.DataDir)
	}
	return err
}

// loadSample creates the collection and drives the load with the CLI's own
// commands, so its output is what an operator would see; they name the
// collection by its name.
func loadSample(ctx context.Context, s cli.Streams, base string) (string, error) {
	run := func(stdin io.Reader, args ...string) error {
		shown := make([]string, len(args))
		for i, a := range args {
			shown[i] = a
			if strings.ContainsAny(a, " :") {
				shown[i] = "'" + a + "'"
			}
		}
		fmt.Fprintf(s.Out, "\n$ compactor %s\n", strings.Join(shown, " "))
		// The demo's own server, whatever the user's client configuration
		// file and COMPACTOR_CONTEXT say.
		args = append(args, "--addr", base, "--config", os.DevNull, "--context", "")
		return cli.Execute(ctx, newRoot(cli.Streams{In: stdin, Out: s.Out, Err: s.Err}), args, cli.Streams{In: stdin, Out: s.Out, Err: s.Err})
	}
	c := client.New(http.DefaultClient, base)
	res, err := c.Collections.CreateCollection(ctx, connect.NewRequest(&compactorv1.CreateCollectionRequest{Name: demoCollection, Dimension: 64}))
	if connect.CodeOf(err) == connect.CodeAlreadyExists {
		// A kept data directory: serve what it holds.
		list, lerr := c.Collections.ListCollections(ctx, connect.NewRequest(&compactorv1.ListCollectionsRequest{PageSize: 1000}))
		if lerr != nil {
			return "", fmt.Errorf("list collections: %w", lerr)
		}
		for _, coll := range list.Msg.GetCollections() {
			if coll.GetName() == demoCollection {
				fmt.Fprintf(s.Out, "collection %s (%s) is already loaded in this data directory: serving it as it is\n",
					demoCollection, coll.GetId())
				return coll.GetId(), nil
			}
		}
	}
	if err != nil {
		return "", fmt.Errorf("create collection %s: %w", demoCollection, err)
	}
	id := res.Msg.GetCollection().GetId()
	fmt.Fprintf(s.Out, "created collection %s (%s)\n", demoCollection, id)
	steps := []struct {
		stdin io.Reader
		args  []string
	}{
		{strings.NewReader(compactor.SampleBase), []string{"push", "--collection", demoCollection, "--op", "add", "debian-base.jsonl.gz"}},
		{nil, []string{"compact", demoCollection, "--reason", "demo: base load", "--wait"}},
		{strings.NewReader(compactor.SampleUpdates), []string{"push", "--collection", demoCollection, "--op", "upsert", "debian-updates.jsonl.gz"}},
		{nil, []string{"compact", demoCollection, "--reason", "demo: security and point updates", "--wait"}},
		{nil, []string{"get", "--collection", demoCollection, "0ad", "aide"}},
	}
	for _, st := range steps {
		args := st.args
		if st.stdin != nil {
			// The sample is embedded: read it from stdin, shown as its name.
			args = append(args[:len(args)-1:len(args)-1], "-")
		}
		if err := run(st.stdin, args...); err != nil {
			return "", fmt.Errorf("demo step %q: %w", strings.Join(st.args, " "), err)
		}
	}
	return id, nil
}

func printGuide(w io.Writer, base, hostport, id string) {
	cli := "go run ./cmd/compactor"
	if base != "http://127.0.0.1:7070" {
		cli += " --addr " + base
	}
	fmt.Fprintf(w, `
Status page:  %[1]s/
Metrics:      %[1]s/metrics

Try it (from the repository root, in another terminal):
  %[4]s collections
  %[4]s jobs
  %[4]s get --collection %[5]s aide
  %[4]s compact --all --wait
  go tool -modfile=tools/go.mod buf curl --protocol grpc --http2-prior-knowledge %[1]s/compactor.v1.CollectionService/ListCollections
  go tool -modfile=tools/go.mod grpcurl -plaintext %[2]s list
  go tool -modfile=tools/go.mod grpcurl -plaintext -d '{"all": true, "reason": "from grpcurl"}' %[2]s compactor.v1.CompactionService/Compact
  curl -s -H 'Content-Type: application/json' -d '{}' %[1]s/compactor.v1.CompactionService/ListCompactions
`, base, hostport, id, cli, demoCollection)
}

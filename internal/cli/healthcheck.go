package cli

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

func newHealthcheckCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "healthcheck",
		Short: "Exit 0 when the server at --addr is ready (GET /readyz), 1 otherwise",
		Long: `Exit 0 when the server at --addr answers GET /readyz with 200, 1 otherwise.
For container health checks: it needs no shell or curl. It waits at most
--timeout, and never more than 5s. It takes the address flags only (and
their COMPACTOR_* variables and the configuration file's context): /readyz
needs no token and prints no output to format.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := g.resolve(cmd); err != nil {
				return UsageError(cmd, err)
			}
			return healthcheck(cmd.Context(), g)
		},
	}
}

func healthcheck(ctx context.Context, g *globals) error {
	base := g.baseURL()
	limit := 5 * time.Second
	if g.timeout > 0 {
		limit = min(g.timeout, limit)
	}
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(base, "/")+"/readyz", nil)
	if err != nil {
		return err
	}
	hc, err := g.httpClient()
	if err != nil {
		return err
	}
	res, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("not ready: %w", err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("not ready: %s answered %s", base, res.Status)
	}
	_, err = fmt.Fprintln(g.streams.Out, "ready")
	return err
}

package cli

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	"github.com/compactorhq/compactor/gen/compactor/v1/compactorv1connect"
)

// Values of the enum flags, also offered by shell completion.
var (
	outputFormats = []string{"table", "json"}
	protocols     = []string{"connect", "grpc", "grpcweb"}
)

// globals are the flags every client command shares, and the standard
// streams.
type globals struct {
	addr     string
	protocol string
	token    string
	output   string
	timeout  time.Duration

	streams Streams
}

// register adds the client flags to cmd and its subcommands (persistent
// flags of cmd, not of the root: serve has none of them), with completion of
// the enum values.
func (g *globals) register(cmd *cobra.Command) {
	fs := cmd.PersistentFlags()
	fs.StringVar(&g.addr, "addr", "http://127.0.0.1:7070", "server address (env COMPACTOR_ADDR)")
	fs.StringVar(&g.protocol, "protocol", "connect", "RPC protocol: connect, grpc or grpcweb")
	fs.StringVar(&g.token, "token", "", "bearer token for protected calls (env COMPACTOR_TOKEN)")
	fs.StringVarP(&g.output, "output", "o", "table", "output format: table or json")
	fs.DurationVar(&g.timeout, "timeout", 30*time.Second, "time limit of each call (0: none; watch and --wait are not limited)")
	_ = cmd.RegisterFlagCompletionFunc("output", fixedCompletion(outputFormats...))
	_ = cmd.RegisterFlagCompletionFunc("protocol", fixedCompletion(protocols...))
	for _, f := range []string{"addr", "token", "timeout"} {
		_ = cmd.RegisterFlagCompletionFunc(f, cobra.NoFileCompletions)
	}
}

// clients are the API clients of one command.
type clients struct {
	compaction compactorv1connect.CompactionServiceClient
	control    compactorv1connect.ControlServiceClient
	collection compactorv1connect.CollectionServiceClient
	log        compactorv1connect.LogServiceClient
}

// baseURL is --addr with http:// added when it has no scheme.
func (g *globals) baseURL() string {
	if !strings.Contains(g.addr, "://") {
		return "http://" + g.addr
	}
	return g.addr
}

// connect validates the client flags and builds the clients.
func (g *globals) connect() (*clients, error) {
	switch g.output {
	case "table", "json":
	default:
		return nil, fmt.Errorf("--output %q: want table or json", g.output)
	}
	base := g.baseURL()
	var opts []connect.ClientOption
	switch g.protocol {
	case "connect":
	case "grpc":
		opts = append(opts, connect.WithGRPC())
	case "grpcweb":
		opts = append(opts, connect.WithGRPCWeb())
	default:
		return nil, fmt.Errorf("--protocol %q: want connect, grpc or grpcweb", g.protocol)
	}
	if g.token != "" {
		opts = append(opts, connect.WithInterceptors(bearer(g.token)))
	}
	hc := httpClient(strings.HasPrefix(base, "http://"))
	return &clients{
		compaction: compactorv1connect.NewCompactionServiceClient(hc, base, opts...),
		control:    compactorv1connect.NewControlServiceClient(hc, base, opts...),
		collection: compactorv1connect.NewCollectionServiceClient(hc, base, opts...),
		log:        compactorv1connect.NewLogServiceClient(hc, base, opts...),
	}, nil
}

// httpClient speaks HTTP/2 (plaintext for http:// addresses, which gRPC
// needs) and HTTP/1.1.
func httpClient(plaintext bool) *http.Client {
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetHTTP2(true)
	if plaintext {
		protocols.SetUnencryptedHTTP2(true)
		protocols.SetHTTP1(false)
	}
	return &http.Client{Transport: &http.Transport{
		Protocols:         &protocols,
		Proxy:             http.ProxyFromEnvironment,
		DialContext:       (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
		TLSClientConfig:   &tls.Config{MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2: true,
	}}
}

// callCtx bounds one unary call by --timeout.
func (g *globals) callCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	if g.timeout <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, g.timeout)
}

// bearer adds Authorization: Bearer <token> to every request.
type bearer string

func (b bearer) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		req.Header().Set("Authorization", "Bearer "+string(b))
		return next(ctx, req)
	}
}

func (b bearer) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		conn := next(ctx, spec)
		conn.RequestHeader().Set("Authorization", "Bearer "+string(b))
		return conn
	}
}

func (b bearer) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}

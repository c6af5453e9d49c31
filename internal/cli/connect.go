package cli

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/compactorhq/compactor/client"
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
	addr      string
	protocol  string
	token     string
	tokenFile string
	output    string
	timeout   time.Duration
	config    string // --config: the client configuration file
	context   string // --context: its named context
	caCert    string // --cacert: PEM file of the CAs to trust
	insecure  bool   // --insecure: no TLS verification (tests)

	// from names where the address came from, for the connection hint:
	// "" (a flag, its variable or the default) or "context NAME of FILE".
	from string

	streams Streams
}

// flagSet says which client flags a command takes.
type flagSet int

const (
	allFlags     flagSet = iota
	addressFlags         // the server's address and TLS only (healthcheck)
)

// register adds the client flags to cmd and its subcommands (persistent
// flags of cmd, not of the root: serve has none of them), with completion of
// the enum values.
func (g *globals) register(cmd *cobra.Command, which flagSet) {
	g.flags(cmd.PersistentFlags(), which)
	registerCompletions(cmd, g)
}

// flags defines the client flags on fs, bound to g.
func (g *globals) flags(fs *pflag.FlagSet, which flagSet) {
	fs.StringVar(&g.addr, "addr", "http://127.0.0.1:7070", "server address (env COMPACTOR_ADDR); http:// or https://")
	fs.StringVar(&g.context, "context", "", "named context of the configuration file to use (env COMPACTOR_CONTEXT; default: its current-context)")
	fs.StringVar(&g.config, "config", "", "client configuration file (env COMPACTOR_CONFIG; default "+defaultConfigText()+")")
	fs.StringVar(&g.caCert, "cacert", "", "PEM file of the certificate authorities to trust for an https:// address, instead of the system's (env COMPACTOR_CACERT)")
	fs.BoolVar(&g.insecure, "insecure", false, "do not verify the server's TLS certificate (for tests only)")
	fs.DurationVar(&g.timeout, "timeout", 30*time.Second, "time limit of each call (0: none; watch and --wait are not limited)")
	if which == addressFlags {
		return
	}
	fs.StringVar(&g.protocol, "protocol", "connect", "RPC protocol: connect, grpc or grpcweb")
	fs.StringVar(&g.token, "token", "", "bearer token for protected calls (env COMPACTOR_TOKEN)")
	fs.StringVar(&g.tokenFile, "token-file", "", "file holding the bearer token (env COMPACTOR_TOKEN_FILE)")
	fs.StringVarP(&g.output, "output", "o", "table", "output format: table or json")
}

// registerCompletions completes the enum values and context names of the
// client flags of cmd, and offers no files for the others.
func registerCompletions(cmd *cobra.Command, g *globals) {
	_ = cmd.RegisterFlagCompletionFunc("output", fixedCompletion(outputFormats...))
	_ = cmd.RegisterFlagCompletionFunc("protocol", fixedCompletion(protocols...))
	_ = cmd.RegisterFlagCompletionFunc("context", completeContexts(g))
	for _, f := range []string{"addr", "token", "timeout"} {
		_ = cmd.RegisterFlagCompletionFunc(f, cobra.NoFileCompletions)
	}
}

// RegisterRootFlags lists the client flags on root, the binary's root
// command, as its own local flags: its --help shows them, and shell
// completion knows them before a command's name (compactor --addr X jobs).
// They are not inherited (serve has none of them): the client command
// that runs parses them again with its own, so root's copies stay unread.
func RegisterRootFlags(root *cobra.Command) {
	g := &globals{}
	g.flags(root.Flags(), allFlags)
	registerCompletions(root, g)
	root.ValidArgsFunction = completeCommandsAfterFlags
}

// completeCommandsAfterFlags completes the command's name after client
// flags given to the root (compactor --addr X co<TAB>): cobra offers no
// subcommands once a local flag of a command is set, so the root offers
// them itself then, and nothing otherwise (cobra has listed them).
func completeCommandsAfterFlags(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	flagged := false
	cmd.LocalNonPersistentFlags().VisitAll(func(f *pflag.Flag) { flagged = flagged || f.Changed })
	if !flagged || len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var out []cobra.Completion
	for _, sub := range cmd.Commands() {
		if sub.IsAvailableCommand() && strings.HasPrefix(sub.Name(), toComplete) {
			out = append(out, cobra.CompletionWithDesc(sub.Name(), sub.Short))
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// RootHelp is the part of the root command's help about the client
// commands: where their flags may go and their exit status, said once for
// all of them.
const RootHelp = `Client commands: every command but serve, demo and version talks to a running
server. Their flags (listed below, all but --help and --version) may come
before or after the command's name: compactor --addr HOST:7070 jobs.
Precedence: a flag, then its COMPACTOR_<FLAG> environment variable, then the
named context of the client configuration file, then the default.

The client configuration file (--config, COMPACTOR_CONFIG, default
~/.config/compactor/config.yaml) holds named contexts, like kubectl's and
gh's, chosen with --context or COMPACTOR_CONTEXT, else current-context;
relative paths in it are relative to the file:

  current-context: prod
  contexts:
    prod:
      addr: https://compactor.example.com:7070
      token-file: ~/.config/compactor/prod.token   # or token: ...
      cacert: /etc/ssl/certs/compactor-ca.pem
      protocol: grpc                               # optional
    local:
      addr: http://127.0.0.1:7070

Output: -o table (default) prints aligned tables for people, with times in
UTC and relative hints ("2m ago"). -o json prints exactly one JSON document on
stdout (an array for list commands, an object otherwise; watch prints one
JSON object per line instead), with the API's field names (snake_case, as in
proto/compactor/v1), enum names such as "JOB_STATE_SUCCEEDED", 64-bit integers
as strings and times in RFC 3339 (the protobuf JSON mapping); fields at their
zero value are left out. Progress and notes go to stderr, never stdout.

Exit status of the client commands: 0 on success; 1 when a call or the
command fails (printed as "compactor: <code>: <message>"), when a job that
--wait follows (compact, index rebuild, verify) ends FAILED or CANCELLED, or
for bad input; 2 for a usage error (unknown flag or command, wrong
arguments, a bad flag value, or a bad value of a COMPACTOR_* variable); 130
when interrupted while a --wait or push was in progress.`

// clients are the API clients of one command.
type clients struct {
	api        *client.Client
	compaction compactorv1connect.CompactionServiceClient
	control    compactorv1connect.ControlServiceClient
	collection compactorv1connect.CollectionServiceClient
	log        compactorv1connect.LogServiceClient
	audit      compactorv1connect.AuditServiceClient
}

// baseURL is --addr with http:// added when it has no scheme.
func (g *globals) baseURL() string {
	if !strings.Contains(g.addr, "://") {
		return "http://" + g.addr
	}
	return g.addr
}

// resolve applies the named context of the configuration file to the
// client flags of cmd that neither the command line nor the environment
// set, and checks the address and TLS flags.
func (g *globals) resolve(cmd *cobra.Command) error {
	changed := func(name string) bool {
		f := cmd.Flags().Lookup(name)
		return f != nil && f.Changed
	}
	cfg, err := loadClientConfig(g.config)
	if err != nil {
		return err
	}
	ctx, ctxName, err := cfg.pick(g.context)
	if err != nil {
		return err
	}
	if ctx != nil {
		if ctx.Addr != "" && !changed("addr") {
			g.addr = ctx.Addr
			g.from = fmt.Sprintf("context %s of %s", ctxName, cfg.path)
		}
		if ctx.CACert != "" && !changed("cacert") {
			g.caCert = cfg.expand(ctx.CACert)
		}
		if ctx.Protocol != "" && !changed("protocol") {
			g.protocol = ctx.Protocol
		}
		if !changed("token") && !changed("token-file") {
			switch {
			case ctx.Token != "":
				g.token = ctx.Token
			case ctx.TokenFile != "":
				g.tokenFile = cfg.expand(ctx.TokenFile)
			}
		}
	}
	if g.tokenFile != "" && g.token == "" {
		b, err := os.ReadFile(g.tokenFile)
		if err != nil {
			return fmt.Errorf("token file: %w", err)
		}
		if g.token = strings.TrimSpace(string(b)); g.token == "" {
			return fmt.Errorf("token file %s is empty", g.tokenFile)
		}
	}
	base := g.baseURL()
	if !strings.HasPrefix(base, "http://") && !strings.HasPrefix(base, "https://") {
		return fmt.Errorf("--addr %q: want host:port, http://host:port or https://host:port", g.addr)
	}
	return nil
}

// connect validates the client flags, applies the configuration file's
// context and builds the clients.
func (g *globals) connect(cmd *cobra.Command) (*clients, error) {
	if err := g.resolve(cmd); err != nil {
		return nil, err
	}
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
		opts = append(opts, client.WithBearerToken(g.token))
	}
	opts = append(opts, connect.WithInterceptors(plainErrors{}))
	hc, err := g.httpClient()
	if err != nil {
		return nil, err
	}
	api := client.New(hc, base, opts...)
	return &clients{
		api:        api,
		compaction: api.Compactions,
		control:    api.Controls,
		collection: api.Collections,
		log:        api.Logs,
		audit:      api.Audit,
	}, nil
}

// httpClient speaks HTTP/2 (plaintext for http:// addresses, which gRPC
// needs) and HTTP/1.1, trusting --cacert's authorities (or the system's)
// over https://, or none with --insecure.
func (g *globals) httpClient() (*http.Client, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if g.caCert != "" {
		pem, err := os.ReadFile(g.caCert)
		if err != nil {
			return nil, fmt.Errorf("--cacert: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--cacert %s: no PEM certificate in it", g.caCert)
		}
		tc.RootCAs = pool
	}
	tc.InsecureSkipVerify = g.insecure // --insecure, documented as for tests only
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetHTTP2(true)
	if strings.HasPrefix(g.baseURL(), "http://") {
		protocols.SetUnencryptedHTTP2(true)
		protocols.SetHTTP1(false)
	}
	return &http.Client{Transport: &http.Transport{
		Protocols:         &protocols,
		Proxy:             http.ProxyFromEnvironment,
		DialContext:       (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
		TLSClientConfig:   tc,
		ForceAttemptHTTP2: true,
	}}, nil
}

// callCtx bounds one unary call by --timeout.
func (g *globals) callCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	if g.timeout <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, g.timeout)
}

// connectionHint adds, to an error that says the server could not be
// reached (refused, unresolvable, timed out dialling) or its certificate
// not verified, the address tried and how to give another or its CA.
// Other errors are returned as they are.
func (g *globals) connectionHint(err error) error {
	var op *net.OpError
	var dns *net.DNSError
	var unknownCA x509.UnknownAuthorityError
	var invalid x509.CertificateInvalidError
	var host x509.HostnameError
	from := ""
	if g.from != "" {
		from = " (" + g.from + ")"
	}
	switch {
	case errors.As(err, &unknownCA) || errors.As(err, &invalid) || errors.As(err, &host):
		return fmt.Errorf("%w\nthe certificate of %s%s is not trusted: give its certificate authority with --cacert, COMPACTOR_CACERT or the context's cacert", err, g.addr, from)
	case errors.As(err, &op) && op.Op == "dial" || errors.As(err, &dns):
		return fmt.Errorf("%w\nno compactor answered at %s%s: give its address with --addr, the COMPACTOR_ADDR environment variable or a --context", err, g.addr, from)
	}
	return err
}

// plainErrors is the CLI's client interceptor that words each error of the
// server once: a message that ends with its own code in words, as a domain
// error wrapped for its code does ("collection x: not found", "...:
// invalid argument"), or starts with it, loses that repetition, so that the
// error prints as "not_found: collection x" rather than "not_found:
// collection x: not found". The code, the details and the metadata stay.
type plainErrors struct{}

func (plainErrors) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		res, err := next(ctx, req)
		return res, plainError(err)
	}
}

func (plainErrors) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		return plainConn{next(ctx, spec)}
	}
}

func (plainErrors) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}

// plainConn is a stream whose errors plainError words.
type plainConn struct{ connect.StreamingClientConn }

func (c plainConn) Receive(m any) error { return plainError(c.StreamingClientConn.Receive(m)) }
func (c plainConn) CloseResponse() error {
	return plainError(c.StreamingClientConn.CloseResponse())
}

// plainError is err, a *connect.Error, without its code repeated in words
// at the end or the start of its message; any other error as it is.
func plainError(err error) error {
	ce, ok := err.(*connect.Error)
	if !ok {
		return err
	}
	words := strings.ReplaceAll(ce.Code().String(), "_", " ")
	msg := strings.TrimPrefix(strings.TrimSuffix(ce.Message(), ": "+words), words+": ")
	if msg == ce.Message() || msg == "" {
		return err
	}
	out := connect.NewError(ce.Code(), errors.New(msg))
	for _, d := range ce.Details() {
		out.AddDetail(d)
	}
	for k, v := range ce.Meta() {
		out.Meta()[k] = v
	}
	return out
}

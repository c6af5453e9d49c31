package rpc

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"strings"
	"time"

	"connectrpc.com/connect"
	kgzip "github.com/klauspost/compress/gzip"

	"github.com/compactorhq/compactor/gen/compactor/v1/compactorv1connect"
	"github.com/compactorhq/compactor/internal/format"
)

// Bounds of what an error message echoes back of a request.
const (
	// MaxEchoBytes is the most bytes of one client-supplied value (an id, a
	// token) that an error message repeats; longer values are cut at a
	// UTF-8 boundary and end with "…".
	MaxEchoBytes = 128
	// MaxEchoIDs is the most ids an error names (message and BadRequest
	// detail); the rest are counted.
	MaxEchoIDs = 10
)

// DefaultMaxWatchers is the default of Options.MaxWatchers (--max-watchers).
const DefaultMaxWatchers = 256

// DefaultReadTimeout is the default of --request-read-timeout.
const DefaultReadTimeout = time.Minute

// echo returns s cut to MaxEchoBytes.
func echo(s string) string { return truncate(s, MaxEchoBytes) }

// truncate cuts s to at most n bytes at a UTF-8 boundary, marking the cut
// with "…".
func truncate(s string, n int) string { return format.TruncateBytes(s, n) }

// echoIDs names at most MaxEchoIDs of ids (each cut to MaxEchoBytes) and
// says how many more there are: "a, b, c and 9,997 more".
func echoIDs(ids []string) string {
	var b strings.Builder
	for i, id := range ids {
		if i == MaxEchoIDs {
			fmt.Fprintf(&b, " and %d more", len(ids)-i)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(echo(id))
	}
	return b.String()
}

// limitedGzip is connect's gzip decompressor with a hard stop: it yields at
// most limit+1 bytes of one message and then fails, so that a compression
// bomb costs the CPU of the limit, not of its whole expansion (connect
// itself reads past the limit to report the full size).
type limitedGzip struct {
	gzip.Reader
	limit int64 // bytes of one decompressed message
	n     int64 // bytes yielded since Reset
}

var errDecompressLimit = errors.New("decompression stopped at the size limit")

func (g *limitedGzip) Read(p []byte) (int, error) {
	if g.n > g.limit {
		return 0, errDecompressLimit
	}
	if rest := g.limit + 1 - g.n; int64(len(p)) > rest {
		p = p[:rest]
	}
	k, err := g.Reader.Read(p)
	g.n += int64(k)
	return k, err
}

func (g *limitedGzip) Reset(r io.Reader) error {
	g.n = 0
	return g.Reader.Reset(r)
}

// withLimitedGzip replaces connect's gzip support of a handler with
// limitedGzip at limit bytes for requests, and for responses
// adaptiveGzip: the same gzip on the wire, but connect resets a pooled
// writer twice per response, and the standard library's reset clears about
// 640 KiB of match tables each time (about a fifth of the listing RPCs'
// server CPU in the RPC overhead benchmark's profile), where klauspost's
// only moves an offset.
func withLimitedGzip(limit int) connect.HandlerOption {
	return connect.WithCompression("gzip",
		func() connect.Decompressor { return &limitedGzip{limit: int64(limit)} },
		func() connect.Compressor { return newAdaptiveGzip() },
	)
}

// huffmanOnlyBytes is the size of a response message from which
// adaptiveGzip entropy-codes it without looking for repeats.
const huffmanOnlyBytes = 256 << 10

// minHuffmanGain is the least fraction of a large message's bytes that
// entropy coding must promise to save (estimated from a sample: see
// huffmanGain) for adaptiveGzip to code it; below it the message goes out
// in stored blocks. A binary page of 1,000 records with 128-dim float32
// embeddings (3 decimals) promises 9.6 % (Huffman-only coding achieved 7 %,
// for about 40 % of the server's CPU of a paged read of the compacted
// collection); the same page as JSON 49 %.
const minHuffmanGain = 0.15

// huffmanSample is the bytes of a message that huffmanGain reads: the
// first half of it from the start, the second from the middle.
const huffmanSample = 64 << 10

// adaptiveGzip is a gzip writer (klauspost/compress) that picks its level
// by the first write after Reset (connect writes a whole message at once):
// a message under huffmanOnlyBytes (job and collection listings, repetitive
// JSON that repeats compress well) at BestSpeed; a larger one (pages of
// records and query results) entropy-coded only (Huffman-only), or, when
// that would save less than minHuffmanGain of its bytes (binary pages of
// float32 embeddings, whose bytes are near random), in stored blocks:
// still gzip for the client, at the cost of a copy and a checksum. On a
// 1,000-record page of 128-dim embeddings Huffman-only ran 3.1× faster than
// BestSpeed for 0.93 of the size against 0.86 (binary protobuf), and 3.5×
// for 0.50 against 0.44 (JSON); at BestSpeed the compression was 55 % of
// the server's CPU of a paged GetRecords read.
type adaptiveGzip struct {
	fast, huffman, stored *kgzip.Writer
	dst                   io.Writer
	w                     *kgzip.Writer // the writer in use since Reset; nil before the first write
}

func newAdaptiveGzip() *adaptiveGzip {
	fast, _ := kgzip.NewWriterLevel(io.Discard, kgzip.BestSpeed)       // a valid level: never fails
	huffman, _ := kgzip.NewWriterLevel(io.Discard, kgzip.HuffmanOnly)  // likewise
	stored, _ := kgzip.NewWriterLevel(io.Discard, kgzip.NoCompression) // likewise
	return &adaptiveGzip{fast: fast, huffman: huffman, stored: stored, dst: io.Discard}
}

func (g *adaptiveGzip) Reset(dst io.Writer) {
	g.dst, g.w = dst, nil
}

func (g *adaptiveGzip) pick(p []byte) {
	switch {
	case len(p) < huffmanOnlyBytes:
		g.w = g.fast
	case huffmanGain(p) < minHuffmanGain:
		g.w = g.stored
	default:
		g.w = g.huffman
	}
	g.w.Reset(g.dst)
}

// huffmanGain estimates the fraction of p's bytes that entropy coding
// saves: 1 - H/8, H the order-0 entropy (bits a byte) of a sample of
// huffmanSample bytes (from the start and from the middle). A Huffman code
// needs at least H bits a byte, so the real saving is at most this.
func huffmanGain(p []byte) float64 {
	var hist [256]int
	half := min(len(p), huffmanSample) / 2
	mid := len(p) / 2
	for _, b := range p[:half] {
		hist[b]++
	}
	for _, b := range p[mid : mid+half] {
		hist[b]++
	}
	n := float64(2 * half)
	if n == 0 {
		return 0
	}
	h := 0.0
	for _, c := range hist {
		if c > 0 {
			f := float64(c) / n
			h -= f * math.Log2(f)
		}
	}
	return 1 - h/8
}

func (g *adaptiveGzip) Write(p []byte) (int, error) {
	if g.w == nil {
		g.pick(p)
	}
	return g.w.Write(p)
}

// Close ends the gzip stream (an empty one when nothing was written).
func (g *adaptiveGzip) Close() error {
	if g.w == nil {
		g.pick(nil)
	}
	return g.w.Close()
}

// watcherLimit is an interceptor that bounds the concurrent
// WatchCompactions streams: each holds a manager subscription (a goroutine
// and an event queue), so without a cap any client could open streams until
// memory runs out. Beyond the cap the call fails with RESOURCE_EXHAUSTED.
type watcherLimit struct {
	slots chan struct{}
}

func newWatcherLimit(n int) *watcherLimit { return &watcherLimit{slots: make(chan struct{}, n)} }

func (l *watcherLimit) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc { return next }

func (l *watcherLimit) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (l *watcherLimit) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		if conn.Spec().Procedure != compactorv1connect.CompactionServiceWatchCompactionsProcedure {
			return next(ctx, conn)
		}
		select {
		case l.slots <- struct{}{}:
		default:
			return connect.NewError(connect.CodeResourceExhausted, fmt.Errorf(
				"%d WatchCompactions streams are open, the limit of this server (--max-watchers); close one or watch again later", cap(l.slots)))
		}
		defer func() { <-l.slots }()
		return next(ctx, conn)
	}
}

// IsStreamingProcedure reports whether path (a request's URL path) is a
// procedure served on the API port whose request or response is a stream:
// the compactor's WatchCompactions, health's Watch, reflection's
// ServerReflectionInfo. A body read deadline must not apply to them.
func IsStreamingProcedure(path string) bool {
	switch path {
	case compactorv1connect.CompactionServiceWatchCompactionsProcedure,
		"/grpc.health.v1.Health/Watch",
		"/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
		"/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo":
		return true
	}
	return false
}

// BodyReadTimeout bounds the time to read the body of every request to h
// except streams (IsStreamingProcedure): a client that trickles a body is cut
// off after d (its read fails; the call ends with an error) instead of
// holding the connection for as long as it likes. The deadline is lifted
// once the body has been read, so that a slow handler is not affected.
// Requests without a body are untouched. d <= 0 disables it.
func BodyReadTimeout(h http.Handler, d time.Duration) http.Handler {
	if d <= 0 {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength == 0 || r.Body == nil || r.Body == http.NoBody || IsStreamingProcedure(r.URL.Path) {
			h.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		if err := rc.SetReadDeadline(time.Now().Add(d)); err != nil {
			h.ServeHTTP(w, r) // this writer cannot (a test recorder)
			return
		}
		r.Body = &deadlineBody{ReadCloser: r.Body, rc: rc}
		h.ServeHTTP(w, r)
	})
}

// deadlineBody lifts the read deadline when the body ends.
type deadlineBody struct {
	io.ReadCloser
	rc     *http.ResponseController
	lifted bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF && !b.lifted {
		b.lifted = true
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	if err != nil && err != io.EOF && isTimeout(err) {
		// A *connect.Error passes through connect's reader as it is.
		return n, connect.NewError(connect.CodeDeadlineExceeded,
			fmt.Errorf("request body not received within the read timeout (--request-read-timeout): %w", err))
	}
	return n, err
}

// isTimeout reports whether err is a read deadline's error.
func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &t) && t.Timeout())
}

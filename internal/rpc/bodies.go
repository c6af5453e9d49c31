package rpc

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/compactorhq/compactor/internal/metric"
)

// BodySlack is what a request body may hold beyond its one message of at
// most MaxRequestBytes: the gRPC and gRPC-Web envelope (5 bytes), with room
// to spare.
const BodySlack = 1 << 10

// bodyReserveStep is how much of the in-flight budget a body of unknown
// length (chunked, or HTTP/2 without Content-Length) reserves at a time as
// it is read, so that a large body takes the lock a few times, not at every
// read.
const bodyReserveStep = 64 << 10

// BodyLimiter bounds request bodies before they are read, one by one and
// all together:
//
//   - a body that declares a Content-Length over the per-request bound is
//     refused at once, unread;
//   - a body of unknown length (chunked) is read up to the bound and
//     refused there, at once, without waiting for its end;
//   - the bytes of the bodies of all requests being served (the declared
//     length, or what has been read of an unknown one) are bounded by the
//     in-flight bound: a request that would pass it is refused. A body's
//     bytes count until its request is answered, since the decoded message
//     lives as long.
//
// Refusals are RESOURCE_EXHAUSTED in the request's protocol (Connect, gRPC,
// gRPC-Web), or HTTP 413 / 503 for other requests (the page's forms).
// Streams (IsStreamingProcedure) are left alone: their messages are bounded
// one by one by MaxRequestBytes. It is safe for concurrent use.
type BodyLimiter struct {
	maxRequest int64 // bytes of one body (the message and BodySlack)
	maxTotal   int64 // bytes of bodies in flight
	errs       *connect.ErrorWriter

	mu       sync.Mutex
	inFlight int64 // guarded by mu

	held    prometheus.Gauge
	refused *prometheus.CounterVec
}

// NewBodyLimiter returns a BodyLimiter for messages of at most
// maxRequestBytes (--max-request-bytes) and at most maxInFlightBytes of
// bodies in flight (--max-inflight-request-bytes; raised to one request's
// bound when lower, so that one largest request always fits). It registers
// on reg compactor_request_body_bytes_in_flight and
// compactor_request_bodies_refused_total{reason="too_large|in_flight"}.
func NewBodyLimiter(maxRequestBytes int, maxInFlightBytes int64, reg prometheus.Registerer) *BodyLimiter {
	f := promauto.With(reg)
	l := &BodyLimiter{
		maxRequest: int64(maxRequestBytes) + BodySlack,
		errs:       connect.NewErrorWriter(),
		held:       metric.Gauge(f, "compactor_request_body_bytes_in_flight", "Bytes of request bodies held by requests being served (declared lengths, or what was read of bodies of unknown length)."),
		refused:    metric.CounterVec(f, "compactor_request_bodies_refused_total", "Requests refused before their body was read, by reason: too_large (over --max-request-bytes), in_flight (over --max-inflight-request-bytes).", "reason"),
	}
	l.maxTotal = max(maxInFlightBytes, l.maxRequest)
	metric.Gauge(f, "compactor_request_body_bytes_in_flight_limit", "The bound on compactor_request_body_bytes_in_flight (--max-inflight-request-bytes).").Set(float64(l.maxTotal))
	for _, r := range []string{reasonTooLarge, reasonInFlight} {
		l.refused.WithLabelValues(r)
	}
	return l
}

const (
	reasonTooLarge = "too_large"
	reasonInFlight = "in_flight"
)

// MaxInFlightBytes is the in-flight bound in force, in bytes.
func (l *BodyLimiter) MaxInFlightBytes() int64 { return l.maxTotal }

// Wrap applies the limits to the requests of h.
func (l *BodyLimiter) Wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 || IsStreamingProcedure(r.URL.Path) {
			h.ServeHTTP(w, r)
			return
		}
		if r.ContentLength > l.maxRequest {
			l.refuse(w, r, reasonTooLarge, fmt.Errorf("request body of %d bytes is larger than the limit of %d bytes (--max-request-bytes)",
				r.ContentLength, l.maxRequest-BodySlack))
			return
		}
		b := &boundedBody{ReadCloser: r.Body, l: l, declared: r.ContentLength > 0}
		if r.ProtoMajor == 1 {
			// The rest of a refused body is not read: HTTP/1.1 would wait
			// for it before answering, were the connection to be reused.
			b.refused = func() { w.Header().Set("Connection", "close") }
		}
		if b.declared {
			if !l.reserve(r.ContentLength) {
				l.refuse(w, r, reasonInFlight, l.busy())
				return
			}
			b.held = r.ContentLength
		}
		defer func() { l.free(b.held) }()
		r.Body = b
		h.ServeHTTP(w, r)
	})
}

// reserve takes n bytes of the in-flight budget; false when they do not fit.
func (l *BodyLimiter) reserve(n int64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.inFlight+n > l.maxTotal {
		return false
	}
	l.inFlight += n
	l.held.Add(float64(n))
	return true
}

func (l *BodyLimiter) free(n int64) {
	if n == 0 {
		return
	}
	l.mu.Lock()
	l.inFlight -= n
	l.mu.Unlock()
	l.held.Sub(float64(n))
}

func (l *BodyLimiter) busy() error {
	return fmt.Errorf("the server holds as many bytes of requests as it may at once (%d bytes, --max-inflight-request-bytes); retry later", l.maxTotal)
}

// refuse answers r with RESOURCE_EXHAUSTED, unread.
func (l *BodyLimiter) refuse(w http.ResponseWriter, r *http.Request, reason string, err error) {
	l.refused.WithLabelValues(reason).Inc()
	if r.ProtoMajor == 1 {
		// The client may still be sending: the connection is not reused
		// (HTTP/2 resets the stream instead).
		w.Header().Set("Connection", "close")
	}
	if l.errs.IsSupported(r) {
		_ = l.errs.Write(w, r, connect.NewError(connect.CodeResourceExhausted, err))
		return
	}
	status := http.StatusRequestEntityTooLarge
	if reason == reasonInFlight {
		status = http.StatusServiceUnavailable
	}
	http.Error(w, err.Error(), status)
}

// errBodyTooLarge ends the read of a body of unknown length at the bound.
var errBodyTooLarge = errors.New("request body too large")

// boundedBody reads a body up to the per-request bound, reserving the
// in-flight budget as it goes when its length is not declared. Read is
// called by the one goroutine that serves the request; held is freed by
// Wrap after the handler returns.
type boundedBody struct {
	io.ReadCloser
	l        *BodyLimiter
	declared bool   // Content-Length given: held covers the whole body
	read     int64  // bytes read so far
	held     int64  // bytes of the in-flight budget taken
	refused  func() // called when a read is refused; nil: nothing to do
	stopped  bool   // a read was refused
}

// Close closes the body, unless a read was refused on HTTP/1.1: closing
// it then reads on, looking for its end, before the answer is sent (the
// server closes it after the answer, and the connection).
func (b *boundedBody) Close() error {
	if b.stopped && b.refused != nil {
		return nil
	}
	return b.ReadCloser.Close()
}

// refuse counts a refusal for reason and returns err as RESOURCE_EXHAUSTED.
func (b *boundedBody) refuse(reason string, err error) error {
	b.l.refused.WithLabelValues(reason).Inc()
	b.stopped = true
	if b.refused != nil {
		b.refused()
	}
	// A *connect.Error passes through connect's reader as it is.
	return connect.NewError(connect.CodeResourceExhausted, err)
}

func (b *boundedBody) Read(p []byte) (int, error) {
	// One byte past the bound tells that the body is too large.
	if rest := b.l.maxRequest + 1 - b.read; int64(len(p)) > rest {
		p = p[:rest]
	}
	if !b.declared {
		if need := b.read + int64(len(p)); need > b.held {
			step := min(max(need-b.held, bodyReserveStep), b.l.maxRequest+1-b.held)
			if !b.l.reserve(step) {
				return 0, b.refuse(reasonInFlight, b.l.busy())
			}
			b.held += step
		}
	}
	n, err := b.ReadCloser.Read(p)
	b.read += int64(n)
	if b.read > b.l.maxRequest {
		return 0, b.refuse(reasonTooLarge, fmt.Errorf("request body is larger than the limit of %d bytes (--max-request-bytes): %w",
			b.l.maxRequest-BodySlack, errBodyTooLarge))
	}
	return n, err
}

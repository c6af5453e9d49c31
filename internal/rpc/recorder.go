package rpc

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"connectrpc.com/connect"
)

// responseRecorder passes a response through and keeps what outcome needs
// to read the call's code: the status, the first 4 KiB of the body (a
// Connect error is a small JSON object) and its last 512 bytes (gRPC-Web
// trailers end the body).
type responseRecorder struct {
	http.ResponseWriter
	// st is the call's state: once the interceptor observed the call (a
	// unary call's before its response is written), outcome is never
	// read, so the body is not recorded.
	st     *callState
	status int
	head   []byte
	tail   []byte
}

const (
	recordHead = 4 << 10
	recordTail = 512
)

func (r *responseRecorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *responseRecorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	if r.st != nil && r.st.observed.Load() {
		return r.ResponseWriter.Write(p)
	}
	if n := recordHead - len(r.head); n > 0 {
		r.head = append(r.head, p[:min(n, len(p))]...)
	}
	r.tail = append(r.tail, p[max(0, len(p)-recordTail):]...)
	if len(r.tail) > recordTail {
		r.tail = append(r.tail[:0], r.tail[len(r.tail)-recordTail:]...)
	}
	return r.ResponseWriter.Write(p)
}

// Flush lets connect flush streams through the recorder.
func (r *responseRecorder) Flush() { _ = http.NewResponseController(r.ResponseWriter).Flush() }

// Unwrap gives http.ResponseController the underlying writer.
func (r *responseRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// outcome returns the Connect code (as the metrics spell it) and message of
// the response: gRPC's grpc-status header or trailer, gRPC-Web's trailers,
// a Connect error body, else the code the HTTP status maps to.
func (r *responseRecorder) outcome() (code, msg string) {
	h := r.Header()
	for _, k := range []string{"Grpc-Status", http.TrailerPrefix + "Grpc-Status"} {
		if v := h.Get(k); v != "" {
			return grpcCode(v), h.Get(strings.TrimSuffix(k, "Status") + "Message")
		}
	}
	if strings.HasPrefix(h.Get("Content-Type"), "application/grpc-web") {
		i := bytes.LastIndexByte(r.tail, 0x80) // the trailers frame
		if i >= 0 && len(r.tail) > i+5 {
			tr, err := http.ReadResponse(bufio.NewReader(strings.NewReader(
				"HTTP/1.1 200 OK\r\n"+string(r.tail[i+5:])+"\r\n")), nil)
			if err == nil && tr.Header.Get("Grpc-Status") != "" {
				return grpcCode(tr.Header.Get("Grpc-Status")), tr.Header.Get("Grpc-Message")
			}
		}
	}
	status := r.status
	if status == 0 {
		status = http.StatusOK
	}
	if status != http.StatusOK && strings.HasPrefix(h.Get("Content-Type"), "application/json") {
		var wire struct{ Code, Message string }
		if json.Unmarshal(r.head, &wire) == nil && wire.Code != "" {
			return wire.Code, wire.Message
		}
	}
	return httpCode(status), http.StatusText(status)
}

func grpcCode(v string) string {
	n, err := strconv.ParseUint(v, 10, 32)
	if err != nil {
		return connect.CodeUnknown.String()
	}
	if n == 0 {
		return "ok"
	}
	return connect.Code(n).String()
}

// httpCode maps an HTTP status without a Connect error to a code, as the
// Connect protocol does for such responses.
func httpCode(status int) string {
	switch status {
	case http.StatusOK:
		return "ok"
	case http.StatusBadRequest:
		return connect.CodeInvalidArgument.String()
	case http.StatusUnauthorized:
		return connect.CodeUnauthenticated.String()
	case http.StatusForbidden:
		return connect.CodePermissionDenied.String()
	case http.StatusNotFound, http.StatusMethodNotAllowed, http.StatusUnsupportedMediaType:
		return connect.CodeUnimplemented.String()
	case http.StatusRequestTimeout:
		return connect.CodeDeadlineExceeded.String()
	case http.StatusRequestEntityTooLarge, http.StatusTooManyRequests:
		return connect.CodeResourceExhausted.String()
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return connect.CodeUnavailable.String()
	}
	return connect.CodeUnknown.String()
}

package rpc_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/compactorhq/compactor/gen/compactor/v1/compactorv1connect"
	"github.com/compactorhq/compactor/internal/server"
)

const bodyLimit = 1 << 20 // --max-request-bytes of these tests

// rawRequest writes the head of a POST of GetRecords on a new connection to
// addr, with the extra header lines head, and returns the connection.
func rawRequest(t *testing.T, addr, head string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n%s\r\n",
		compactorv1connect.CollectionServiceGetRecordsProcedure, head)
	return conn
}

// readAnswer reads the response on conn and checks that it refuses the
// request as RESOURCE_EXHAUSTED naming flag. The server answers by itself
// while the client has not finished its body; the read deadline only keeps
// a broken server from hanging the suite.
func readAnswer(t *testing.T, what string, conn net.Conn, flag string) {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(2 * time.Minute))
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("%s: no answer before the body ended: %v", what, err)
	}
	b, _ := io.ReadAll(io.LimitReader(res.Body, 4<<10))
	res.Body.Close()
	if res.StatusCode != http.StatusTooManyRequests || !bytes.Contains(b, []byte("resource_exhausted")) || !bytes.Contains(b, []byte(flag)) {
		t.Errorf("%s: HTTP %d %q, want RESOURCE_EXHAUSTED naming %s", what, res.StatusCode, b, flag)
	}
}

// A body that declares a length over --max-request-bytes is refused before
// any of it is sent; a body of unknown length is refused once it passes
// the limit, while the client is still sending; over HTTP/1.1 and HTTP/2.
func TestBodiesOverTheLimitAreAnsweredBeforeTheyEnd(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{configure: func(cfg *server.Config) { cfg.MaxRequestBytes = bodyLimit }})
	h1 := httptest.NewServer(f.app.Handler())
	t.Cleanup(h1.Close)
	addr := h1.Listener.Addr().String()

	// 1 GiB declared, nothing sent.
	readAnswer(t, "declared 1 GiB", rawRequest(t, addr, "Content-Length: 1073741824\r\n"), "--max-request-bytes")

	// Chunked: one chunk past the limit, and the body never ends.
	conn := rawRequest(t, addr, "Transfer-Encoding: chunked\r\n")
	chunk := bytes.Repeat([]byte(" "), bodyLimit+2<<10)
	fmt.Fprintf(conn, "%x\r\n%s\r\n", len(chunk), chunk)
	readAnswer(t, "chunked past the limit", conn, "--max-request-bytes")

	// HTTP/2 without a length: a pipe that passes the limit and then
	// blocks.
	pr, pw := io.Pipe()
	t.Cleanup(func() { pw.Close() })
	go func() { _, _ = pw.Write(chunk) }()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, f.srv.URL+compactorv1connect.CollectionServiceGetRecordsProcedure, pr)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := f.srv.Client().Do(req)
	if err != nil {
		t.Fatalf("HTTP/2 body past the limit: %v", err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.ProtoMajor != 2 || res.StatusCode != http.StatusTooManyRequests || !bytes.Contains(b, []byte("--max-request-bytes")) {
		t.Errorf("HTTP/%d body past the limit: HTTP %d %q", res.ProtoMajor, res.StatusCode, b)
	}

	// A request within the limit is served as before.
	res, err = f.srv.Client().Post(f.srv.URL+compactorv1connect.CollectionServiceListCollectionsProcedure, "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Errorf("a small request: HTTP %d", res.StatusCode)
	}
}

// metric returns the value of the unlabelled gauge name on /metrics.
func metric(t *testing.T, f *fixture, name string) float64 {
	t.Helper()
	res, err := f.srv.Client().Get(f.srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			n, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			return n
		}
	}
	t.Fatalf("/metrics lacks %s", name)
	return 0
}

// The bodies of all requests in flight are bounded together: past
// --max-inflight-request-bytes a request is refused with RESOURCE_EXHAUSTED
// at once, and accepted again once the others are answered.
func TestRequestBytesInFlightAreBoundedTogether(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{configure: func(cfg *server.Config) {
		cfg.MaxRequestBytes = bodyLimit
		cfg.MaxInFlightRequestBytes = 3 * bodyLimit
	}})
	h1 := httptest.NewServer(f.app.Handler())
	t.Cleanup(h1.Close)
	addr := h1.Listener.Addr().String()

	// Three requests declare a whole limit each and send nothing yet.
	var held []net.Conn
	for range 3 {
		held = append(held, rawRequest(t, addr, fmt.Sprintf("Content-Length: %d\r\n", bodyLimit)))
	}
	const want = 3 * bodyLimit
	for metric(t, f, "compactor_request_body_bytes_in_flight") != want {
		time.Sleep(5 * time.Millisecond) // the three reach the handler
	}
	readAnswer(t, "a fourth request", rawRequest(t, addr, fmt.Sprintf("Content-Length: %d\r\n", bodyLimit)), "--max-inflight-request-bytes")

	// A body of unknown length is refused as it passes the bound too.
	conn := rawRequest(t, addr, "Transfer-Encoding: chunked\r\n")
	fmt.Fprintf(conn, "%x\r\n%s\r\n", 100<<10, bytes.Repeat([]byte(" "), 100<<10))
	readAnswer(t, "a chunked request", conn, "--max-inflight-request-bytes")

	for _, c := range held {
		c.Close()
	}
	for metric(t, f, "compactor_request_body_bytes_in_flight") != 0 {
		time.Sleep(5 * time.Millisecond) // the three are answered
	}
	res, err := f.srv.Client().Post(f.srv.URL+compactorv1connect.CollectionServiceListCollectionsProcedure, "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Errorf("a request once the others are answered: HTTP %d", res.StatusCode)
	}
	if got := metric(t, f, "compactor_request_body_bytes_in_flight_limit"); got != want {
		t.Errorf("compactor_request_body_bytes_in_flight_limit %v, want %v", got, want)
	}
}

// The in-flight bound defaults to a quarter of the memory the process is
// given, never under one largest request.
func TestInFlightRequestBytesDefault(t *testing.T) {
	const one = 64<<20 + 1<<10
	for _, c := range []struct {
		configured, memory int64
		want               int64
	}{
		{0, 8 << 30, 2 << 30},
		{0, 100 << 20, one},
		{0, 0, 4 * one},
		{512 << 20, 8 << 30, 512 << 20},
		{1, 8 << 30, one},
	} {
		if got := server.InFlightRequestBytes(c.configured, 64<<20, c.memory); got != c.want {
			t.Errorf("configured %d, memory %d: %d, want %d", c.configured, c.memory, got, c.want)
		}
	}
}

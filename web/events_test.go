package web_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/compactorhq/compactor/internal/browsertest"
	"github.com/compactorhq/compactor/web"
)

// streamServer serves e's handler and reports on returned each time an
// /events handler returns.
type streamServer struct {
	*httptest.Server
	returned chan struct{}
	client   *http.Client
}

func newStreamServer(t *testing.T, e *env) *streamServer {
	t.Helper()
	s := &streamServer{returned: make(chan struct{}, 16), client: &http.Client{Transport: &http.Transport{}}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.h.ServeHTTP(w, r)
		if r.URL.Path == "/events" {
			s.returned <- struct{}{}
		}
	}))
	t.Cleanup(func() {
		s.client.CloseIdleConnections()
		s.Close()
	})
	return s
}

// waitReturned fails the test unless an /events handler returns soon.
func (s *streamServer) waitReturned(t *testing.T) {
	t.Helper()
	select {
	case <-s.returned:
	case <-time.After(time.Until(browsertest.Deadline(t))): // from go test -timeout, never short on a busy machine
		t.Fatal("the /events handler did not return by the test's deadline")
	}
}

type stream struct {
	t    *testing.T
	res  *http.Response
	br   *bufio.Reader
	stop context.CancelFunc
}

// open starts an event stream. Its context has a deadline, so that a read
// waiting for a line that never comes fails the test instead of hanging it.
func (s *streamServer) open(t *testing.T) *stream {
	t.Helper()
	ctx, cancel := context.WithDeadline(context.Background(), browsertest.Deadline(t)) // from go test -timeout
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.client.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	st := &stream{t: t, res: res, br: bufio.NewReader(res.Body), stop: cancel}
	t.Cleanup(func() {
		cancel()
		res.Body.Close()
	})
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET /events: status %d", res.StatusCode)
	}
	if ct := res.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	st.until(": connected")
	return st
}

// until reads lines up to and including one equal to want, and returns the
// lines before it.
func (st *stream) until(want string) []string {
	st.t.Helper()
	var seen []string
	for {
		line, err := st.br.ReadString('\n')
		if err != nil {
			st.t.Fatalf("reading the stream for %q: %v (seen %q)", want, err, seen)
		}
		line = strings.TrimSuffix(line, "\n")
		if line == want {
			return seen
		}
		seen = append(seen, line)
	}
}

// rest reads the stream to its end, which the server must reach.
func (st *stream) rest() string {
	st.t.Helper()
	b, err := io.ReadAll(st.br)
	if err != nil {
		st.t.Fatalf("reading the stream to its end: %v", err)
	}
	return string(b)
}

func TestEventsSendAChangePerTickAndEndWhenTheClientGoesAway(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	e := newEnv(t, web.Config{MinEventInterval: time.Millisecond, Heartbeat: time.Hour})
	srv := newStreamServer(t, e)
	st := srv.open(t)

	if n := e.src.Tick(); n != 1 {
		t.Fatalf("Tick reached %d subscribers, want 1", n)
	}
	st.until("event: change")
	st.until("data: 1")
	if n := e.src.Tick(); n != 1 {
		t.Fatalf("Tick reached %d subscribers, want 1", n)
	}
	st.until("event: change")
	st.until("data: 2")

	st.stop() // the client goes away
	srv.waitReturned(t)
	st.res.Body.Close()
	srv.client.CloseIdleConnections()
	srv.Close()
}

func TestEventsEndWhenTheServerStops(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	done := make(chan struct{})
	e := newEnv(t, web.Config{Done: done, Heartbeat: time.Hour})
	srv := newStreamServer(t, e)
	st := srv.open(t)

	close(done)
	srv.waitReturned(t)
	if rest := st.rest(); strings.Contains(rest, "event:") {
		t.Errorf("events after stop: %q", rest)
	}
	st.res.Body.Close()
	srv.client.CloseIdleConnections()
	srv.Close()
}

func TestEventsCoalesceABurstOfTicks(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	done := make(chan struct{})
	e := newEnv(t, web.Config{Done: done, MinEventInterval: time.Hour, Heartbeat: time.Hour})
	srv := newStreamServer(t, e)
	st := srv.open(t)

	for range 5 {
		if n := e.src.Tick(); n != 1 {
			t.Fatalf("Tick reached %d subscribers, want 1", n)
		}
	}
	// Tick returns once the handler has the tick, so all five are in.
	close(done)
	srv.waitReturned(t)
	if n := strings.Count(st.rest(), "event: change"); n != 1 {
		t.Errorf("%d events for a burst of 5 ticks inside one interval, want 1", n)
	}
	st.res.Body.Close()
	srv.client.CloseIdleConnections()
	srv.Close()
}

func TestEventsFollowABurstWithOneMoreEvent(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	e := newEnv(t, web.Config{MinEventInterval: 50 * time.Millisecond, Heartbeat: time.Hour})
	srv := newStreamServer(t, e)
	st := srv.open(t)

	e.src.Tick()
	st.until("data: 1")
	e.src.Tick() // inside the interval: held, then sent at its end
	e.src.Tick()
	st.until("data: 2")

	st.stop()
	srv.waitReturned(t)
	st.res.Body.Close()
	srv.client.CloseIdleConnections()
	srv.Close()
}

func TestEventsKeepFlowingUnderASteadyStreamOfTicks(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	e := newEnv(t, web.Config{MinEventInterval: 20 * time.Millisecond, Heartbeat: time.Hour})
	srv := newStreamServer(t, e)
	st := srv.open(t)

	// Ticks arrive far more often than the interval: the events must still
	// come once per interval, not wait for a pause that never comes.
	stop := make(chan struct{})
	ticking := make(chan struct{})
	go func() {
		defer close(ticking)
		for {
			select {
			case <-stop:
				return
			default:
				e.src.Tick()
			}
		}
	}()
	st.until("data: 3")
	close(stop)
	<-ticking

	st.stop()
	srv.waitReturned(t)
	st.res.Body.Close()
	srv.client.CloseIdleConnections()
	srv.Close()
}

func TestEventsSendHeartbeats(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	e := newEnv(t, web.Config{Heartbeat: 5 * time.Millisecond})
	srv := newStreamServer(t, e)
	st := srv.open(t)
	st.until(": heartbeat")
	st.until(": heartbeat")
	st.stop()
	srv.waitReturned(t)
	st.res.Body.Close()
	srv.client.CloseIdleConnections()
	srv.Close()
}

func TestEventsAreBoundedByMaxStreams(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	e := newEnv(t, web.Config{MaxStreams: 1, Heartbeat: time.Hour})
	srv := newStreamServer(t, e)
	first := srv.open(t)

	res, err := srv.client.Get(srv.URL + "/events")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") == "" {
		t.Errorf("second stream: status %d, Retry-After %q; want 503 with Retry-After", res.StatusCode, res.Header.Get("Retry-After"))
	}
	srv.waitReturned(t) // the refused one

	first.stop()
	srv.waitReturned(t)
	again := srv.open(t) // the slot is free again
	again.stop()
	srv.waitReturned(t)
	first.res.Body.Close()
	again.res.Body.Close()
	srv.client.CloseIdleConnections()
	srv.Close()
}

func TestEventsWithoutASubscriptionAre503(t *testing.T) {
	e := newEnv(t, web.Config{})
	e.src.FailWith("Subscribe", errors.New("manager stopping"))
	r := e.get("/events")
	wantStatus(t, r, http.StatusServiceUnavailable)
	if !strings.Contains(e.logs.String(), `err="manager stopping"`) {
		t.Error("subscribe error not logged")
	}
}

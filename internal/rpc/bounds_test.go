package rpc_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	compactorv1 "github.com/compactorhq/compactor/gen/compactor/v1"
	"github.com/compactorhq/compactor/gen/compactor/v1/compactorv1connect"
	"github.com/compactorhq/compactor/internal/server"
)

func TestWatchersBeyondTheCapAreRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{configure: func(cfg *server.Config) { cfg.MaxWatchers = 2 }})
	// open watches and waits for the end of the snapshot.
	open := func(c clients) (*connect.ServerStreamForClient[compactorv1.WatchCompactionsResponse], error) {
		s, err := c.jobs.WatchCompactions(t.Context(), connect.NewRequest(&compactorv1.WatchCompactionsRequest{}))
		if err != nil {
			return nil, err
		}
		for s.Receive() {
			if s.Msg().GetType() == compactorv1.WatchEventType_WATCH_EVENT_TYPE_SNAPSHOT_COMPLETE {
				return s, nil
			}
		}
		_ = s.Close()
		return nil, s.Err()
	}
	c := f.clients(protocols[0])
	var held []*connect.ServerStreamForClient[compactorv1.WatchCompactionsResponse]
	for i := range 2 {
		s, err := open(c)
		if err != nil {
			t.Fatalf("watch %d: %v", i, err)
		}
		held = append(held, s)
	}
	for _, p := range protocols {
		s, err := open(f.clients(p))
		if err == nil {
			_ = s.Close()
			t.Fatalf("%s: a third watch was accepted", p.name)
		}
		ce := wantCode(t, err, connect.CodeResourceExhausted)
		if !strings.Contains(ce.Message(), "--max-watchers") {
			t.Errorf("%s: message %q does not name the flag", p.name, ce.Message())
		}
	}
	// A closed stream frees its slot.
	_ = held[0].Close()
	waitFor(t, "the closed watch to end on the server", func() bool {
		return handled(t, f, compactorv1connect.CompactionServiceWatchCompactionsProcedure) >= 1+float64(len(protocols))
	})
	s, err := open(c)
	if err != nil {
		t.Fatalf("watch after one closed: %v", err)
	}
	_ = s.Close()
	_ = held[1].Close()
}

// gzipBomb is a gzip stream of n zero bytes.
func gzipBomb(t *testing.T, n int) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	zero := make([]byte, 1<<20)
	for n > 0 {
		k := min(n, len(zero))
		if _, err := zw.Write(zero[:k]); err != nil {
			t.Fatal(err)
		}
		n -= k
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// connectError is the JSON body of a Connect unary error.
type connectError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Details []struct {
		Type  string `json:"type"`
		Value string `json:"value"`
	} `json:"details"`
}

func (e connectError) badRequest(t *testing.T) *errdetails.BadRequest {
	t.Helper()
	for _, d := range e.Details {
		if d.Type != "google.rpc.BadRequest" {
			continue
		}
		b, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(d.Value, "="))
		if err != nil {
			t.Fatalf("detail value: %v", err)
		}
		var br errdetails.BadRequest
		if err := proto.Unmarshal(b, &br); err != nil {
			t.Fatalf("BadRequest detail: %v", err)
		}
		return &br
	}
	t.Fatalf("error %q has no BadRequest detail", e.Message)
	return nil
}

// postRaw sends body to procedure over the Connect protocol and decodes the
// error it answers.
func postRaw(t *testing.T, f *fixture, procedure, contentType string, body []byte, header http.Header) connectError {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, f.srv.URL+procedure, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", contentType)
	for k, v := range header {
		req.Header[k] = v
	}
	res, err := f.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	var ce connectError
	if res.StatusCode == http.StatusOK || json.Unmarshal(b, &ce) != nil {
		t.Fatalf("%s: HTTP %d %q, want a Connect error", procedure, res.StatusCode, truncateBytes(b))
	}
	return ce
}

func TestGzipBombStopsAtTheSizeLimit(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{configure: func(cfg *server.Config) { cfg.MaxRequestBytes = 64 << 10 }})
	const expanded = 4 << 20 // 4 MiB of zeros in ~4 KiB, past the 64 KiB limit
	bomb := gzipBomb(t, expanded)
	ce := postRaw(t, f, compactorv1connect.LogServicePushLogsProcedure, "application/proto", bomb,
		http.Header{"Content-Encoding": {"gzip"}})
	if ce.Code != "resource_exhausted" {
		t.Fatalf("code %q (%s), want resource_exhausted", ce.Code, ce.Message)
	}
	// Decompressing the whole bomb to report its size is what costs the
	// CPU: the message must not know it.
	if strings.Contains(ce.Message, fmt.Sprint(expanded)) {
		t.Errorf("the whole bomb was decompressed: %q", ce.Message)
	}
}

func TestErrorsDoNotEchoUnboundedInput(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	for _, p := range protocols {
		c := f.clients(p)
		// 100 rather than the 10,000 the API allows: the manager looks each
		// id up, which is slow under the race detector; the bound is the
		// same.
		ids := make([]string, 100)
		for i := range ids {
			ids[i] = unknownID(i)
		}
		_, err := c.jobs.Compact(t.Context(), connect.NewRequest(&compactorv1.CompactRequest{CollectionIds: ids}))
		ce := wantCode(t, err, connect.CodeNotFound)
		if len(ce.Message()) > 1024 || !strings.Contains(ce.Message(), "100 collections not found") || !strings.Contains(ce.Message(), "and 90 more") {
			t.Errorf("%s: Compact of 100 unknown ids: %d-byte message %q", p.name, len(ce.Message()), truncate(ce.Message()))
		}
		if vs := violations(t, err); len(vs) != 10 {
			t.Errorf("%s: %d violations, want 10", p.name, len(vs))
		}

		huge := strings.Repeat("é", 50_000) // 100,000 bytes
		coll := createCollection(t, c, "echo-"+p.name, 2)
		_, err = c.logs.PushLogs(t.Context(), connect.NewRequest(&compactorv1.PushLogsRequest{CollectionId: coll.GetId(),
			Records: []*compactorv1.OperationRecord{{Op: compactorv1.Operation_OPERATION_DELETE, Id: huge}}}))
		ce = wantCode(t, err, connect.CodeInvalidArgument)
		if len(ce.Message()) > 1024 || !strings.Contains(ce.Message(), "…") {
			t.Errorf("%s: oversized id: %d-byte message", p.name, len(ce.Message()))
		}
		_, err = c.jobs.GetCompaction(t.Context(), connect.NewRequest(&compactorv1.GetCompactionRequest{JobId: huge}))
		if ce = wantCode(t, err, connect.CodeInvalidArgument); len(ce.Message()) > 1024 {
			t.Errorf("%s: oversized job id: %d-byte message", p.name, len(ce.Message()))
		}
		tok := base64.RawURLEncoding.EncodeToString([]byte("jobs:" + strings.Repeat("x", 100_000)))
		_, err = c.jobs.ListCompactions(t.Context(), connect.NewRequest(&compactorv1.ListCompactionsRequest{PageToken: tok}))
		if ce = wantCode(t, err, connect.CodeInvalidArgument); len(ce.Message()) > 1024 {
			t.Errorf("%s: oversized page token: %d-byte message", p.name, len(ce.Message()))
		}
		_, err = c.colls.CreateCollection(t.Context(), connect.NewRequest(&compactorv1.CreateCollectionRequest{Name: huge}))
		if ce = wantCode(t, err, connect.CodeInvalidArgument); len(ce.Message()) > 1024 {
			t.Errorf("%s: oversized name: %d-byte message", p.name, len(ce.Message()))
		}
	}
}

func truncate(s string) string {
	if len(s) > 300 {
		return s[:300] + "…"
	}
	return s
}

func TestCreateCollectionErrorsNameTheirField(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	for _, p := range protocols {
		c := f.clients(p)
		for _, tc := range []struct {
			req   *compactorv1.CreateCollectionRequest
			field string
		}{
			{&compactorv1.CreateCollectionRequest{Name: "  "}, "name"},
			{&compactorv1.CreateCollectionRequest{Name: strings.Repeat("n", 257)}, "name"},
			{&compactorv1.CreateCollectionRequest{Name: "bell\a"}, "name"},
			{&compactorv1.CreateCollectionRequest{Name: "ok", Dimension: -1}, "dimension"},
			{&compactorv1.CreateCollectionRequest{Name: "ok", Dimension: 1 << 20}, "dimension"},
		} {
			_, err := c.colls.CreateCollection(t.Context(), connect.NewRequest(tc.req))
			wantCode(t, err, connect.CodeInvalidArgument)
			wantViolation(t, err, tc.field)
		}
	}
}

func TestUndecodableRequestsCarryABadRequestDetail(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	coll := createCollection(t, f.clients(protocols[0]), "decode", 2)

	// A number that overflows float32, in JSON.
	body := fmt.Sprintf(`{"collection_id": %q, "records": [{"op": "OPERATION_ADD", "id": "a", "embedding": [1, 1e39]}]}`, coll.GetId())
	ce := postRaw(t, f, compactorv1connect.LogServicePushLogsProcedure, "application/json", []byte(body), nil)
	if ce.Code != "invalid_argument" {
		t.Fatalf("overflow: code %q (%s)", ce.Code, ce.Message)
	}
	if br := ce.badRequest(t); len(br.GetFieldViolations()) != 1 || br.GetFieldViolations()[0].GetField() != "embedding" {
		t.Errorf("overflow: violations %v, want one of embedding", br.GetFieldViolations())
	}

	// Invalid UTF-8 in a record id, in the binary encoding.
	var rec []byte
	rec = protowire.AppendTag(rec, 1, protowire.VarintType)
	rec = protowire.AppendVarint(rec, uint64(compactorv1.Operation_OPERATION_DELETE))
	rec = protowire.AppendTag(rec, 2, protowire.BytesType)
	rec = protowire.AppendString(rec, "bad\xff")
	var msg []byte
	msg = protowire.AppendTag(msg, 1, protowire.BytesType)
	msg = protowire.AppendString(msg, coll.GetId())
	msg = protowire.AppendTag(msg, 2, protowire.BytesType)
	msg = protowire.AppendBytes(msg, rec)
	ce = postRaw(t, f, compactorv1connect.LogServicePushLogsProcedure, "application/proto", msg, nil)
	if ce.Code != "invalid_argument" {
		t.Fatalf("invalid UTF-8: code %q (%s)", ce.Code, ce.Message)
	}
	if br := ce.badRequest(t); len(br.GetFieldViolations()) != 1 || br.GetFieldViolations()[0].GetField() != "records[0].id" {
		t.Errorf("invalid UTF-8: violations %v, want one of records[0].id", br.GetFieldViolations())
	}
	if n := handledWithCode(t, f, compactorv1connect.LogServicePushLogsProcedure, "invalid_argument"); n != 2 {
		t.Errorf("%v undecodable pushes counted, want 2", n)
	}
}

func TestBatchOverTheBacklogLimitSaysSendSmallerBatches(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{configure: func(cfg *server.Config) { cfg.MaxBacklog = 5 }})
	c := f.clients(protocols[1])
	coll := createCollection(t, c, "small", 2)
	_, err := c.logs.PushLogs(t.Context(), connect.NewRequest(&compactorv1.PushLogsRequest{CollectionId: coll.GetId(), Records: smallRecords(0, 10, 2)}))
	ce := wantCode(t, err, connect.CodeResourceExhausted)
	if !strings.Contains(ce.Message(), "smaller batches") || strings.Contains(ce.Message(), "retry after compaction") {
		t.Errorf("message %q, want it to ask for smaller batches", ce.Message())
	}
}

// handledWithCode is compactor_rpc_requests_total{procedure, code}.
func handledWithCode(t *testing.T, f *fixture, procedure, code string) float64 {
	t.Helper()
	mfs, err := f.app.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "compactor_rpc_requests_total" {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if (l.GetName() == "procedure" && l.GetValue() != procedure) || (l.GetName() == "code" && l.GetValue() != code) {
					continue metrics
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

func TestRequestsRefusedBeforeTheHandlerAreCountedAndLogged(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{configure: func(cfg *server.Config) {
		cfg.Token, cfg.MaxRequestBytes = token, 1024
	}})
	const push = compactorv1connect.LogServicePushLogsProcedure
	for _, p := range protocols {
		c := f.clients(p)
		_, err := c.logs.PushLogs(t.Context(), connect.NewRequest(&compactorv1.PushLogsRequest{CollectionId: unknownID(1)}))
		wantCode(t, err, connect.CodeUnauthenticated)
		c = f.clients(p, withBearer(token))
		_, err = c.logs.PushLogs(t.Context(), connect.NewRequest(&compactorv1.PushLogsRequest{CollectionId: unknownID(1), Records: smallRecords(0, 100, 8)}))
		wantCode(t, err, connect.CodeResourceExhausted)
	}
	n := float64(len(protocols))
	if got := handledWithCode(t, f, push, "unauthenticated"); got != n {
		t.Errorf("%v unauthenticated pushes counted, want %v", got, n)
	}
	if got := handledWithCode(t, f, push, "resource_exhausted"); got != n {
		t.Errorf("%v oversized pushes counted, want %v", got, n)
	}
	logs := f.logs.String()
	for _, code := range []string{"unauthenticated", "resource_exhausted"} {
		got := 0
		for _, line := range strings.Split(logs, "\n") {
			if strings.Contains(line, `msg="rpc refused"`) && strings.Contains(line, "procedure="+push+" code="+code) {
				got++
			}
		}
		if got != len(protocols) {
			t.Errorf("%d log lines of refused pushes with %s, want %d:\n%s", got, code, len(protocols), logs)
		}
	}
}

func TestReflectionNeedsTheTokenWithProtectReads(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{configure: func(cfg *server.Config) { cfg.Token, cfg.ProtectReads = token, true }})
	const list = "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo"
	// One ServerReflectionRequest{list_services: ""} in a Connect stream
	// envelope.
	msg := protowire.AppendTag(nil, 7, protowire.BytesType)
	msg = protowire.AppendString(msg, "")
	env := append([]byte{0, 0, 0, 0, byte(len(msg))}, msg...)
	call := func(auth string) *http.Response {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, f.srv.URL+list, bytes.NewReader(env))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/connect+proto")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		res, err := f.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	res := call("")
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized && !bytes.Contains(b, []byte("unauthenticated")) {
		t.Errorf("reflection without a token: HTTP %d %q", res.StatusCode, truncateBytes(b))
	}
	res = call("Bearer " + token)
	b, _ = io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || !bytes.Contains(b, []byte("compactor.v1.CompactionService")) {
		t.Errorf("reflection with the token: HTTP %d %q", res.StatusCode, truncateBytes(b))
	}
}

// TestTrickledBodyIsCutOffAtTheReadTimeout sends the headers of a unary
// call and one byte of its body, then nothing: the server must answer (and
// free the connection) after the read timeout instead of waiting forever.
func TestTrickledBodyIsCutOffAtTheReadTimeout(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{configure: func(cfg *server.Config) { cfg.ReadTimeout = 100 * time.Millisecond }})
	srv := httptest.NewServer(f.app.Handler()) // HTTP/1.1, as a slowloris client speaks
	t.Cleanup(srv.Close)
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{",
		compactorv1connect.CollectionServiceListCollectionsProcedure)
	// The server answers by itself; this bound only keeps a broken server
	// from hanging the suite.
	_ = conn.SetReadDeadline(time.Now().Add(2 * time.Minute))
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to a trickled body: %v", err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode == http.StatusOK || !bytes.Contains(b, []byte("--request-read-timeout")) {
		t.Errorf("trickled body over HTTP/1.1: HTTP %d %q", res.StatusCode, truncateBytes(b))
	}

	// The same over HTTP/2 (the fixture's server): the body is a pipe that
	// never ends.
	pr, pw := io.Pipe()
	defer pw.Close()
	go func() { _, _ = pw.Write([]byte("{")) }()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, f.srv.URL+compactorv1connect.CollectionServiceListCollectionsProcedure, pr)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	res, err = f.srv.Client().Do(req)
	if err != nil {
		t.Fatalf("no answer to a trickled body over HTTP/2: %v", err)
	}
	b, _ = io.ReadAll(res.Body)
	res.Body.Close()
	if res.ProtoMajor != 2 || res.StatusCode == http.StatusOK || !bytes.Contains(b, []byte("--request-read-timeout")) {
		t.Errorf("trickled body over HTTP/%d: HTTP %d %q", res.ProtoMajor, res.StatusCode, truncateBytes(b))
	}
}

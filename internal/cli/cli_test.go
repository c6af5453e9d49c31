package cli

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	compactorv1 "github.com/compactorhq/compactor/gen/compactor/v1"
	"github.com/compactorhq/compactor/gen/compactor/v1/compactorv1connect"
	"github.com/compactorhq/compactor/internal/server"
)

const (
	baseFile    = "../../testdata/debian-base.jsonl.gz"
	updatesFile = "../../testdata/debian-updates.jsonl.gz"
)

// startServer runs a real server (temp-dir storage, no scheduled
// compactions) until the test ends and returns its address.
func startServer(t *testing.T, configure func(*server.Config)) string {
	t.Helper()
	cfg := server.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Listen = "127.0.0.1:0"
	cfg.Manager.Interval = time.Hour
	if configure != nil {
		configure(&cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	app, err := server.Open(ctx, cfg, nil)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx, ln, func(net.Addr) { close(ready) }) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("server Run: %v", err)
		}
		if err := app.Close(); err != nil {
			t.Errorf("server Close: %v", err)
		}
	})
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("server stopped before serving: %v", err)
	}
	return "http://" + ln.Addr().String()
}

// serveFake serves Connect handlers over the production HTTP server setup
// (plaintext HTTP/2) until the test ends, and returns the address.
func serveFake(t *testing.T, mount func(mux *http.ServeMux)) string {
	t.Helper()
	mux := http.NewServeMux()
	mount(mux)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := server.NewHTTPServer(mux, slog.New(slog.DiscardHandler))
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	t.Cleanup(func() {
		_ = srv.Close()
		<-done
	})
	return "http://" + ln.Addr().String()
}

type result struct {
	stdout, stderr string
	err            error
}

func (r result) code() int { return exitCode(r.err) }

// cli runs the binary's run with args against addr.
func cli(t *testing.T, addr string, stdin io.Reader, args ...string) result {
	t.Helper()
	return cliCtx(t, context.Background(), addr, stdin, args...)
}

func cliCtx(t *testing.T, ctx context.Context, addr string, stdin io.Reader, args ...string) result {
	t.Helper()
	if stdin == nil {
		stdin = strings.NewReader("")
	}
	var stdout, stderr bytes.Buffer
	err := run(ctx, append([]string{"--addr", addr}, args...), stdin, &stdout, &stderr)
	return result{stdout: stdout.String(), stderr: stderr.String(), err: err}
}

// ok runs a command that must succeed.
func ok(t *testing.T, addr string, args ...string) result {
	t.Helper()
	r := cli(t, addr, nil, args...)
	if r.err != nil {
		t.Fatalf("%s: %v\nstderr: %s", strings.Join(args, " "), r.err, r.stderr)
	}
	return r
}

// fails runs a command that must exit with code and print want on stderr.
func fails(t *testing.T, addr string, stdin io.Reader, code int, want string, args ...string) result {
	t.Helper()
	r := cli(t, addr, stdin, args...)
	if r.code() != code {
		t.Fatalf("%s: exit %d (err %v), want %d\nstderr: %s", strings.Join(args, " "), r.code(), r.err, code, r.stderr)
	}
	if !strings.Contains(r.stderr, want) {
		t.Fatalf("%s: stderr %q does not contain %q", strings.Join(args, " "), r.stderr, want)
	}
	return r
}

func decode[T any](t *testing.T, s string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("output is not the expected JSON: %v\n%s", err, s)
	}
	return v
}

type collectionJSON struct {
	ID             string `json:"id"`
	Name           string `json:"name"`
	Dimension      int    `json:"dimension"`
	LogPosition    string `json:"log_position"` // int64 in protojson
	Backlog        string `json:"backlog"`
	SegmentVersion string `json:"segment_version"`
	RecordCount    string `json:"record_count"`
}

type jobJSON struct {
	ID             string `json:"id"`
	CollectionID   string `json:"collection_id"`
	CollectionName string `json:"collection_name"`
	Trigger        string `json:"trigger"`
	State          string `json:"state"`
	Reason         string `json:"reason"`
	RecordsRead    string `json:"records_read"`
	Error          string `json:"error"`
	ContinuesJobID string `json:"continues_job_id"`
}

type compactJSON struct {
	Jobs []struct {
		Job     jobJSON `json:"job"`
		Created bool    `json:"created"`
	} `json:"jobs"`
	Continuations []jobJSON `json:"continuations"`
}

type recordJSON struct {
	ID        string         `json:"id"`
	Embedding []float32      `json:"embedding"`
	Document  *string        `json:"document"`
	Metadata  map[string]any `json:"metadata"`
}

type pushJSON struct {
	CollectionID string `json:"collection_id"`
	Records      int64  `json:"records"`
	Lines        int    `json:"lines"`
	Batches      int    `json:"batches"`
	FirstOffset  int64  `json:"first_offset"`
	LastOffset   int64  `json:"last_offset"`
	Retries      int    `json:"retries"`
}

func createCollection(t *testing.T, addr, name string, extra ...string) string {
	t.Helper()
	r := ok(t, addr, append([]string{"-o", "json", "collections", "create", name}, extra...)...)
	c := decode[collectionJSON](t, r.stdout)
	if c.ID == "" || c.Name != name {
		t.Fatalf("created %+v, want a collection named %q with an id", c, name)
	}
	return c.ID
}

func getCollection(t *testing.T, addr, id string) collectionJSON {
	t.Helper()
	return decode[collectionJSON](t, ok(t, addr, "-o", "json", "collections", "get", id).stdout)
}

func TestCollectionsCreateListGetDelete(t *testing.T) {
	t.Parallel()
	addr := startServer(t, nil)

	if got := decode[[]collectionJSON](t, ok(t, addr, "-o", "json", "collections").stdout); len(got) != 0 {
		t.Fatalf("a new server lists %d collections, want none (and an empty JSON array)", len(got))
	}
	a := createCollection(t, addr, "alpha", "--dimension", "3")
	b := createCollection(t, addr, "beta")
	fails(t, addr, nil, 1, "already_exists", "collections", "create", "alpha")

	for _, protocol := range []string{"connect", "grpc", "grpcweb"} {
		r := ok(t, addr, "--protocol", protocol, "-o", "json", "collections", "list")
		got := decode[[]collectionJSON](t, r.stdout)
		if len(got) != 2 || got[0].ID != a || got[1].ID != b {
			t.Fatalf("--protocol %s: list = %+v, want alpha (%s) then beta (%s)", protocol, got, a, b)
		}
	}
	if c := getCollection(t, addr, a); c.Name != "alpha" || c.Dimension != 3 {
		t.Fatalf("get alpha = %+v, want name alpha, dimension 3", c)
	}
	table := ok(t, addr, "collections", "get", a).stdout
	for _, want := range []string{"Name:", "alpha", "Dimension:", "Backlog:", "Created:", "Z (just now)"} {
		if !strings.Contains(table, want) {
			t.Errorf("collections get table lacks %q:\n%s", want, table)
		}
	}
	list := ok(t, addr, "collections", "ls").stdout
	if !strings.Contains(list, "NAME") || !strings.Contains(list, "beta") {
		t.Errorf("collections table lacks the header or beta:\n%s", list)
	}

	del := decode[collectionJSON](t, ok(t, addr, "-o", "json", "collections", "delete", b).stdout)
	if del.ID != b {
		t.Fatalf("delete printed %+v, want collection %s", del, b)
	}
	fails(t, addr, nil, 1, "not_found", "collections", "get", b)
	fails(t, addr, nil, 1, "not_found", "collections", "delete", b)
	fails(t, addr, nil, 2, "accepts 1 arg", "collections", "get")
}

// TestPushCompactGet loads the Debian sample (base as add, updates as
// upsert), compacts it and reads it back.
func TestPushCompactGet(t *testing.T) {
	t.Parallel()
	// Small blocks keep the paged reads cheap under -race.
	addr := startServer(t, func(c *server.Config) { c.Segment.MaxBlockRecords, c.Segment.MinBlockRecords = 1000, 250 })
	id := createCollection(t, addr, "debian")

	base := decode[pushJSON](t, ok(t, addr, "-o", "json", "push", "--collection", id, baseFile).stdout)
	if base.Records != 5000 || base.Lines != 5000 || base.FirstOffset != 1 || base.LastOffset != 5000 || base.Batches != 5 {
		t.Fatalf("push base = %+v, want 5000 records in 5 batches at offsets 1..5000", base)
	}
	upd := decode[pushJSON](t, ok(t, addr, "-o", "json", "push", "--collection", id, "--op", "upsert", updatesFile).stdout)
	if upd.Records != 217 || upd.FirstOffset != 5001 || upd.LastOffset != 5217 {
		t.Fatalf("push updates = %+v, want 217 records at offsets 5001..5217", upd)
	}
	if c := getCollection(t, addr, id); c.Dimension != 64 || c.Backlog != "5217" {
		t.Fatalf("after the pushes: %+v, want dimension 64 and a backlog of 5217", c)
	}

	r := ok(t, addr, "-o", "json", "compact", id, "--wait", "--reason", "test load")
	res := decode[compactJSON](t, r.stdout)
	if len(res.Jobs) != 1 {
		t.Fatalf("compact --wait printed %d jobs, want 1:\n%s", len(res.Jobs), r.stdout)
	}
	job := res.Jobs[0].Job
	if !res.Jobs[0].Created || job.State != "JOB_STATE_SUCCEEDED" || job.RecordsRead != "5217" || job.CollectionID != id ||
		job.Reason != "test load" {
		t.Fatalf("compact --wait job = %+v (created %v), want a created job SUCCEEDED with 5217 records read", job, res.Jobs[0].Created)
	}
	if len(res.Continuations) != 0 {
		t.Fatalf("continuations %+v, want none: the backlog fits one job", res.Continuations)
	}
	if c := getCollection(t, addr, id); c.Backlog != "" || c.RecordCount != "5000" || c.SegmentVersion != "1" {
		t.Fatalf("after compaction: %+v, want no backlog, 5000 records in version 1", c)
	}

	// Paged: every record (the sample yields 5,000), in id order, across
	// pages of the server's largest size (the table, cheaper to check).
	all := strings.Split(strings.TrimSuffix(ok(t, addr, "get", "--collection", id, "--limit", "0").stdout, "\n"), "\n")
	if len(all) != 5001 || !strings.HasPrefix(all[0], "ID ") || !strings.HasPrefix(all[1], "0ad ") {
		t.Fatalf("paged get: %d lines starting with %q, %q; want a header and 5000 records from 0ad", len(all), all[0], all[1])
	}
	if recs := decode[[]recordJSON](t, ok(t, addr, "-o", "json", "get", "--collection", id, "--limit", "5").stdout); len(recs) != 5 || recs[0].ID != "0ad" {
		t.Fatalf("get --limit 5 returned %d records", len(recs))
	}
	if recs := decode[[]recordJSON](t, ok(t, addr, "-o", "json", "get", "--collection", id).stdout); len(recs) != 100 {
		t.Fatalf("get without --limit returned %d records, want the default 100", len(recs))
	}

	// By id: 0ad as loaded, 7zip as its last update line left it.
	recs := decode[[]recordJSON](t, ok(t, addr, "-o", "json", "get", "--collection", id, "0ad", "7zip").stdout)
	if len(recs) != 2 || recs[0].ID != "0ad" || recs[1].ID != "7zip" {
		t.Fatalf("get 0ad 7zip = %+v", recs)
	}
	if len(recs[0].Embedding) != 64 || recs[0].Document == nil || !strings.Contains(*recs[0].Document, "strategy game") ||
		recs[0].Metadata["section"] != "games" {
		t.Fatalf("record 0ad = %+v", recs[0])
	}
	if want := lastUpdate(t, "7zip"); recs[1].Metadata["version"] != want["version"] {
		t.Fatalf("7zip version %v, want %v from its last update line", recs[1].Metadata["version"], want["version"])
	}
	table := ok(t, addr, "get", "--collection", id, "0ad").stdout
	if !strings.Contains(table, "0ad") || !strings.Contains(table, `"priority":"optional"`) || !strings.Contains(table, "64") {
		t.Fatalf("get table:\n%s", table)
	}
	r = fails(t, addr, nil, 1, `not_found: 1 of the requested records do not exist: "no-such-package"`, "-o", "json", "get", "--collection", id, "0ad", "no-such-package")
	if recs := decode[[]recordJSON](t, r.stdout); len(recs) != 1 {
		t.Fatalf("the records found are printed even when some are missing; got %d", len(recs))
	}

	// Jobs: list, one, cancel of a finished one.
	jobs := decode[[]jobJSON](t, ok(t, addr, "-o", "json", "jobs").stdout)
	if len(jobs) != 1 || jobs[0].ID != job.ID || jobs[0].Trigger != "TRIGGER_ONE_OFF" {
		t.Fatalf("jobs = %+v, want the one job %s", jobs, job.ID)
	}
	if got := decode[[]jobJSON](t, ok(t, addr, "-o", "json", "jobs", "--state", "running", "--state", "queued").stdout); len(got) != 0 {
		t.Fatalf("jobs --state running --state queued = %+v, want none", got)
	}
	if got := decode[[]jobJSON](t, ok(t, addr, "-o", "json", "jobs", "--collection", id, "--trigger", "one-off", "--state", "SUCCEEDED").stdout); len(got) != 1 {
		t.Fatalf("jobs filtered to this job = %+v, want it", got)
	}
	one := decode[jobJSON](t, ok(t, addr, "-o", "json", "job", job.ID).stdout)
	if one.ID != job.ID || one.CollectionName != "debian" || one.State != "JOB_STATE_SUCCEEDED" {
		t.Fatalf("job = %+v", one)
	}
	// The 8 characters the page and the jobs table show name the job too.
	if short := decode[jobJSON](t, ok(t, addr, "-o", "json", "job", job.ID[:8]).stdout); short.ID != job.ID {
		t.Fatalf("job %s = %+v, want job %s", job.ID[:8], short, job.ID)
	}
	detail := ok(t, addr, "job", job.ID).stdout
	for _, want := range []string{"Records read:", "5217", "Log offsets:", "(0, 5217]", "Version:", "0 -> 1", "Reason:", "test load", "Duration:"} {
		if !strings.Contains(detail, want) {
			t.Errorf("job table lacks %q:\n%s", want, detail)
		}
	}
	fails(t, addr, nil, 1, "failed_precondition", "cancel", job.ID)
}

// lastUpdate is the metadata of id's last line in the updates file.
func lastUpdate(t *testing.T, id string) map[string]any {
	t.Helper()
	f, err := os.Open(updatesFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var md map[string]any
	sc := bufio.NewScanner(zr)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l recordJSON
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatal(err)
		}
		if l.ID == id {
			md = l.Metadata
		}
	}
	if md == nil {
		t.Fatalf("%s is not in %s", id, updatesFile)
	}
	return md
}

func embedding(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf("%.2f", float64(i+1)/100)
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// jsonl writes lines to a file in the test's temp dir.
func jsonl(t *testing.T, lines ...string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "in.jsonl")
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPushBadLines(t *testing.T) {
	t.Parallel()
	addr := startServer(t, nil)
	e4 := embedding(4)
	good := func(id string) string { return fmt.Sprintf(`{"id":%q,"embedding":%s,"metadata":{"n":1}}`, id, e4) }

	tests := []struct {
		name   string
		lines  []string
		batch  string
		want   []string // on stderr
		pushed int64    // records appended before the failure
	}{
		{
			name:   "malformed JSON on line 3",
			lines:  []string{good("a"), good("b"), `{"id": "c", "embedding": [1, 2`, good("d")},
			want:   []string{":3: invalid JSON", "lines 1..2 were pushed"},
			pushed: 2,
		},
		{
			name:   "a wrong embedding dimension on line 2, found by the server",
			lines:  []string{good("a"), `{"id":"b","embedding":[1,2,3]}`, good("c")},
			want:   []string{":2: invalid_argument: embedding: has dimension 3, the collection's is 4", `(id "b")`, "line 1 was pushed"},
			pushed: 1,
		},
		{
			name:   "a server rejection inside the second batch maps to its line",
			lines:  []string{good("a"), good("b"), good("c"), good("d"), "", good("e"), `{"id":"f","op":"update","metadata":{"k":[1]}}`, good("g")},
			batch:  "3",
			want:   []string{":7: invalid_argument: metadata.k:", "lines 1..6 were pushed"},
			pushed: 5,
		},
		{
			name:  "an unknown op",
			lines: []string{`{"id":"a","op":"merge"}`},
			want:  []string{`:1: op "merge": want add, update, upsert or delete`, "nothing was pushed"},
		},
		{
			name:   "a missing id",
			lines:  []string{good("a"), `{"embedding":[1,2,3,4]}`},
			want:   []string{`:2: "id" is missing`, "line 1 was pushed"},
			pushed: 1,
		},
		{
			name:  "an unknown field",
			lines: []string{`{"id":"a","metdata":{}}`},
			want:  []string{`:1: unknown field "metdata"`},
		},
		{
			name:  "an embedding of strings",
			lines: []string{`{"id":"a","embedding":"1,2"}`},
			want:  []string{`:1: "embedding": want an array of numbers, got string`},
		},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := createCollection(t, addr, fmt.Sprintf("bad-%d", i))
			file := jsonl(t, tt.lines...)
			args := []string{"push", "--collection", id, file}
			if tt.batch != "" {
				args = append(args, "--batch", tt.batch)
			}
			r := fails(t, addr, nil, 1, file, args...)
			for _, want := range tt.want {
				if !strings.Contains(r.stderr, want) {
					t.Errorf("stderr %q lacks %q", r.stderr, want)
				}
			}
			if got := getCollection(t, addr, id).LogPosition; got != fmt.Sprint(tt.pushed) && !(tt.pushed == 0 && got == "") {
				t.Errorf("log position %s after the failure, want %d records pushed", got, tt.pushed)
			}
		})
	}
}

func TestPushStdinGzipAndDefaults(t *testing.T) {
	t.Parallel()
	addr := startServer(t, nil)
	id := createCollection(t, addr, "stdin")
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	fmt.Fprintf(zw, "{\"id\":\"x\",\"embedding\":%s,\"document\":\"first\"}\n\n{\"op\":\"update\",\"id\":\"x\",\"document\":\"second\"}\r\n", embedding(2))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	// gzip recognised on stdin by its magic number; --op upsert for the
	// line without "op" (an upsert needs an embedding, an update does not).
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), []string{"--addr", addr, "-o", "json", "push", "--collection", id, "--op", "upsert", "-"},
		&buf, &stdout, &stderr); err != nil {
		t.Fatalf("push from stdin: %v\n%s", err, stderr.String())
	}
	if p := decode[pushJSON](t, stdout.String()); p.Records != 2 || p.Lines != 3 {
		t.Fatalf("push = %+v, want 2 records from 3 lines", p)
	}
	recs := decode[[]recordJSON](t, ok(t, addr, "-o", "json", "get", "--collection", id, "x").stdout)
	if len(recs) != 1 || recs[0].Document == nil || *recs[0].Document != "second" || len(recs[0].Embedding) != 2 {
		t.Fatalf("record x = %+v, want the upserted document and the first embedding", recs)
	}
	// The table summary names the records and offsets.
	r := cli(t, addr, strings.NewReader(`{"op":"delete","id":"x"}`), "push", "--collection", id, "-")
	if r.err != nil || !strings.Contains(r.stdout, "pushed 1 record from <stdin>") || !strings.Contains(r.stdout, "log offsets 3..3") {
		t.Fatalf("push summary %q (err %v)", r.stdout, r.err)
	}
	fails(t, addr, nil, 2, "--collection is required", "push", "-")
	fails(t, addr, nil, 2, "--op \"merge\"", "push", "--collection", id, "--op", "merge", "-")
	fails(t, addr, nil, 2, "--batch must be in 1..10000", "push", "--collection", id, "--batch", "0", "-")
	fails(t, addr, nil, 1, "not_found", "push", "--collection", "6a1b3c0e-8f1e-4a55-9f0e-5c1d2f3a4b5c", "-")
}

func TestPushBackpressureGivesUp(t *testing.T) {
	t.Parallel()
	addr := startServer(t, func(c *server.Config) { c.MaxBacklog = 3 })
	id := createCollection(t, addr, "full")
	var lines []string
	for i := range 5 {
		lines = append(lines, fmt.Sprintf(`{"id":"r%d","embedding":[1,2]}`, i))
	}
	r := fails(t, addr, nil, 1, "resource_exhausted", "push", "--collection", id, "--batch", "2", "--retries", "2", "--retry-wait", "1ms", jsonl(t, lines...))
	for _, want := range []string{"retry 1/2", "retry 2/2", "gave up after 2 retries", "lines 1..2 were pushed"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	if c := getCollection(t, addr, id); c.LogPosition != "2" {
		t.Fatalf("log position %s, want 2: the first batch stays pushed", c.LogPosition)
	}
}

// TestPushBatchOverTheBacklogLimitFailsAtOnce: a batch that can never fit
// is not retried.
func TestPushBatchOverTheBacklogLimitFailsAtOnce(t *testing.T) {
	t.Parallel()
	addr := startServer(t, func(c *server.Config) { c.MaxBacklog = 3 })
	id := createCollection(t, addr, "small")
	var lines []string
	for i := range 5 {
		lines = append(lines, fmt.Sprintf(`{"id":"r%d","embedding":[1,2]}`, i))
	}
	r := fails(t, addr, nil, 1, "resource_exhausted", "push", "--collection", id, "--batch", "5", "--retries", "3", "--retry-wait", "1ms", jsonl(t, lines...))
	if strings.Contains(r.stderr, "retry 1/") || !strings.Contains(r.stderr, "lower --batch") {
		t.Fatalf("a batch over the limit was retried, or the hint is missing:\n%s", r.stderr)
	}
}

// fakeLog refuses the first refusals pushes for backpressure.
type fakeLog struct {
	compactorv1connect.UnimplementedLogServiceHandler
	compactorv1connect.UnimplementedCollectionServiceHandler
	mu       sync.Mutex
	refusals int
	calls    int
	offset   int64
}

func (f *fakeLog) GetCollection(_ context.Context, req *connect.Request[compactorv1.GetCollectionRequest]) (*connect.Response[compactorv1.GetCollectionResponse], error) {
	return connect.NewResponse(&compactorv1.GetCollectionResponse{Collection: &compactorv1.Collection{Id: req.Msg.GetId(), Name: "fake"}}), nil
}

func (f *fakeLog) PushLogs(_ context.Context, req *connect.Request[compactorv1.PushLogsRequest]) (*connect.Response[compactorv1.PushLogsResponse], error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.calls <= f.refusals {
		ce := connect.NewError(connect.CodeResourceExhausted, errors.New("backlog limit reached; retry after compaction"))
		if d, err := connect.NewErrorDetail(&compactorv1.ErrorDetail{Reason: compactorv1.ErrorReason_ERROR_REASON_BACKLOG_LIMIT}); err == nil {
			ce.AddDetail(d)
		}
		return nil, ce
	}
	n := int64(len(req.Msg.GetRecords()))
	first := f.offset + 1
	f.offset += n
	return connect.NewResponse(&compactorv1.PushLogsResponse{FirstOffset: first, LastOffset: f.offset, Count: int32(n)}), nil
}

func TestPushRetriesBackpressure(t *testing.T) {
	t.Parallel()
	fake := &fakeLog{refusals: 2}
	addr := serveFake(t, func(mux *http.ServeMux) {
		mux.Handle(compactorv1connect.NewLogServiceHandler(fake))
		mux.Handle(compactorv1connect.NewCollectionServiceHandler(fake))
	})
	file := jsonl(t, `{"id":"a","embedding":[1]}`, `{"id":"b","embedding":[1]}`, `{"id":"c","embedding":[1]}`)
	r := cli(t, addr, nil, "-o", "json", "push", "--collection", "6a1b3c0e-8f1e-4a55-9f0e-5c1d2f3a4b5c", "--batch", "2", "--retry-wait", "1ms", file)
	if r.err != nil {
		t.Fatalf("push: %v\n%s", r.err, r.stderr)
	}
	p := decode[pushJSON](t, r.stdout)
	if p.Records != 3 || p.Batches != 2 || p.Retries != 2 || p.FirstOffset != 1 || p.LastOffset != 3 {
		t.Fatalf("push = %+v, want 3 records in 2 batches after 2 retries", p)
	}
	if !strings.Contains(r.stderr, "resource_exhausted") || !strings.Contains(r.stderr, "retry 2/10") {
		t.Fatalf("stderr does not tell about the retries:\n%s", r.stderr)
	}
}

func TestErrors(t *testing.T) {
	t.Parallel()
	addr := startServer(t, nil)
	fails(t, addr, nil, 2, "give the collections to compact", "compact")
	fails(t, addr, nil, 2, "not both", "compact", "--all", "x")
	fails(t, addr, nil, 1, "not_found", "compact", "6a1b3c0e-8f1e-4a55-9f0e-5c1d2f3a4b5c")
	fails(t, addr, nil, 1, `collection "not-a-uuid" not found: the server has no collections`, "compact", "not-a-uuid")
	fails(t, addr, nil, 1, "not_found", "job", "6a1b3c0e-8f1e-4a55-9f0e-5c1d2f3a4b5c")
	fails(t, addr, nil, 1, "not_found", "cancel", "6a1b3c0e-8f1e-4a55-9f0e-5c1d2f3a4b5c")
	fails(t, addr, nil, 1, `no job id starts with "6a1b3c0e"`, "job", "6a1b3c0e")
	fails(t, addr, nil, 2, `--output "bogus"`, "--output", "bogus", "collections", "list")
	fails(t, addr, nil, 2, `--protocol "carrier-pigeon"`, "--protocol", "carrier-pigeon", "jobs")
	fails(t, addr, nil, 2, "unknown flag: --bogus", "jobs", "--bogus")
	fails(t, addr, nil, 2, `--state "done"`, "jobs", "--state", "done")
	fails(t, addr, nil, 2, "accepts 1 arg", "job")
	// An unreachable server is an error with its code.
	fails(t, "http://127.0.0.1:1", nil, 1, "unavailable", "collections")
	// A token never shows in an error.
	r := fails(t, "http://127.0.0.1:1", nil, 1, "unavailable", "--token", "s3cret-token", "compact", "--all")
	if strings.Contains(r.stderr, "s3cret") {
		t.Fatalf("the token appears on stderr: %s", r.stderr)
	}
	if r := ok(t, addr, "compact", "--help"); !strings.Contains(r.stdout, "-o json prints one object") {
		t.Fatalf("compact --help lacks the output documentation:\n%s", r.stdout)
	}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"completion", "bash"}, nil, &out, io.Discard); err != nil || !strings.Contains(out.String(), "bash completion") {
		t.Fatalf("the completion command is missing: %v", err)
	}
}

func TestCompactWaitTableAndAll(t *testing.T) {
	t.Parallel()
	addr := startServer(t, nil)
	a := createCollection(t, addr, "a")
	b := createCollection(t, addr, "b")
	file := jsonl(t, `{"id":"x","embedding":[1,2]}`, `{"id":"y","embedding":[3,4]}`)
	ok(t, addr, "push", "--collection", a, file)

	r := ok(t, addr, "compact", "--all", "--wait")
	// stdout: the jobs created, then the summary; stderr (not a terminal):
	// one line per state change, no escape sequences.
	for _, want := range []string{"RESULT", "created", "SUCCEEDED", "2 of 2 jobs succeeded", "nothing to compact"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
		}
	}
	if !strings.Contains(r.stderr, "SUCCEEDED in") || strings.Contains(r.stderr, "\x1b") {
		t.Errorf("stderr should hold plain state lines:\n%q", r.stderr)
	}
	res := decode[compactJSON](t, ok(t, addr, "-o", "json", "compact", "--all").stdout)
	if len(res.Jobs) != 2 || res.Jobs[0].Job.CollectionID != a || res.Jobs[1].Job.CollectionID != b {
		t.Fatalf("compact --all = %+v, want jobs for a and b", res)
	}
	if r := ok(t, addr, "jobs", "--limit", "3"); strings.Count(r.stdout, "\n") != 4 || !strings.Contains(r.stdout, "ONE_OFF") {
		t.Fatalf("jobs --limit 3 should print a header and 3 jobs:\n%s", r.stdout)
	}
	// The kind: a column of the table, a filter.
	if r := ok(t, addr, "jobs", "--kind", "compaction", "--limit", "1"); !strings.HasPrefix(r.stdout, "JOB ") ||
		!strings.Contains(strings.SplitN(r.stdout, "\n", 2)[0], " KIND ") || !strings.Contains(r.stdout, " COMPACTION ") {
		t.Fatalf("jobs should show a KIND column with COMPACTION:\n%s", r.stdout)
	}
	if r := ok(t, addr, "jobs", "--kind", "index-rebuild"); !strings.Contains(r.stderr+r.stdout, "no jobs") {
		t.Fatalf("jobs --kind index-rebuild with no rebuild: %q %q, want no jobs", r.stdout, r.stderr)
	}
	fails(t, addr, nil, 2, `--kind "reshard": want compaction, index-rebuild, verify`, "jobs", "--kind", "reshard")
	fails(t, addr, nil, 2, `--kind "reshard"`, "watch", "--kind", "reshard")
}

// TestCompactWaitContinuation: a backlog larger than one job goes on in
// continuation jobs, which --wait follows to the end and names.
func TestCompactWaitContinuation(t *testing.T) {
	t.Parallel()
	addr := startServer(t, func(c *server.Config) { c.Compaction.MaxRecords = 3 })
	id := createCollection(t, addr, "big")
	var lines []string
	for i := range 8 {
		lines = append(lines, fmt.Sprintf(`{"id":"r%d","embedding":[1,2]}`, i))
	}
	ok(t, addr, "push", "--collection", id, jsonl(t, lines...))
	res := decode[compactJSON](t, ok(t, addr, "-o", "json", "compact", id, "--wait").stdout)
	if len(res.Jobs) != 1 || res.Jobs[0].Job.RecordsRead != "3" {
		t.Fatalf("compact = %+v, want one job reading 3 records", res)
	}
	// 8 records, 3 per job: two continuations, each continuing the one before.
	if len(res.Continuations) != 2 {
		t.Fatalf("continuations = %+v, want 2", res.Continuations)
	}
	prev := res.Jobs[0].Job.ID
	for i, c := range res.Continuations {
		if c.ContinuesJobID != prev || c.State != "JOB_STATE_SUCCEEDED" {
			t.Fatalf("continuation %d = %+v, want SUCCEEDED continuing %s", i, c, prev)
		}
		prev = c.ID
	}
	if c := getCollection(t, addr, id); c.Backlog != "" && c.Backlog != "0" {
		t.Fatalf("backlog %s after compact --wait, want 0", c.Backlog)
	}
}

// lineSink hands each line written to it to a channel.
type lineSink struct {
	mu    sync.Mutex
	buf   []byte
	lines chan string
	ended chan struct{} // when set, closed by the test once the writing command has returned
}

func (w *lineSink) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		w.lines <- string(w.buf[:i])
		w.buf = w.buf[i+1:]
	}
}

func (w *lineSink) next(t *testing.T, match func(string) bool) string {
	t.Helper()
	// No wall-clock deadline (a busy machine is slow, not broken): the
	// line comes, or the command ends without it.
	for {
		select {
		case l := <-w.lines:
			if match(l) {
				return l
			}
		case <-w.ended:
			t.Fatal("the command ended without printing a matching line")
		}
	}
}

func TestWatchUntilInterrupted(t *testing.T) {
	t.Parallel()
	addr := startServer(t, nil)
	id := createCollection(t, addr, "watched")
	ok(t, addr, "push", "--collection", id, jsonl(t, `{"id":"x","embedding":[1,2]}`))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &lineSink{lines: make(chan string, 1000), ended: make(chan struct{})}
	var stderr bytes.Buffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--addr", addr, "-o", "json", "watch", "--progress", "--collection", id}, strings.NewReader(""), out, &stderr)
		close(out.ended)
	}()
	out.next(t, func(l string) bool { return strings.Contains(l, "WATCH_EVENT_TYPE_SNAPSHOT_COMPLETE") })

	job := decode[compactJSON](t, ok(t, addr, "-o", "json", "compact", id).stdout).Jobs[0].Job
	l := out.next(t, func(l string) bool { return strings.Contains(l, job.ID) && strings.Contains(l, "JOB_STATE_SUCCEEDED") })
	ev := decode[struct {
		Type string  `json:"type"`
		Job  jobJSON `json:"job"`
	}](t, l)
	if ev.Type != "WATCH_EVENT_TYPE_CHANGED" || ev.Job.CollectionName != "watched" {
		t.Fatalf("event %+v", ev)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("watch ended with %v after the interrupt, want exit 0; stderr: %s", err, stderr.String())
	}
}

// fakeCompaction serves a Compact with two jobs and watches that end them
// FAILED and CANCELLED, dropping the first stream halfway.
type fakeCompaction struct {
	compactorv1connect.UnimplementedCompactionServiceHandler
	mu      sync.Mutex
	watches [][]string // job_ids of each watch
}

func fakeJob(id, coll string, state compactorv1.JobState) *compactorv1.Job {
	return &compactorv1.Job{Id: id, CollectionId: coll + "-id", CollectionName: coll, State: state, CreateTime: timestamppb.Now()}
}

const (
	fakeJob1 = "11111111-1111-4111-8111-111111111111"
	fakeJob2 = "22222222-2222-4222-8222-222222222222"
)

func (f *fakeCompaction) Compact(context.Context, *connect.Request[compactorv1.CompactRequest]) (*connect.Response[compactorv1.CompactResponse], error) {
	return connect.NewResponse(&compactorv1.CompactResponse{Jobs: []*compactorv1.CompactResult{
		{Job: fakeJob(fakeJob1, "one", compactorv1.JobState_JOB_STATE_QUEUED), Created: true},
		{Job: fakeJob(fakeJob2, "two", compactorv1.JobState_JOB_STATE_QUEUED)},
	}}), nil
}

func (f *fakeCompaction) WatchCompactions(ctx context.Context, req *connect.Request[compactorv1.WatchCompactionsRequest], stream *connect.ServerStream[compactorv1.WatchCompactionsResponse]) error {
	f.mu.Lock()
	f.watches = append(f.watches, req.Msg.GetJobIds())
	n := len(f.watches)
	f.mu.Unlock()
	send := func(typ compactorv1.WatchEventType, j *compactorv1.Job) error {
		return stream.Send(&compactorv1.WatchCompactionsResponse{Type: typ, Job: j})
	}
	if n == 1 {
		running := fakeJob(fakeJob1, "one", compactorv1.JobState_JOB_STATE_RUNNING)
		running.Progress = &compactorv1.Progress{RecordsRead: 5, RecordsTotal: 10, Phase: "reading log"}
		failed := fakeJob(fakeJob1, "one", compactorv1.JobState_JOB_STATE_FAILED)
		failed.Error = "write block: disk full"
		for _, m := range []struct {
			typ compactorv1.WatchEventType
			job *compactorv1.Job
		}{
			{compactorv1.WatchEventType_WATCH_EVENT_TYPE_SNAPSHOT, running},
			{compactorv1.WatchEventType_WATCH_EVENT_TYPE_SNAPSHOT, fakeJob(fakeJob2, "two", compactorv1.JobState_JOB_STATE_QUEUED)},
			{compactorv1.WatchEventType_WATCH_EVENT_TYPE_SNAPSHOT_COMPLETE, nil},
			{compactorv1.WatchEventType_WATCH_EVENT_TYPE_PROGRESS, running},
			{compactorv1.WatchEventType_WATCH_EVENT_TYPE_CHANGED, failed},
		} {
			if err := send(m.typ, m.job); err != nil {
				return err
			}
		}
		return connect.NewError(connect.CodeUnavailable, errors.New("watcher fell more than its buffer behind; watch again"))
	}
	if err := send(compactorv1.WatchEventType_WATCH_EVENT_TYPE_SNAPSHOT, fakeJob(fakeJob2, "two", compactorv1.JobState_JOB_STATE_CANCELLED)); err != nil {
		return err
	}
	if err := send(compactorv1.WatchEventType_WATCH_EVENT_TYPE_SNAPSHOT_COMPLETE, nil); err != nil {
		return err
	}
	<-ctx.Done() // the client hangs up once every job is finished
	return nil
}

func TestCompactWaitReportsFailedAndCancelledJobs(t *testing.T) {
	t.Parallel()
	fake := &fakeCompaction{}
	addr := serveFake(t, func(mux *http.ServeMux) { mux.Handle(compactorv1connect.NewCompactionServiceHandler(fake)) })

	r := cli(t, addr, nil, "-o", "json", "compact", "--all", "--wait")
	if r.code() != 1 {
		t.Fatalf("exit %d (%v), want 1", r.code(), r.err)
	}
	for _, want := range []string{
		"2 of 2 jobs did not succeed",
		"job " + fakeJob1 + " (collection one) FAILED: write block: disk full",
		"job " + fakeJob2 + " (collection two) CANCELLED",
		"reconnecting",
	} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	res := decode[compactJSON](t, r.stdout)
	if len(res.Jobs) != 2 || res.Jobs[0].Job.State != "JOB_STATE_FAILED" || res.Jobs[1].Job.State != "JOB_STATE_CANCELLED" ||
		!res.Jobs[0].Created || res.Jobs[1].Created {
		t.Fatalf("json = %+v, want job one FAILED (created), job two CANCELLED (already queued)", res)
	}
	fake.mu.Lock()
	defer fake.mu.Unlock()
	want := [][]string{{fakeJob1, fakeJob2}, {fakeJob2}}
	if !slices.EqualFunc(fake.watches, want, slices.Equal) {
		t.Fatalf("watched job ids %v, want %v: the reconnection watches only the unfinished job", fake.watches, want)
	}
}

func TestOutputHelpers(t *testing.T) {
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	o := &output{now: func() time.Time { return now }}
	for _, tt := range []struct{ got, want string }{
		{o.fmtTime(timestamppb.New(now.Add(-2*time.Minute - 5*time.Second))), "2025-06-01T11:57:55Z (2m ago)"},
		{o.fmtTime(timestamppb.New(now.Add(-72 * time.Hour))), "2025-05-29T12:00:00Z (3d ago)"},
		{o.fmtTime(nil), "-"},
		{safeText("evil\x1b[2Jname\tx"), `evil\x1b[2Jname\tx`},
		{ellipsize("abcdef", 4), "abc…"},
		// The whole-job fraction, not records read: 100% read is 60% done.
		{progressText(&compactorv1.Progress{RecordsRead: 1000, RecordsTotal: 1000, Phase: "writing blocks", Fraction: 0.6, Eta: durationpb.New(3200 * time.Millisecond)}),
			"60% writing blocks, 1000 of 1000 records read, ETA 3.2s"},
		// An older server without fraction: records read of total; no ETA is unknown, never 0.
		{progressText(&compactorv1.Progress{RecordsRead: 450, RecordsTotal: 1000, Phase: "reading log"}), "45% reading log, 450 of 1000 records read, ETA unknown"},
		{progressText(&compactorv1.Progress{RecordsRead: 7}), "7 records read, ETA unknown"},
		{etaText(&compactorv1.Progress{Eta: durationpb.New(0)}), "ETA <1s"},
	} {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
}

func TestToken(t *testing.T) {
	t.Parallel()
	addr := startServer(t, func(c *server.Config) { c.Token = "s3cret-token" })
	fails(t, addr, nil, 1, "unauthenticated", "collections", "create", "x")
	r := fails(t, addr, nil, 1, "unauthenticated", "--token", "wrong-s3cret", "collections", "create", "x")
	if strings.Contains(r.stderr, "s3cret") {
		t.Fatalf("the token appears on stderr: %s", r.stderr)
	}
	ok(t, addr, "--token", "s3cret-token", "collections", "create", "x")
	if got := decode[[]collectionJSON](t, ok(t, addr, "-o", "json", "collections").stdout); len(got) != 1 {
		t.Fatalf("reads need no token; list = %+v", got)
	}
}

func TestNodesListsTheServer(t *testing.T) {
	t.Parallel()
	addr := startServer(t, func(cfg *server.Config) { cfg.Manager.Node = "replica-a" })
	type nodeJSON struct {
		Name  string `json:"name"`
		Alive bool   `json:"alive"`
		Self  bool   `json:"self"`
	}
	got := decode[[]nodeJSON](t, ok(t, addr, "-o", "json", "nodes").stdout)
	if len(got) != 1 || got[0].Name != "replica-a" || !got[0].Alive || !got[0].Self {
		t.Fatalf("nodes = %+v, want replica-a, alive, self", got)
	}
	table := ok(t, addr, "nodes").stdout
	for _, want := range []string{"NODE", "LAST HEARTBEAT", "replica-a (answered)", "alive"} {
		if !strings.Contains(table, want) {
			t.Errorf("nodes table lacks %q:\n%s", want, table)
		}
	}
}

func TestPauseResumePlanAndSettings(t *testing.T) {
	t.Parallel()
	addr := startServer(t, nil)
	id := createCollection(t, addr, "tuned", "--dimension", "3")
	lines := `{"id":"a","embedding":[1,2,3]}` + "\n" + `{"id":"b","embedding":[1,2,3]}` + "\n"
	if r := cli(t, addr, strings.NewReader(lines), "push", "--collection", id, "-"); r.err != nil {
		t.Fatalf("push: %v\n%s", r.err, r.stderr)
	}
	out := ok(t, addr, "pause", "--reason", "storage maintenance", "--operator", "ops").stdout
	if !strings.Contains(out, "paused since") || !strings.Contains(out, "by ops: storage maintenance") {
		t.Fatalf("pause printed:\n%s", out)
	}
	out = ok(t, addr, "pause", id, "--reason", "reindex").stdout
	if !strings.Contains(out, "Collection tuned") || !strings.Contains(out, "reindex") {
		t.Fatalf("pause of a collection printed:\n%s", out)
	}
	plan := ok(t, addr, "plan", "--all").stdout
	if !strings.Contains(plan, "tuned") || !strings.Contains(plan, "storage maintenance") {
		t.Fatalf("plan while paused:\n%s", plan)
	}
	ok(t, addr, "resume")
	ok(t, addr, "resume", id)
	got := ok(t, addr, "collections", "set", id, "--min-compaction-size", "1", "--max-uncompacted-age", "90s").stdout
	for _, want := range []string{"Min compaction size:", "1 records", "1m30s", "Automatic compaction:", "running"} {
		if !strings.Contains(got, want) {
			t.Errorf("collections set printed no %q:\n%s", want, got)
		}
	}
	fails(t, addr, nil, 1, "invalid_argument", "collections", "set", id, "--max-uncompacted-age", "1ms")
	// One threshold given: the other keeps its value.
	got = ok(t, addr, "collections", "set", id, "--max-uncompacted-age", "2m").stdout
	if !strings.Contains(got, "1 records") || !strings.Contains(got, "2m0s") {
		t.Errorf("collections set --max-uncompacted-age 2m must keep the minimum size of 1 record:\n%s", got)
	}
	got = ok(t, addr, "collections", "set", id, "--max-uncompacted-age", "90s").stdout
	fails(t, addr, nil, 2, "give at least one setting", "collections", "set", id)
	got = ok(t, addr, "collections", "set", id, "--priority", "low", "--compaction-window", "Mon-Fri 01:00-05:00 Europe/Berlin",
		"--compaction-window", "Sat,Sun 00:00-24:00", "--objective-max-age", "10m", "--objective-max-backlog", "50000",
		"--throughput-share", "0.25").stdout
	for _, want := range []string{"Priority:", "low", "Mon-Fri 01:00-05:00 Europe/Berlin; Sat,Sun 00:00-24:00",
		"oldest record at most 10m0s, at most 50000 records", "1 records", "25 % of the throughput cap"} {
		if !strings.Contains(got, want) {
			t.Errorf("collections set with a policy printed no %q (the thresholds must stay):\n%s", want, got)
		}
	}
	if plan := ok(t, addr, "plan", "--all").stdout; !strings.Contains(plan, "PRIORITY") || !strings.Contains(plan, "low") || !strings.Contains(plan, "NEXT WINDOW") {
		t.Errorf("plan shows no priority or window:\n%s", plan)
	}
	got = ok(t, addr, "collections", "set", id, "--no-compaction-windows").stdout
	if !strings.Contains(got, "the server's") || !strings.Contains(got, "low") {
		t.Errorf("after --no-compaction-windows:\n%s", got)
	}
	fails(t, addr, nil, 2, `unknown day "Fry"`, "collections", "set", id, "--compaction-window", "Mon-Fry 01:00-05:00")
	fails(t, addr, nil, 2, "--priority must be critical, normal or low", "collections", "set", id, "--priority", "urgent")
	if out := ok(t, addr, "throttle", "64MiB", "--operator", "ops").stdout; !strings.Contains(out, "64 MiB/s") {
		t.Errorf("throttle 64MiB printed:\n%s", out)
	}
	if out := ok(t, addr, "throttle").stdout; !strings.Contains(out, "by ops") {
		t.Errorf("throttle printed:\n%s", out)
	}
	if out := ok(t, addr, "throttle", "0").stdout; !strings.Contains(out, "no cap") {
		t.Errorf("throttle 0 printed:\n%s", out)
	}
	fails(t, addr, nil, 2, "not a size", "throttle", "fast")
	fails(t, addr, nil, 1, "not_found", "pause", "7dd93902-5eef-4ebd-a5de-8a1fb554d030")
}

func TestPlanEstimatePricesJobsAndAJobShowsPredictedAndActual(t *testing.T) {
	t.Parallel()
	addr := startServer(t, nil)
	id := createCollection(t, addr, "priced", "--dimension", "3")
	var lines strings.Builder
	for i := range 50 {
		fmt.Fprintf(&lines, `{"id":"r%02d","embedding":[1,2,%d]}`+"\n", i, i)
	}
	if r := cli(t, addr, strings.NewReader(lines.String()), "push", "--collection", id, "-"); r.err != nil {
		t.Fatalf("push: %v\n%s", r.err, r.stderr)
	}
	plan := ok(t, addr, "plan", "--estimate").stdout
	for _, want := range []string{"READ", "WRITE", "GETS", "PUTS", "W-AMP", "INDEX", "DURATION", "WINDOW", "+50/-0 full build (the current version has no index)", "now",
		"total: 1 jobs, 50 records"} {
		if !strings.Contains(plan, want) {
			t.Errorf("plan --estimate lacks %q:\n%s", want, plan)
		}
	}
	ok(t, addr, "compact", id, "--wait")
	jobs := ok(t, addr, "jobs", "--collection", id, "-o", "json").stdout
	var listed []struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(jobs), &listed); err != nil || len(listed) == 0 {
		t.Fatalf("jobs -o json: %v\n%s", err, jobs)
	}
	job := ok(t, addr, "job", listed[0].ID).stdout
	for _, want := range []string{"Predicted:", "50 records", "Actual:", "PUTs", "Prediction basis:", "Failure class:"} {
		if !strings.Contains(job, want) {
			t.Errorf("job lacks %q:\n%s", want, job)
		}
	}
	if out := ok(t, addr, "collections", "undead", id, "--reason", "test").stdout + ok(t, addr, "collections", "undead", id).stderr; !strings.Contains(out, "is not dead-lettered: nothing to clear") {
		t.Errorf("undead of a healthy collection printed:\n%s", out)
	}
	fails(t, addr, nil, 1, "no collection", "collections", "undead", "missing-collection")
}

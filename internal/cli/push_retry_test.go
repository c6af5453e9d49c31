package cli

import (
	"context"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/compactorhq/compactor/gen/compactor/v1/compactorv1connect"
	"github.com/compactorhq/compactor/internal/server"
)

// loseAnswers passes requests to next but, for the PushLogs calls whose
// numbers (1-based) are in lose, lets the handler run to the end (the
// append commits) and answers 503 instead of its response, as a proxy does
// when the server goes away before it answers.
type loseAnswers struct {
	next http.Handler
	lose map[int]bool

	mu    sync.Mutex
	calls int
}

func (l *loseAnswers) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != compactorv1connect.LogServicePushLogsProcedure {
		l.next.ServeHTTP(w, r)
		return
	}
	l.mu.Lock()
	l.calls++
	n := l.calls
	l.mu.Unlock()
	rec := httptest.NewRecorder()
	l.next.ServeHTTP(rec, r)
	if l.lose[n] {
		http.Error(w, "upstream went away", http.StatusServiceUnavailable)
		return
	}
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}

// TestPushRetriesALostAnswerAndLandsOnce pushes through a proxy that loses
// the answers of the first and third PushLogs calls after the server
// appended them: the CLI retries each with the batch's key, the server
// answers from the key, and every record is in the log once.
func TestPushRetriesALostAnswerAndLandsOnce(t *testing.T) {
	t.Parallel()
	cfg := server.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Manager.Interval = time.Hour
	cfg.CatalogReserveBytes = 0
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	app, err := server.Open(ctx, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = app.Close() })
	coll, err := app.Catalog.CreateCollection(ctx, "retried", 1)
	if err != nil {
		t.Fatal(err)
	}
	lossy := &loseAnswers{next: app.Handler(), lose: map[int]bool{1: true, 3: true}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := server.NewHTTPServer(lossy, slog.New(slog.DiscardHandler))
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	file := jsonl(t, `{"id":"a","embedding":[1]}`, `{"id":"b","embedding":[2]}`, `{"id":"c","embedding":[3]}`, `{"id":"d","embedding":[4]}`, `{"id":"e","embedding":[5]}`)
	r := cli(t, "http://"+ln.Addr().String(), nil, "-o", "json", "push", "--collection", coll.ID, "--batch", "2", "--retry-wait", "1ms", file)
	if r.err != nil {
		t.Fatalf("push: %v\n%s", r.err, r.stderr)
	}
	p := decode[struct {
		Records         int64 `json:"records"`
		Batches         int   `json:"batches"`
		FirstOffset     int64 `json:"first_offset"`
		LastOffset      int64 `json:"last_offset"`
		Retries         int   `json:"retries"`
		ReplayedBatches int   `json:"replayed_batches"`
	}](t, r.stdout)
	if p.Records != 5 || p.Batches != 3 || p.Retries != 2 || p.ReplayedBatches != 2 || p.FirstOffset != 1 || p.LastOffset != 5 {
		t.Fatalf("push = %+v, want 5 records at offsets 1..5 in 3 batches, 2 of them retried and replayed", p)
	}
	if !strings.Contains(r.stderr, "unavailable") || !strings.Contains(r.stderr, "not appended again") {
		t.Fatalf("stderr does not tell about the lost answers:\n%s", r.stderr)
	}
	ops, err := app.Catalog.ReadLog(ctx, coll.ID, 0, math.MaxInt64, 0)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, op := range ops {
		ids = append(ids, op.ID)
	}
	if strings.Join(ids, ",") != "a,b,c,d,e" {
		t.Fatalf("log holds %v, want a..e once each", ids)
	}
}

package server_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/structpb"

	compactorv1 "github.com/compactorhq/compactor/gen/compactor/v1"
	"github.com/compactorhq/compactor/gen/compactor/v1/compactorv1connect"
	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/server"
)

// BenchmarkCompactAll measures the throughput of `compact --all` over many
// small collections against that of one collection holding as many
// operation records: N collections of 1,000 operation records each
// (COMPACTOR_BENCH_ALL_N, default 1,000; the goal's size is 10,000) and one
// collection of N × 1,000, each on its own server with the defaults
// (SQLite, file blobs, default workers; --max-backlog raised to hold the
// one collection's records), created --no-index as
// scripts/bench.sh's collections are. Each collection's records follow
// scripts/bench/gen's mix over its own ids (70 % ADDs of new ids, 20 %
// UPDATEs and 10 % DELETEs of live ones; 128 dimensions, a document,
// metadata), seeded per collection, and are pushed untimed; then one
// Compact (all, or the one collection) is timed from the request until no
// compaction is queued or running (polled every 20 ms). It reports
// records/s of each (operation records compacted per second of wall time)
// and all/one, their ratio (the goal: ≥ 0.8). Minutes long at the goal's
// size (10,000,000 records pushed twice); not run in CI.
//
//	COMPACTOR_BENCH_ALL_N=10000 go test -run '^$' -bench CompactAll -benchtime 1x -timeout 2h ./internal/server/
func BenchmarkCompactAll(b *testing.B) {
	n := 1_000
	if s := os.Getenv("COMPACTOR_BENCH_ALL_N"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			b.Fatalf("COMPACTOR_BENCH_ALL_N=%q: want a positive number of collections", s)
		}
		n = v
	}
	const perCollection = 1_000
	var all, one time.Duration
	for b.Loop() {
		one = compactAllOnce(b, n, perCollection, true)
		b.Logf("one collection of %d records: compacted in %s", n*perCollection, one.Round(time.Millisecond))
		all = compactAllOnce(b, n, perCollection, false)
		b.Logf("%d collections of %d records: compacted in %s", n, perCollection, all.Round(time.Millisecond))
	}
	records := float64(n * perCollection)
	b.ReportMetric(records/all.Seconds(), "all-records/s")
	b.ReportMetric(records/one.Seconds(), "one-records/s")
	b.ReportMetric(one.Seconds()/all.Seconds(), "all/one")
}

// compactAllOnce starts a server, pushes n × per operation records into n
// collections (or into one collection, single), compacts them with one
// Compact and returns the time until no compaction is queued or running.
func compactAllOnce(b *testing.B, n, per int, single bool) time.Duration {
	b.StopTimer()
	defer b.StartTimer()
	// The one collection holds the whole backlog at once (--max-backlog).
	r := startApp(b, func(c *server.Config) { c.MaxBacklog = max(c.MaxBacklog, int64(n*per)) })
	defer r.stop()
	ctx := b.Context()
	colls := compactorv1connect.NewCollectionServiceClient(r.hc, r.base)
	logs := compactorv1connect.NewLogServiceClient(r.hc, r.base)
	jobs := compactorv1connect.NewCompactionServiceClient(r.hc, r.base)
	ncoll := n
	if single {
		ncoll = 1
	}
	ids := make([]string, ncoll)
	for i := range ids {
		created, err := colls.CreateCollection(ctx, connect.NewRequest(&compactorv1.CreateCollectionRequest{
			Name: fmt.Sprintf("all-%06d", i), Dimension: 128, Index: &compactorv1.IndexSettings{Disabled: true}}))
		if err != nil {
			b.Fatalf("create collection %d: %v", i, err)
		}
		ids[i] = created.Msg.GetCollection().GetId()
	}
	// Batch k of per records goes to collection k from 4 clients at once,
	// or, into the one collection, from one client in order.
	push := func(k int, target string) error {
		_, err := logs.PushLogs(ctx, connect.NewRequest(&compactorv1.PushLogsRequest{CollectionId: target, Records: allBatch(k, per)}))
		if err != nil {
			return fmt.Errorf("push batch %d: %w", k, err)
		}
		return nil
	}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for w := range 4 {
		wg.Go(func() {
			for k := w; k < n; k += 4 {
				if single {
					break
				}
				if err := push(k, ids[k]); err != nil {
					errs <- err
					return
				}
			}
			for k := 0; single && w == 0 && k < n; k++ {
				if err := push(k, ids[0]); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	req := &compactorv1.CompactRequest{All: true}
	if single {
		req = &compactorv1.CompactRequest{CollectionIds: ids}
	}
	b.StartTimer()
	start := time.Now()
	if _, err := jobs.Compact(ctx, connect.NewRequest(req)); err != nil {
		b.Fatalf("Compact: %v", err)
	}
	active := catalog.JobFilter{States: []catalog.JobState{catalog.JobQueued, catalog.JobRunning}, Limit: 1}
	for {
		js, err := r.app.Catalog.ListJobs(ctx, active)
		if err != nil {
			b.Fatal(err)
		}
		if len(js) == 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	took := time.Since(start)
	b.StopTimer()
	failed, err := r.app.Catalog.ListJobs(ctx, catalog.JobFilter{States: []catalog.JobState{catalog.JobFailed, catalog.JobCancelled}, Limit: 1})
	if err != nil || len(failed) > 0 {
		b.Fatalf("jobs that did not succeed: %v %v", failed, err)
	}
	return took
}

// allBatch is batch k's per operation records: scripts/bench/gen's mix
// over the batch's own ids, seeded by k.
func allBatch(k, per int) []*compactorv1.OperationRecord {
	rng := rand.New(rand.NewPCG(uint64(k), 1))
	out := make([]*compactorv1.OperationRecord, 0, per)
	var live []string
	next := 0
	for range per {
		p := rng.IntN(100)
		switch {
		case p < 70 || len(live) == 0:
			id := fmt.Sprintf("b%06d-%06d", k, next)
			next++
			live = append(live, id)
			doc := "document " + id
			meta, _ := structpb.NewStruct(map[string]any{"section": "s" + strconv.Itoa(rng.IntN(10)), "n": float64(next)})
			out = append(out, &compactorv1.OperationRecord{Op: compactorv1.Operation_OPERATION_ADD, Id: id, Embedding: allEmbedding(rng), Document: &doc, Metadata: meta})
		case p < 90:
			id := live[rng.IntN(len(live))]
			meta, _ := structpb.NewStruct(map[string]any{"rev": float64(rng.IntN(1000))})
			out = append(out, &compactorv1.OperationRecord{Op: compactorv1.Operation_OPERATION_UPDATE, Id: id, Embedding: allEmbedding(rng), Metadata: meta})
		default:
			i := rng.IntN(len(live))
			out = append(out, &compactorv1.OperationRecord{Op: compactorv1.Operation_OPERATION_DELETE, Id: live[i]})
			live = append(live[:i], live[i+1:]...)
		}
	}
	return out
}

// allEmbedding is 128 floats uniform in [-1, 1], rounded to 3 decimals as
// scripts/bench/gen's are.
func allEmbedding(rng *rand.Rand) []float32 {
	e := make([]float32, 128)
	for i := range e {
		e[i] = float32(rng.IntN(2001)-1000) / 1000
	}
	return e
}

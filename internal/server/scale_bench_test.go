package server_test

import (
	"fmt"
	"net/http"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	compactorv1 "github.com/compactorhq/compactor/gen/compactor/v1"
	"github.com/compactorhq/compactor/gen/compactor/v1/compactorv1connect"
)

// BenchmarkScale measures what an operator touches on every refresh, on a
// catalog of 1,000 and of 10,000 collections (SQLite, as `compactor serve`
// by default), each holding one uncompacted record, under the default
// thresholds (10 records, 5 minutes: every collection is decided and priced
// with a reason, none is due): a scheduler tick (the plan over every
// collection, the backlog and freshness gauges, the windows of queued
// jobs; nothing to enqueue), PlanCompactions without estimates, the first page of ListCollections (the API's default page),
// and the status page's HTML. Compare the two sizes: a cost that grows more
// than tenfold from 1,000 to 10,000 is super-linear. Besides the mean
// (ns/op) each reports the 99th percentile of its operations' wall times
// by nearest rank (p99-ns: the slowest one under 100 operations) and the
// process's CPU per operation (cpu-ns/op).
//
//	go test -run '^$' -bench Scale -benchtime 20x ./internal/server/
func BenchmarkScale(b *testing.B) {
	for _, n := range []int{1_000, 10_000} {
		b.Run(fmt.Sprintf("collections=%d", n), func(b *testing.B) {
			r := startApp(b, nil)
			seed(b, r, n)
			ctx := b.Context()
			control := compactorv1connect.NewControlServiceClient(r.hc, r.base)
			colls := compactorv1connect.NewCollectionServiceClient(r.hc, r.base)
			b.Run("scheduler-tick", func(b *testing.B) {
				loopTimed(b, func() {
					if err := r.app.Manager.Schedule(ctx); err != nil {
						b.Fatal(err)
					}
				})
			})
			b.Run("PlanCompactions", func(b *testing.B) {
				loopTimed(b, func() {
					res, err := control.PlanCompactions(ctx, connect.NewRequest(&compactorv1.PlanCompactionsRequest{}))
					if err != nil {
						b.Fatal(err)
					}
					if len(res.Msg.GetEntries()) == 0 {
						b.Fatal("PlanCompactions returned no entries")
					}
				})
			})
			b.Run("ListCollections", func(b *testing.B) {
				loopTimed(b, func() {
					res, err := colls.ListCollections(ctx, connect.NewRequest(&compactorv1.ListCollectionsRequest{}))
					if err != nil {
						b.Fatal(err)
					}
					if len(res.Msg.GetCollections()) == 0 {
						b.Fatal("ListCollections returned no collections")
					}
				})
			})
			b.Run("status-page", func(b *testing.B) {
				loopTimed(b, func() {
					if code, _, body := r.get(b, r.base+"/"); code != http.StatusOK || len(body) == 0 {
						b.Fatalf("GET / = %d (%d bytes)", code, len(body))
					}
				})
			})
		})
	}
}

// seed creates n collections with one record each, from 8 clients at once.
func seed(b *testing.B, r *running, n int) {
	b.Helper()
	colls := compactorv1connect.NewCollectionServiceClient(r.hc, r.base)
	logs := compactorv1connect.NewLogServiceClient(r.hc, r.base)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < n; i += 8 {
				created, err := colls.CreateCollection(b.Context(), connect.NewRequest(&compactorv1.CreateCollectionRequest{Name: fmt.Sprintf("scale-%06d", i), Dimension: 2}))
				if err != nil {
					errs <- fmt.Errorf("create collection %d: %w", i, err)
					return
				}
				_, err = logs.PushLogs(b.Context(), connect.NewRequest(&compactorv1.PushLogsRequest{
					CollectionId: created.Msg.GetCollection().GetId(),
					Records:      []*compactorv1.OperationRecord{{Op: compactorv1.Operation_OPERATION_ADD, Id: "r", Embedding: []float32{1, 2}}},
				}))
				if err != nil {
					errs <- fmt.Errorf("push to collection %d: %w", i, err)
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
}

// loopTimed runs op as b's operation, reporting the process's CPU per
// operation (cpuPerOp) and the 99th percentile by nearest rank of the
// operations' wall times as p99-ns.
func loopTimed(b *testing.B, op func()) {
	defer cpuPerOp(b)()
	var times []time.Duration
	for b.Loop() {
		start := time.Now()
		op()
		times = append(times, time.Since(start))
	}
	if len(times) > 0 {
		slices.Sort(times)
		rank := (99*len(times) + 99) / 100 // ceil(0.99 n), 1-based
		b.ReportMetric(float64(times[rank-1].Nanoseconds()), "p99-ns")
	}
}

// cpuPerOp reports the process's CPU time (user and system, every
// goroutine: the server's and the client's) per operation as cpu-ns/op,
// which a loaded machine stretches far less than the wall time. Call it
// first and defer the function it returns.
func cpuPerOp(b *testing.B) func() {
	start := processCPU()
	return func() {
		if b.N > 0 {
			b.ReportMetric(float64((processCPU()-start).Nanoseconds())/float64(b.N), "cpu-ns/op")
		}
	}
}

// processCPU is the user and system time the process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

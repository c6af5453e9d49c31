package compaction

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/materialize"
	"github.com/compactorhq/compactor/internal/vindex"
	"github.com/compactorhq/compactor/internal/where"
)

// BenchmarkIndexMemory measures the memory of the index builds of one
// collection: a full compaction with indexing of COMPACTOR_BENCH_VMEM_N
// ADDs (128-dim uniform vectors, l2, M 16, ef_construction
// COMPACTOR_BENCH_VMEM_EF, default 200; the memory does not depend on it,
// the time does), then one of COMPACTOR_BENCH_VMEM_UPSERTS (default 1 %)
// UPDATEs of random ids (incremental). For
// each it reports the peak Go heap in use (sampled every 10 ms), the peak
// RSS (VmHWM, reset before the compaction), the live heap after a
// collection at the end, and the vector chunks mapped outside the heap
// (vindex.MappedBytes). COMPACTOR_BENCH_VMEM_PROFILE names a directory for
// heap profiles (PHASE-peak.pb.gz at the highest heap sample,
// PHASE-end.pb.gz after). Skipped unless COMPACTOR_BENCH_VMEM_N is set;
// run it with -benchtime 1x (a 200,000-vector full build at ef 200 takes
// about a minute on 2 cores).
func BenchmarkIndexMemory(b *testing.B) {
	n, _ := strconv.Atoi(os.Getenv("COMPACTOR_BENCH_VMEM_N"))
	if n <= 0 {
		b.Skip("COMPACTOR_BENCH_VMEM_N is not set")
	}
	ef := 200
	if v, err := strconv.Atoi(os.Getenv("COMPACTOR_BENCH_VMEM_EF")); err == nil && v > 0 {
		ef = v
	}
	ups := n / 100
	if v, err := strconv.Atoi(os.Getenv("COMPACTOR_BENCH_VMEM_UPSERTS")); err == nil && v > 0 {
		ups = v
	}
	profiles := os.Getenv("COMPACTOR_BENCH_VMEM_PROFILE")
	const dim = 128
	for b.Loop() {
		b.StopTimer()
		e := newFileEnv(b, 2*n)
		c, err := e.cat.CreateCollectionSpec(e.ctx, catalog.CollectionSpec{Name: "vmem", Dimension: dim,
			Index: catalog.IndexSettings{Distance: vindex.DistanceL2, M: 16, EfConstruction: ef}})
		if err != nil {
			b.Fatal(err)
		}
		e.id = c.ID
		r := rand.New(rand.NewPCG(7, 8))
		for i := 0; i < n; i += 5000 {
			ops := benchOps(r, min(5000, n-i), dim, 1, i)
			if _, _, err := e.cat.AppendLog(e.ctx, e.id, ops, catalog.AppendLimits{}); err != nil {
				b.Fatal(err)
			}
		}
		phase := func(name string) {
			runtime.GC()
			resetPeakRSS()
			stop := sampleHeap(filepath.Join(profiles, name+"-peak.pb.gz"), profiles != "")
			start := time.Now()
			res, err := e.comp.Compact(context.Background(), e.id, Options{})
			if err != nil {
				b.Fatal(err)
			}
			took := time.Since(start)
			peak := stop()
			rss := readPeakRSS()
			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			if profiles != "" {
				writeHeapProfile(b, filepath.Join(profiles, name+"-end.pb.gz"))
			}
			b.ReportMetric(float64(peak)/(1<<20), name+"-peak-heap-MiB")
			b.ReportMetric(float64(rss)/(1<<20), name+"-peak-RSS-MiB")
			b.ReportMetric(float64(ms.HeapAlloc)/(1<<20), name+"-live-heap-MiB")
			b.ReportMetric(float64(vindex.MappedBytes())/(1<<20), name+"-mapped-MiB")
			b.Logf("%s: %s build, %d vectors indexed, %.1f s (index %.1f s); peak heap %d MiB, peak RSS %d MiB, live heap %d MiB, mapped %d MiB",
				name, res.IndexBuild, res.VectorsIndexed, took.Seconds(), res.IndexSeconds, peak>>20, rss>>20, ms.HeapAlloc>>20, vindex.MappedBytes()>>20)
		}
		phase("full")
		if os.Getenv("COMPACTOR_BENCH_VMEM_QUERIES") != "" {
			// As the server benchmark does between its compactions: plain
			// queries, then filtered ones (which load the version's
			// metadata into the cached index entry).
			qs := benchOps(r, 20, dim, 1, 0)
			for _, sel := range []float64{0, 0.01, 0.1, 0.5} {
				q := Query{K: 10}
				if sel > 0 {
					f, err := where.Parse(fmt.Appendf(nil, `{"n": {"$lt": %d}}`, int(sel*float64(n))))
					if err != nil {
						b.Fatal(err)
					}
					q.Where = f
				}
				for _, op := range qs[:5] {
					q.Embeddings = [][]float32{op.Embedding}
					if _, err := e.comp.QueryRecords(e.ctx, e.id, q); err != nil {
						b.Fatal(err)
					}
				}
			}
			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			b.Logf("after the queries: live heap %d MiB, RSS %d MiB", ms.HeapAlloc>>20, readPeakRSS()>>20)
		}
		updates := benchOps(r, ups, dim, 1, 0)
		for i := range updates {
			updates[i].Op, updates[i].ID = materialize.OpUpdate, fmt.Sprintf("id-%09d", r.IntN(n))
			updates[i].Document, updates[i].Metadata = nil, nil
		}
		if _, _, err := e.cat.AppendLog(e.ctx, e.id, updates, catalog.AppendLimits{}); err != nil {
			b.Fatal(err)
		}
		phase("incremental")
		b.StartTimer()
	}
}

// sampleHeap samples the heap's live and unswept objects every 10 ms
// until the returned stop is called, which returns the largest sample;
// with profile set, it writes a heap profile to path whenever a sample
// is 5 % above the last one profiled.
func sampleHeap(path string, profile bool) (stop func() uint64) {
	var peak atomic.Uint64
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		var profiled uint64
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(s)
			v := s[0].Value.Uint64()
			peak.Store(max(peak.Load(), v))
			if profile && v > profiled+profiled/20 {
				profiled = v
				if f, err := os.Create(path); err == nil {
					_ = pprof.Lookup("heap").WriteTo(f, 0)
					f.Close()
				}
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() uint64 { close(done); <-finished; return peak.Load() }
}

func writeHeapProfile(b *testing.B, path string) {
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		b.Fatal(err)
	}
}

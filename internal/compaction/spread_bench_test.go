package compaction

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/pprof"
	"runtime/trace"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/clock"
	"github.com/compactorhq/compactor/internal/segment"
)

// spreadFile is the collection BenchmarkCompactSpreadUpdatesFile updates:
// built once per process (its setup, a push and a full compaction of
// hundreds of thousands of records, takes minutes on a loaded machine),
// in a temp dir of its own that outlives each call of the benchmark
// function (os.TempDir, prefix compactor-spread-bench-; hundreds of MB),
// removed by TestMain when the benchmarks end.
var spreadFile struct {
	once  sync.Once
	dir   string
	e     *env
	n     int
	full  time.Duration // the full compaction's wall time
	fullC time.Duration // and its CPU time
	round int
	err   error
}

// BenchmarkCompactSpreadUpdatesFile: one compaction of 1,000 UPDATEs
// (a new 128-dim embedding and one metadata key) of ids spread evenly over
// a collection without a vector index, as scripts/bench.sh measures it:
// a SQLite catalog file and a file:// blob store in a temp dir (fsyncs
// included), the default compaction and block flags. The collection holds
// COMPACTOR_BENCH_SPREAD_N records (default 300,000; scripts/bench.sh's
// 1,000,000 op records end as about 600,000), ADDed and fully compacted
// once per process. Iterations go on from one another: the first writes a
// delta over a base without deltas (what scripts/bench.sh times), the later
// ones add deltas, every MaxDeltas-th folds them. Reported: cpu-s/op (the
// process's user + system CPU over the timed compactions, the log purge
// they start included), full-s and full-cpu-s (the setup's full
// compaction), delta/full (ns/op over full-s: the goal's ratio, ≤ 0.05).
// COMPACTOR_BENCH_SPREAD_CPUPROFILE and COMPACTOR_BENCH_SPREAD_TRACE name
// files for a CPU profile and an execution trace of the timed loop alone
// (go test's -cpuprofile and -trace would hold the setup, minutes long).
func BenchmarkCompactSpreadUpdatesFile(b *testing.B) {
	n := 300_000
	if s := os.Getenv("COMPACTOR_BENCH_SPREAD_N"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1000 {
			b.Fatalf("COMPACTOR_BENCH_SPREAD_N=%q: want an integer of at least 1000", s)
		}
		n = v
	}
	sf := &spreadFile
	sf.once.Do(func() { sf.e, sf.full, sf.fullC, sf.err = newSpreadFileEnv(b, n); sf.n = n })
	if sf.err != nil {
		b.Fatal(sf.err)
	}
	e := sf.e
	e.t = b
	const inc, dim = 1_000, 128
	r := rand.New(rand.NewPCG(7, 8))
	stop := profileTimed(b)
	defer stop()
	var cpu time.Duration
	for b.Loop() {
		b.StopTimer()
		sf.round++
		// The previous compaction's log purge ends first, as in
		// scripts/bench.sh, where the push takes longer than it.
		e.comp.WaitPurges()
		if _, _, err := e.cat.AppendLog(e.ctx, e.id, spreadUpdates(r, sf.n, inc, dim, sf.round), catalog.AppendLimits{}); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		c0 := cpuNow()
		if _, err := e.comp.Compact(e.ctx, e.id, Options{}); err != nil {
			b.Fatal(err)
		}
		cpu += cpuNow() - c0
	}
	b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
	b.ReportMetric(sf.full.Seconds(), "full-s")
	b.ReportMetric(sf.fullC.Seconds(), "full-cpu-s")
	b.ReportMetric(float64(b.Elapsed())/float64(b.N)/float64(sf.full), "delta/full")
}

// newSpreadFileEnv builds BenchmarkCompactSpreadUpdatesFile's collection:
// n ADDs (benchOps, ids id-<10*i>) pushed and compacted in one job. The
// env's catalog, store and compactor are not closed (they live as long as
// the process).
func newSpreadFileEnv(b *testing.B, n int) (*env, time.Duration, time.Duration, error) {
	dir, err := os.MkdirTemp("", "compactor-spread-bench-")
	if err != nil {
		return nil, 0, 0, err
	}
	spreadFile.dir = dir
	ctx := context.Background()
	e := &env{t: b, ctx: ctx, model: model{}}
	e.clock = clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	if e.cat, err = catalog.Open(ctx, catalog.Config{DSN: filepath.Join(dir, "catalog.db"), Now: e.clock.Now, Exclusive: true, Holder: "bench"}); err != nil {
		return nil, 0, 0, err
	}
	blobs, _, err := segment.OpenBucket(ctx, "file://"+filepath.Join(dir, "blobs"))
	if err != nil {
		return nil, 0, 0, err
	}
	e.seg = segment.NewStore(blobs, segment.DefaultConfig(), e.clock.Now)
	cfg := DefaultConfig()
	cfg.MaxRecords = max(cfg.MaxRecords, n)
	if e.comp, err = New(e.cat, e.seg, cfg, nil); err != nil {
		return nil, 0, 0, err
	}
	c, err := e.cat.CreateCollectionSpec(ctx, catalog.CollectionSpec{Name: "spread", Dimension: 128, Index: catalog.IndexSettings{Disabled: true}})
	if err != nil {
		return nil, 0, 0, err
	}
	e.id = c.ID
	r := rand.New(rand.NewPCG(5, 6))
	for i := 0; i < n; i += 5000 {
		ops := benchOps(r, min(5000, n-i), 128, 10, 10*i) // ids id-<10*k>, k < n
		if _, _, err := e.cat.AppendLog(ctx, e.id, ops, catalog.AppendLimits{}); err != nil {
			return nil, 0, 0, err
		}
	}
	start, c0 := time.Now(), cpuNow()
	if _, err := e.comp.Compact(ctx, e.id, Options{}); err != nil {
		return nil, 0, 0, err
	}
	full, fullC := time.Since(start), cpuNow()-c0
	e.comp.WaitPurges()
	return e, full, fullC, nil
}

// TestMain runs the package's tests and benchmarks, then removes
// BenchmarkCompactSpreadUpdatesFile's directory.
func TestMain(m *testing.M) {
	code := m.Run()
	if spreadFile.dir != "" {
		if spreadFile.e != nil {
			spreadFile.e.comp.WaitPurges()
			_ = spreadFile.e.cat.Close()
		}
		if err := os.RemoveAll(spreadFile.dir); err != nil {
			fmt.Fprintf(os.Stderr, "remove %s: %v\n", spreadFile.dir, err)
		}
	}
	os.Exit(code)
}

// profileTimed starts the CPU profile and the execution trace that
// COMPACTOR_BENCH_SPREAD_CPUPROFILE and COMPACTOR_BENCH_SPREAD_TRACE ask
// for (files, truncated); stop ends both.
func profileTimed(b *testing.B) (stop func()) {
	var ends []func()
	for _, p := range []struct {
		env   string
		start func(io.Writer) error
		stop  func()
	}{
		{"COMPACTOR_BENCH_SPREAD_CPUPROFILE", pprof.StartCPUProfile, pprof.StopCPUProfile},
		{"COMPACTOR_BENCH_SPREAD_TRACE", trace.Start, trace.Stop},
	} {
		path := os.Getenv(p.env)
		if path == "" {
			continue
		}
		f, err := os.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		if err := p.start(f); err != nil {
			b.Fatal(err)
		}
		ends = append(ends, func() { p.stop(); f.Close() })
	}
	return func() {
		for _, end := range ends {
			end()
		}
	}
}

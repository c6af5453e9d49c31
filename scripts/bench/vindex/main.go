// Command vindex is the product's side of scripts/bench/vindex.sh: it
// builds internal/vindex's graph over a vector set of scripts/bench/vecgen
// and measures what hnswlib_bench.py measures of hnswlib, with the ground
// truth that script wrote (run it first):
//
//	go run ./scripts/bench/vindex -dir DIR -kind mixture -m 16 -efc 200 -threads 2
//
// It prints one JSON object: the build's wall and CPU seconds on -threads
// goroutines; per ef, recall@K (a result counts when its exact distance,
// recomputed in float64, is at most the K-th exact distance) and the
// single-goroutine queries per second (wall and CPU); filtered searches at
// 1 %, 10 % and 50 % selectivity (recall against an exact filtered scan,
// mean latency, with the plan ScanCheaper picks and with the graph alone);
// the incremental cost: a Successor with -upserts updates (record
// j·(n/upserts) takes the vector of record (that + n/2) mod n, the rule of
// hnswlib_bench.py) against the full build, then its Encode (bytes of the
// graph blob and of the new chunk) and Decode; and the peak RSS (VmHWM).
// Every figure carries the 1-minute load average it ran under.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/compactorhq/compactor/internal/vindex"
	"github.com/compactorhq/compactor/scripts/bench/vecset"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "vindex bench:", err)
		os.Exit(1)
	}
}

type searchFig struct {
	Ef     int     `json:"ef"`
	Recall float64 `json:"recall"`
	QPS    float64 `json:"qps"`
	CPUQPS float64 `json:"cpu_qps"`
	Load   float64 `json:"load"`
}

type filterFig struct {
	Selectivity  float64 `json:"selectivity"`
	Allowed      int     `json:"allowed"`
	Plan         string  `json:"plan"`
	Recall       float64 `json:"recall"`
	LatencyMs    float64 `json:"latency_ms"`
	GraphRecall  float64 `json:"graph_recall"`
	GraphLatency float64 `json:"graph_latency_ms"`
}

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("vindex", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", "", "directory of the vector set and ground truth (required)")
	kind := fs.String("kind", "mixture", "vector set (mixture, uniform, debian)")
	m := fs.Int("m", vindex.DefaultM, "M")
	efc := fs.Int("efc", vindex.DefaultEfConstruction, "ef_construction")
	threads := fs.Int("threads", 2, "build goroutines")
	efs := fs.String("efs", "10,20,40,60,100,200", "ef values to search with")
	k := fs.Int("k", 10, "results per query")
	upserts := fs.Int("upserts", 10000, "updates of the incremental step (0: none)")
	filterQueries := fs.Int("filter-queries", 100, "queries of the filtered searches (0: none)")
	seed := fs.Uint64("seed", 1, "seed of the graph's level generator")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" {
		return fmt.Errorf("-dir is required")
	}
	md, err := vecset.ReadMeta(*dir, *kind)
	if err != nil {
		return err
	}
	dist, err := vindex.ParseDistance(md.Distance)
	if err != nil {
		return err
	}
	base, err := vecset.ReadF32(vecset.BasePath(*dir, *kind), md.Dim)
	if err != nil {
		return err
	}
	queries, err := vecset.ReadF32(vecset.QueryPath(*dir, *kind), md.Dim)
	if err != nil {
		return err
	}
	gtFlat, err := vecset.ReadF32(filepath.Join(*dir, *kind+".gt.f32"), *k)
	if err != nil {
		return fmt.Errorf("ground truth (run hnswlib_bench.py first): %w", err)
	}
	if len(gtFlat) != len(queries) {
		return fmt.Errorf("ground truth has %d rows for %d queries (k %d)", len(gtFlat), len(queries), *k)
	}
	n := len(base)
	ids := make([]string, n)
	for i := range ids {
		ids[i] = strconv.Itoa(i)
	}
	out := map[string]any{
		"side": "vindex", "kind": *kind, "n": n, "queries": len(queries), "dim": md.Dim, "distance": md.Distance,
		"m": *m, "ef_construction": *efc, "threads": *threads, "seed": *seed,
	}
	p := vindex.Params{Dim: md.Dim, Distance: dist, M: *m, EfConstruction: *efc, Seed: *seed}
	g, err := vindex.New(p)
	if err != nil {
		return err
	}
	out["build_load"] = load()
	c0, t0 := cpu(), time.Now()
	if err := g.InsertBatch(ids, base, *threads); err != nil {
		return err
	}
	build := time.Since(t0).Seconds()
	out["build_s"], out["build_cpu_s"] = build, cpu()-c0

	exact := func(q []float32, id string) float64 {
		i, _ := strconv.Atoi(id)
		return exactDistance(dist, q, base[i])
	}
	recallOf := func(qs [][]float32, got [][]vindex.Hit, bound func(i int) float64, want func(i int) int) float64 {
		right, total := 0, 0
		for i, hits := range got {
			b := bound(i)
			for _, h := range hits {
				if exact(qs[i], h.ID) <= b+1e-6*math.Max(1, math.Abs(b)) {
					right++
				}
			}
			total += want(i)
		}
		if total == 0 {
			return 1
		}
		return float64(right) / float64(total)
	}
	var figs []searchFig
	for _, s := range strings.Split(*efs, ",") {
		ef, err := strconv.Atoi(s)
		if err != nil {
			return fmt.Errorf("-efs: %w", err)
		}
		got := make([][]vindex.Hit, len(queries))
		l := load()
		c0, t0 := cpu(), time.Now()
		for i, q := range queries {
			if got[i], err = g.Search(q, *k, ef, nil); err != nil {
				return err
			}
		}
		el, c := time.Since(t0).Seconds(), cpu()-c0
		r := recallOf(queries, got, func(i int) float64 { return float64(gtFlat[i][*k-1]) }, func(int) int { return *k })
		figs = append(figs, searchFig{Ef: ef, Recall: r, QPS: float64(len(queries)) / el, CPUQPS: float64(len(queries)) / math.Max(c, 1e-9), Load: l})
	}
	out["search"] = figs

	if *filterQueries > 0 {
		qs := queries[:min(*filterQueries, len(queries))]
		var ffigs []filterFig
		for _, sel := range []float64{0.01, 0.10, 0.50} {
			// A record is allowed when a hash of its index falls under sel.
			allowed := make([]bool, n)
			var allowedIDs []string
			for i := range n {
				if float64(mix(uint64(i))%1_000_000) < sel*1_000_000 {
					allowed[i] = true
					allowedIDs = append(allowedIDs, ids[i])
				}
			}
			allow := func(id string) bool { i, _ := strconv.Atoi(id); return allowed[i] }
			truth := make([][]vindex.Hit, len(qs))
			for i, q := range qs {
				if truth[i], err = g.ScanIDs(q, *k, allowedIDs); err != nil {
					return err
				}
			}
			bound := func(i int) float64 {
				if len(truth[i]) == 0 {
					return math.Inf(-1)
				}
				return exact(qs[i], truth[i][len(truth[i])-1].ID)
			}
			want := func(i int) int { return len(truth[i]) }
			ef := 100
			f := filterFig{Selectivity: sel, Allowed: len(allowedIDs), Plan: "graph"}
			scan := g.ScanCheaper(len(allowedIDs), *k, ef)
			if scan {
				f.Plan = "scan"
			}
			graphHits := make([][]vindex.Hit, len(qs))
			t0 := time.Now()
			for i, q := range qs {
				graphHits[i], _ = g.Search(q, *k, ef, allow)
			}
			f.GraphLatency = time.Since(t0).Seconds() * 1000 / float64(len(qs))
			f.GraphRecall = recallOf(qs, graphHits, bound, want)
			if scan {
				planHits := make([][]vindex.Hit, len(qs))
				t0 := time.Now()
				for i, q := range qs {
					planHits[i], _ = g.ScanIDs(q, *k, allowedIDs)
				}
				f.LatencyMs = time.Since(t0).Seconds() * 1000 / float64(len(qs))
				f.Recall = recallOf(qs, planHits, bound, want)
			} else {
				f.LatencyMs, f.Recall = f.GraphLatency, f.GraphRecall
			}
			ffigs = append(ffigs, f)
		}
		out["filtered"] = ffigs
		out["filtered_ef"] = 100
		out["filtered_load"] = load()
	}

	if *upserts > 0 {
		u := min(*upserts, n)
		step := n / u
		uids := make([]string, u)
		uvecs := make([][]float32, u)
		for j := range u {
			l := j * step
			uids[j], uvecs[j] = ids[l], base[(l+n/2)%n]
		}
		t0 := time.Now()
		var chunks [][]byte
		blob, err := g.Encode(func(_ vindex.ChunkRef, c []byte) error { chunks = append(chunks, slices.Clone(c)); return nil })
		if err != nil {
			return err
		}
		out["encode_s"] = time.Since(t0).Seconds()
		chunkBytes := 0
		for _, c := range chunks {
			chunkBytes += len(c)
		}
		out["graph_blob_bytes"], out["vector_chunk_bytes"] = len(blob), chunkBytes
		t0 = time.Now()
		d, err := vindex.Decode(blob, func(i int, _ vindex.ChunkRef) ([]byte, error) { return chunks[i], nil })
		if err != nil {
			return err
		}
		out["decode_s"] = time.Since(t0).Seconds()
		chunks = nil
		out["upsert_load"] = load()
		c0, t0 := cpu(), time.Now()
		s := d.Successor()
		out["successor_s"] = time.Since(t0).Seconds()
		if err := s.InsertBatch(uids, uvecs, *threads); err != nil {
			return err
		}
		up := time.Since(t0).Seconds()
		out["upsert_s"], out["upsert_cpu_s"], out["upserts"] = up, cpu()-c0, u
		out["upsert_of_build"] = up / build
		mb := 0
		blob2, err := s.Encode(func(_ vindex.ChunkRef, c []byte) error { mb += len(c); return nil })
		if err != nil {
			return err
		}
		out["successor_graph_blob_bytes"], out["successor_new_chunk_bytes"] = len(blob2), mb
		out["successor_stats"] = s.Stats()
	}
	out["peak_rss_bytes"] = peakRSS()
	out["load"] = load()
	return json.NewEncoder(stdout).Encode(out)
}

func mix(z uint64) uint64 {
	z += 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

func exactDistance(d vindex.Distance, q, x []float32) float64 {
	var dot, qq, xx, l2 float64
	for i := range q {
		a, b := float64(q[i]), float64(x[i])
		dot += a * b
		qq += a * a
		xx += b * b
		l2 += (a - b) * (a - b)
	}
	switch d {
	case vindex.DistanceL2:
		return l2
	case vindex.DistanceIP:
		return 1 - dot
	}
	if qq == 0 || xx == 0 {
		return 1
	}
	return 1 - dot/math.Sqrt(qq*xx)
}

func cpu() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

func load() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f, _ := strconv.ParseFloat(strings.Fields(string(b))[0], 64)
	return f
}

func peakRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb * 1024
		}
	}
	return 0
}

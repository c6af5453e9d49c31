// Command vserve is the client side of scripts/bench/vindex-server.sh: the
// vector index measured through the real server (`compactor serve`, its
// compaction and its Connect API) on a vector set of scripts/bench/vecgen
// (the l2 mixture):
//
//	go run ./scripts/bench/vserve -addr http://127.0.0.1:PORT -server-pid PID -dir DIR
//
// Steps, each with the 1-minute load average it ran under:
//
//  1. create a collection (l2, the vector set's dimension, default index
//     settings) and push the vector set as ADDs, each record with the
//     metadata {"bucket": B}, B in 0..99 from a hash of its number (not
//     timed);
//  2. one compaction with indexing (the server must run with
//     --max-compaction-size at least the vector count, so it is one job):
//     the job's create → finish time, the index phase's seconds (the
//     server's compactor_index_build_seconds_sum for build "full"), and the
//     server's peak RSS during it (VmHWM of -server-pid, reset to the
//     current RSS first through /proc/PID/clear_refs);
//  3. QueryRecords, k = 10, default include (documents, metadata and
//     distances), from -clients concurrent clients over Connect (binary
//     protobuf, HTTP/1.1, one connection each), -requests each, cycling
//     through the queries: p50, p99 and max latency as each client sees
//     it, queries per second, and the server's and this process's (the
//     clients') CPU time per query (from /proc/PID/stat, in ticks of 10 ms
//     over the whole run: meaningful over hundreds of queries); after the full compaction's log purge ended
//     (compactor_log_purges_running 0) and one warm-up query. The run is
//     made twice: first with the caches as the compaction left them (the
//     hits' rows read from blocks not read yet: "cold"), then again at once
//     ("warm": the steady state of a server that has answered queries);
//  4. recall@10 of those answers against an exact scan computed here (a hit
//     counts when its distance, recomputed in float64, is at most the 10th
//     exact distance);
//  5. filtered queries at 1 %, 10 % and 50 % selectivity (where
//     {"bucket": {"$lt": B}}) from one client: recall@10 against the exact
//     filtered scan, p50 and p99 latency;
//  6. -upserts UPDATEs (record j·(n/upserts) takes the vector of record
//     (that + n/2) mod n, the rule of scripts/bench/vindex), pushed then
//     compacted: the job's time and the index phase's seconds (builds
//     "incremental" or "repaired") as a percentage of the full build's
//     index phase, the peak RSS; then recall@10 of -recall-queries
//     queries against the updated vectors.
//
// It prints a markdown table on stdout, and the figures as JSON to -json
// when set.
package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/compactorhq/compactor/client"
	compactorv1 "github.com/compactorhq/compactor/gen/compactor/v1"
	"github.com/compactorhq/compactor/internal/vindex"
	"github.com/compactorhq/compactor/scripts/bench/vecset"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "vserve:", err)
		os.Exit(1)
	}
}

const k = 10

// figures is what the run measured.
type figures struct {
	N, Dim, Clients, Requests, Upserts int
	// Reused: -reuse, the queries alone on an earlier run's collection
	// (no load, compaction or upserts measured).
	Reused           bool
	Push             step
	PurgeWait        step // the log purge still running after the exact answers
	Full             compaction
	Query            latency // the first run: cold caches
	QueryWarm        latency // the same run again
	QueryRSS         int64   // bytes: the server's RSS after the queries
	Recall           float64
	Filtered         []filtered
	Upsert           compaction
	UpsertRecall     float64
	UpsertRecallLoad float64
}

type step struct {
	Seconds float64
	Load    float64
}

type compaction struct {
	JobSeconds   float64
	IndexSeconds float64
	PeakRSS      int64 // bytes
	Load         float64
}

type latency struct {
	P50ms, P99ms, MaxMs, QPS float64
	// ServerCPUms is the server's CPU time (user + system) per query, in
	// milliseconds: what the load stretches least.
	ServerCPUms float64
	// ClientCPUms is this process's CPU time per query, in milliseconds:
	// the clients' encoding and decoding, which share the machine's cores
	// with the server when both run on it.
	ClientCPUms float64
	Load        float64
}

type filtered struct {
	Selectivity float64
	Allowed     int
	Recall      float64
	Latency     latency
}

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("vserve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "", "the server's base URL (required)")
	pid := fs.Int("server-pid", 0, "the server's process id, for its peak RSS (0: not measured)")
	dir := fs.String("dir", "", "directory of the vector set written by scripts/bench/vecgen (required)")
	kind := fs.String("kind", "mixture", "vector set")
	clients := fs.Int("clients", 8, "concurrent query clients")
	requests := fs.Int("requests", 250, "queries per client")
	upserts := fs.Int("upserts", 10_000, "UPDATEs of the incremental step")
	filterQueries := fs.Int("filter-queries", 100, "queries per filtered selectivity (a selective filter is planned as a scan of the version, seconds per query at 1M)")
	recallQueries := fs.Int("recall-queries", 200, "queries of the recall after the upserts")
	wait := fs.Duration("wait", 4*time.Hour, "the longest a compaction may take")
	jsonOut := fs.String("json", "", "file to write the figures to as JSON")
	pprofAddr := fs.String("pprof", "", "host:port of the server's --debug-listen: take a CPU profile of the server from the start of the warm run of the concurrent queries")
	pprofSeconds := fs.Int("pprof-seconds", 10, "length of that CPU profile")
	pprofOut := fs.String("pprof-out", "", "file to write that CPU profile to (default DIR/query.pprof)")
	reuse := fs.Bool("reuse", false, "query the collection an earlier run loaded and compacted (its data dir kept with KEEP_DATA=1) instead of loading one: steps 3 and 4 only")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case *addr == "" || *dir == "":
		return errors.New("-addr and -dir are required")
	case *clients < 1 || *requests < 1 || *upserts < 0 || *filterQueries < 1 || *recallQueries < 1:
		return errors.New("-clients, -requests, -filter-queries and -recall-queries take positive numbers, -upserts ≥ 0")
	}
	m, err := vecset.ReadMeta(*dir, *kind)
	if err != nil {
		return err
	}
	if m.Distance != "l2" {
		return fmt.Errorf("vector set %s has distance %s; this benchmark runs l2 sets", *kind, m.Distance)
	}
	base, err := vecset.ReadF32(vecset.BasePath(*dir, *kind), m.Dim)
	if err != nil {
		return err
	}
	queries, err := vecset.ReadF32(vecset.QueryPath(*dir, *kind), m.Dim)
	if err != nil {
		return err
	}
	n := len(base)
	*upserts = min(*upserts, n)
	note := func(format string, a ...any) {
		fmt.Fprintf(stderr, "vserve: "+format+" (load %.1f)\n", append(a, load())...)
	}
	ctx := context.Background()
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: *clients + 2, MaxConnsPerHost: *clients + 2}}
	cl := client.New(hc, *addr)
	fig := figures{N: n, Dim: m.Dim, Clients: *clients, Requests: *requests, Upserts: *upserts}

	name := fmt.Sprintf("vserve-%s-%d", *kind, n)
	if *reuse {
		coll, err := findCollection(ctx, cl, name)
		if err != nil {
			return err
		}
		fig.Reused, fig.Upserts = true, 0
		note("querying %s (%s), loaded by an earlier run", name, coll)
		truth := exactKth(base, queries, nil)
		if fig.Query, fig.QueryWarm, fig.Recall, err = queryRuns(ctx, cl, hc, coll, *pid, *clients, *requests, queries, base, truth, *pprofAddr, *pprofSeconds, cmp.Or(*pprofOut, *dir+"/query.pprof"), note); err != nil {
			return err
		}
		fig.QueryRSS = statusBytes(*pid, "VmRSS:")
		return writeFigures(stdout, *jsonOut, *kind, fig)
	}
	created, err := cl.Collections.CreateCollection(ctx, connect.NewRequest(&compactorv1.CreateCollectionRequest{
		Name: name, Dimension: int32(m.Dim), Distance: compactorv1.Distance_DISTANCE_L2,
	}))
	if err != nil {
		return fmt.Errorf("create the collection: %w", err)
	}
	coll := created.Msg.GetCollection().GetId()
	note("pushing %d records into %s", n, coll)
	start := time.Now()
	const chunk = 10_000
	for lo := 0; lo < n; lo += chunk {
		recs := make([]*compactorv1.OperationRecord, 0, chunk)
		for i := lo; i < min(n, lo+chunk); i++ {
			md, _ := structpb.NewStruct(map[string]any{"bucket": float64(bucket(i))})
			recs = append(recs, &compactorv1.OperationRecord{Op: compactorv1.Operation_OPERATION_ADD, Id: idOf(i), Embedding: base[i], Metadata: md})
		}
		if _, err := cl.Push(ctx, coll, recs, client.PushOptions{BatchSize: client.MaxPushBatch}); err != nil {
			return fmt.Errorf("push records %d..%d: %w", lo, lo+len(recs)-1, err)
		}
	}
	fig.Push = step{Seconds: time.Since(start).Seconds(), Load: load()}

	note("compacting %d records with indexing", n)
	if fig.Full, err = compact(ctx, cl, hc, *addr, coll, *pid, []string{"full"}, *wait); err != nil {
		return err
	}
	note("full compaction: job %.1f s, index phase %.1f s, peak RSS %d MiB", fig.Full.JobSeconds, fig.Full.IndexSeconds, fig.Full.PeakRSS>>20)

	note("exact answers of %d queries", len(queries))
	truth := exactKth(base, queries, nil)
	purgeWait, err := waitPurges(ctx, hc, *addr)
	if err != nil {
		return fmt.Errorf("wait for the log purge: %w", err)
	}
	fig.PurgeWait = step{Seconds: purgeWait.Seconds(), Load: load()}
	note("the log purge ended %.1f s after the exact answers", purgeWait.Seconds())
	if fig.Query, fig.QueryWarm, fig.Recall, err = queryRuns(ctx, cl, hc, coll, *pid, *clients, *requests, queries, base, truth, *pprofAddr, *pprofSeconds, cmp.Or(*pprofOut, *dir+"/query.pprof"), note); err != nil {
		return err
	}
	fig.QueryRSS = statusBytes(*pid, "VmRSS:")

	fq := queries[:min(len(queries), *filterQueries)]
	for _, pct := range []int{1, 10, 50} {
		allow := func(i int) bool { return bucket(i) < pct }
		allowed := 0
		for i := range n {
			if allow(i) {
				allowed++
			}
		}
		t := exactKth(base, fq, allow)
		where, _ := structpb.NewStruct(map[string]any{"bucket": map[string]any{"$lt": float64(pct)}})
		if _, err := query(ctx, cl, coll, fq[0], where); err != nil {
			return fmt.Errorf("warm-up filtered query: %w", err)
		}
		got := make([][]string, len(fq))
		lat, err := concurrent(*pid, 1, len(fq), func(_, r int) error {
			ids, err := query(ctx, cl, coll, fq[r], where)
			got[r] = ids
			return err
		})
		if err != nil {
			return err
		}
		for _, ids := range got {
			for _, id := range ids {
				if i, _ := strconv.Atoi(strings.TrimPrefix(id, "r")); !allow(i) {
					return fmt.Errorf("the %d %% filter returned %s, whose bucket is %d", pct, id, bucket(i))
				}
			}
		}
		f := filtered{Selectivity: float64(allowed) / float64(n), Allowed: allowed, Recall: recallOf(base, fq, got, t), Latency: lat}
		fig.Filtered = append(fig.Filtered, f)
		note("filter %d %%: recall@10 %.4f, p50 %.2f ms, p99 %.2f ms", pct, f.Recall, lat.P50ms, lat.P99ms)
	}

	if *upserts > 0 {
		note("pushing %d updates", *upserts)
		stride := max(1, n / *upserts)
		recs := make([]*compactorv1.OperationRecord, 0, *upserts)
		for j := range *upserts {
			i := j * stride
			v := base[(i+n/2)%n]
			recs = append(recs, &compactorv1.OperationRecord{Op: compactorv1.Operation_OPERATION_UPDATE, Id: idOf(i), Embedding: v})
		}
		if _, err := cl.Push(ctx, coll, recs, client.PushOptions{BatchSize: client.MaxPushBatch}); err != nil {
			return fmt.Errorf("push the updates: %w", err)
		}
		for _, r := range recs { // the vectors were taken before any changed
			i, _ := strconv.Atoi(strings.TrimPrefix(r.GetId(), "r"))
			base[i] = r.GetEmbedding()
		}
		if fig.Upsert, err = compact(ctx, cl, hc, *addr, coll, *pid, []string{"incremental", "repaired"}, *wait); err != nil {
			return err
		}
		note("incremental compaction: job %.2f s, index phase %.2f s", fig.Upsert.JobSeconds, fig.Upsert.IndexSeconds)
		rq := queries[:min(len(queries), *recallQueries)]
		t := exactKth(base, rq, nil)
		got := make([][]string, len(rq))
		if _, err := concurrent(*pid, 1, len(rq), func(_, r int) error {
			ids, err := query(ctx, cl, coll, rq[r], nil)
			got[r] = ids
			return err
		}); err != nil {
			return err
		}
		fig.UpsertRecall, fig.UpsertRecallLoad = recallOf(base, rq, got, t), load()
	}

	return writeFigures(stdout, *jsonOut, *kind, fig)
}

// writeFigures writes fig as JSON to jsonOut (when set) and its table to
// stdout.
func writeFigures(stdout io.Writer, jsonOut, kind string, fig figures) error {
	if jsonOut != "" {
		b, _ := json.MarshalIndent(fig, "", "  ")
		if err := os.WriteFile(jsonOut, append(b, '\n'), 0o644); err != nil {
			return err
		}
	}
	report(stdout, kind, fig)
	return nil
}

// findCollection returns the id of the collection named name.
func findCollection(ctx context.Context, cl *client.Client, name string) (string, error) {
	token := ""
	for {
		res, err := cl.Collections.ListCollections(ctx, connect.NewRequest(&compactorv1.ListCollectionsRequest{PageToken: token}))
		if err != nil {
			return "", fmt.Errorf("list the collections: %w", err)
		}
		for _, c := range res.Msg.GetCollections() {
			if c.GetName() == name {
				return c.GetId(), nil
			}
		}
		if token = res.Msg.GetNextPageToken(); token == "" {
			return "", fmt.Errorf("no collection %s: run without -reuse first, with KEEP_DATA=1", name)
		}
	}
}

// queryRuns is steps 3 and 4 (truth: exactKth of the queries): one
// warm-up query, the concurrent queries with the caches as they are
// (cold), again at once (warm), and recall@10 of the answers. With
// pprofAddr set, a CPU profile of the server of pprofSeconds seconds,
// started with the warm run, is written to pprofOut.
func queryRuns(ctx context.Context, cl *client.Client, hc *http.Client, coll string, pid, clients, requests int, queries, base [][]float32, truth []float64, pprofAddr string, pprofSeconds int, pprofOut string, note func(string, ...any)) (cold, warm latency, recall float64, err error) {
	if _, err := query(ctx, cl, coll, queries[0], nil); err != nil {
		return cold, warm, 0, fmt.Errorf("warm-up query: %w", err)
	}
	note("QueryRecords from %d clients, %d requests each", clients, requests)
	answers := make([][]string, len(queries))
	var answersMu sync.Mutex
	run := func() (latency, error) {
		return concurrent(pid, clients, requests, func(c, r int) error {
			qi := (c*(requests) + r) % len(queries)
			ids, err := query(ctx, cl, coll, queries[qi], nil)
			if err != nil {
				return err
			}
			answersMu.Lock()
			answers[qi] = ids
			answersMu.Unlock()
			return nil
		})
	}
	if cold, err = run(); err != nil {
		return cold, warm, 0, err
	}
	note("cold: p50 %.2f ms, p99 %.2f ms", cold.P50ms, cold.P99ms)
	var profiled chan error
	if pprofAddr != "" {
		profiled = make(chan error, 1)
		go func() { profiled <- cpuProfile(ctx, hc, pprofAddr, pprofSeconds, pprofOut) }()
	}
	if warm, err = run(); err != nil {
		return cold, warm, 0, err
	}
	if profiled != nil {
		if err := <-profiled; err != nil {
			return cold, warm, 0, err
		}
	}
	recall = recallOf(base, queries, answers, truth)
	note("warm: p50 %.2f ms, p99 %.2f ms, recall@10 %.4f", warm.P50ms, warm.P99ms, recall)

	return cold, warm, recall, nil
}

// bucket is record i's metadata value: 0..99 from a hash of i, so that
// bucket < p selects about p % of the records, independent of the vectors.
func bucket(i int) int { return int(mix(uint64(i)) % 100) }

func idOf(i int) string { return fmt.Sprintf("r%08d", i) }

func mix(z uint64) uint64 {
	z += 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// query runs one QueryRecords (k = 10, default include) and returns the
// ids of its hits. A filtered query may be answered by the exact scan of
// the accepted records (the server's plan when the filter is selective:
// vindex.ScanCheaper); an unfiltered one must be answered by the index.
func query(ctx context.Context, cl *client.Client, coll string, q []float32, where *structpb.Struct) ([]string, error) {
	res, err := cl.Collections.QueryRecords(ctx, connect.NewRequest(&compactorv1.QueryRecordsRequest{
		CollectionId: coll, Embeddings: []*compactorv1.QueryEmbedding{{Values: q}}, K: k, Where: where,
	}))
	if err != nil {
		return nil, fmt.Errorf("QueryRecords: %w", err)
	}
	if where == nil && res.Msg.GetExact() {
		return nil, errors.New("an unfiltered QueryRecords answered from an exact scan, not the index")
	}
	var ids []string
	for _, r := range res.Msg.GetResults() {
		for _, h := range r.GetHits() {
			ids = append(ids, h.GetId())
		}
	}
	return ids, nil
}

// cpuProfile writes to out a CPU profile of seconds seconds from the
// net/http/pprof listener at addr.
func cpuProfile(ctx context.Context, hc *http.Client, addr string, seconds int, out string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, seconds), nil)
	if err != nil {
		return err
	}
	res, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("CPU profile of the server: %w", err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("CPU profile of the server: %s", res.Status)
	}
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return fmt.Errorf("CPU profile of the server: %w", err)
	}
	return os.WriteFile(out, b, 0o644)
}

// concurrent runs do(client, request) for requests requests on each of
// clients goroutines and returns the latencies' percentiles.
func concurrent(pid, clients, requests int, do func(c, r int) error) (latency, error) {
	cpu0, own0 := processCPU(pid), processCPU(os.Getpid())
	lats := make([][]time.Duration, clients)
	errs := make([]error, clients)
	var wg sync.WaitGroup
	start := time.Now()
	for c := range clients {
		wg.Go(func() {
			for r := range requests {
				t := time.Now()
				if err := do(c, r); err != nil {
					errs[c] = err
					return
				}
				lats[c] = append(lats[c], time.Since(t))
			}
		})
	}
	wg.Wait()
	wall := time.Since(start)
	if err := errors.Join(errs...); err != nil {
		return latency{}, err
	}
	all := slices.Concat(lats...)
	slices.Sort(all)
	ms := func(p float64) float64 {
		return float64(all[min(len(all)-1, int(math.Ceil(p*float64(len(all))))-1)]) / 1e6
	}
	l := latency{P50ms: ms(0.50), P99ms: ms(0.99), MaxMs: ms(1), QPS: float64(len(all)) / wall.Seconds(), Load: load()}
	if cpu1 := processCPU(pid); cpu0 >= 0 && cpu1 >= 0 {
		l.ServerCPUms = (cpu1 - cpu0) * 1e3 / float64(len(all))
	}
	if own1 := processCPU(os.Getpid()); own0 >= 0 && own1 >= 0 {
		l.ClientCPUms = (own1 - own0) * 1e3 / float64(len(all))
	}
	return l, nil
}

// processCPU is process pid's user + system CPU time in seconds, -1 when
// unreadable (or pid is 0).
func processCPU(pid int) float64 {
	if pid <= 0 {
		return -1
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return -1
	}
	// The fields after the command's closing parenthesis: utime and stime
	// are the 12th and 13th, in clock ticks (100 a second on Linux).
	rest := string(b)
	if i := strings.LastIndexByte(rest, ')'); i >= 0 {
		rest = rest[i+1:]
	}
	f := strings.Fields(rest)
	if len(f) < 13 {
		return -1
	}
	ut, err1 := strconv.ParseFloat(f[11], 64)
	st, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		return -1
	}
	return (ut + st) / 100
}

// compact runs one compaction job of coll and waits for it; it returns the
// job's time, the growth of the server's index phase seconds of the given
// builds, and the server's peak RSS meanwhile.
func compact(ctx context.Context, cl *client.Client, hc *http.Client, addr, coll string, pid int, builds []string, wait time.Duration) (compaction, error) {
	before, err := indexSeconds(ctx, hc, addr, builds)
	if err != nil {
		return compaction{}, err
	}
	if pid > 0 {
		if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
			return compaction{}, fmt.Errorf("reset the server's peak RSS: %w", err)
		}
	}
	res, err := cl.Compactions.Compact(ctx, connect.NewRequest(&compactorv1.CompactRequest{CollectionIds: []string{coll}, Reason: "vserve"}))
	if err != nil {
		return compaction{}, fmt.Errorf("Compact: %w", err)
	}
	if len(res.Msg.GetJobs()) != 1 {
		return compaction{}, fmt.Errorf("Compact returned %d jobs, want 1", len(res.Msg.GetJobs()))
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	job, err := cl.WaitJob(wctx, res.Msg.GetJobs()[0].GetJob().GetId())
	if err != nil {
		return compaction{}, err
	}
	if job.GetState() != compactorv1.JobState_JOB_STATE_SUCCEEDED {
		return compaction{}, fmt.Errorf("compaction job %s ended %v: %s", job.GetId(), job.GetState(), job.GetError())
	}
	after, err := indexSeconds(ctx, hc, addr, builds)
	if err != nil {
		return compaction{}, err
	}
	c := compaction{
		JobSeconds:   job.GetFinishTime().AsTime().Sub(job.GetCreateTime().AsTime()).Seconds(),
		IndexSeconds: after - before,
		Load:         load(),
	}
	if pid > 0 {
		c.PeakRSS = peakRSS(pid)
	}
	return c, nil
}

// indexSeconds sums the server's compactor_index_build_seconds_sum of the
// given build labels.
func indexSeconds(ctx context.Context, hc *http.Client, addr string, builds []string) (float64, error) {
	var series []string
	for _, b := range builds {
		series = append(series, `compactor_index_build_seconds_sum{build="`+b+`"}`)
	}
	return metricSum(ctx, hc, addr, series)
}

// metricSum sums the values of the given series (name with its labels, as
// the server's /metrics prints them); an error when one is absent.
func metricSum(ctx context.Context, hc *http.Client, addr string, series []string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, addr+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	res, err := hc.Do(req)
	if err != nil {
		return 0, fmt.Errorf("read the server's metrics: %w", err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("read the server's metrics: %s", res.Status)
	}
	var sum float64
	found := 0
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		for _, name := range series {
			if rest, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
				v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
				if err != nil {
					return 0, fmt.Errorf("metric %s: %w", name, err)
				}
				sum += v
				found++
			}
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	if found != len(series) {
		return 0, fmt.Errorf("the server's metrics lack one of %v", series)
	}
	return sum, nil
}

// waitPurges waits until the server deletes no compacted log rows any more
// (compactor_log_purges_running is 0), polling every 250 ms, and returns
// how long it waited: the queries are measured on the server at rest.
func waitPurges(ctx context.Context, hc *http.Client, addr string) (time.Duration, error) {
	start := time.Now()
	for {
		n, err := metricSum(ctx, hc, addr, []string{"compactor_log_purges_running"})
		if err != nil || n == 0 {
			return time.Since(start), err
		}
		select {
		case <-ctx.Done():
			return time.Since(start), ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// exactKth returns, per query, the 10th smallest exact (float64) distance
// among the records allow accepts (all when nil): the float32 scan picks
// the 2k nearest, whose distances are then recomputed in float64.
func exactKth(base, queries [][]float32, allow func(int) bool) []float64 {
	out := make([]float64, len(queries))
	var wg sync.WaitGroup
	workers := 2
	for w := range workers {
		wg.Go(func() {
			type c struct {
				d float32
				i int
			}
			for qi := w; qi < len(queries); qi += workers {
				q := queries[qi]
				var top []c // the 2k best so far, unsorted beyond the max
				worst := float32(math.MaxFloat32)
				for i, x := range base {
					if allow != nil && !allow(i) {
						continue
					}
					d := vindex.DistanceL2.Between(q, x)
					if len(top) < 2*k {
						top = append(top, c{d, i})
						if len(top) == 2*k {
							worst = slices.MaxFunc(top, func(a, b c) int { return cmp.Compare(a.d, b.d) }).d
						}
						continue
					}
					if d >= worst {
						continue
					}
					j := slices.IndexFunc(top, func(e c) bool { return e.d == worst })
					top[j] = c{d, i}
					worst = slices.MaxFunc(top, func(a, b c) int { return cmp.Compare(a.d, b.d) }).d
				}
				ds := make([]float64, len(top))
				for j, e := range top {
					ds[j] = exact(q, base[e.i])
				}
				slices.Sort(ds)
				out[qi] = math.Inf(1)
				if len(ds) >= k {
					out[qi] = ds[k-1]
				}
			}
		})
	}
	wg.Wait()
	return out
}

// recallOf is recall@10 of answers (nil: not asked) against the 10th
// exact distances kth.
func recallOf(base, queries [][]float32, answers [][]string, kth []float64) float64 {
	right, total := 0, 0
	for qi, ids := range answers {
		if ids == nil {
			continue
		}
		total += k
		for _, id := range ids {
			i, err := strconv.Atoi(strings.TrimPrefix(id, "r"))
			if err != nil || i < 0 || i >= len(base) {
				continue
			}
			if exact(queries[qi], base[i]) <= kth[qi]*(1+1e-9) {
				right++
			}
		}
	}
	if total == 0 {
		return 0
	}
	return float64(right) / float64(total)
}

func exact(q, x []float32) float64 {
	var s float64
	for i := range q {
		d := float64(q[i]) - float64(x[i])
		s += d * d
	}
	return s
}

func load() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	v, _ := strconv.ParseFloat(strings.Fields(string(b))[0], 64)
	return v
}

// peakRSS is the VmHWM of process pid in bytes (0 when unreadable).
func peakRSS(pid int) int64 { return statusBytes(pid, "VmHWM:") }

// statusBytes is the field (a size in kB, e.g. "VmRSS:") of process pid's
// /proc status, in bytes; 0 when unreadable.
func statusBytes(pid int, field string) int64 {
	if pid <= 0 {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb * 1024
		}
	}
	return 0
}

func report(w io.Writer, kind string, f figures) {
	fmt.Fprintf(w, "### %s through the server: %d × %d, l2, QueryRecords k = %d\n\n", kind, f.N, f.Dim, k)
	fmt.Fprintln(w, "| figure | value | load (1 min) |")
	fmt.Fprintln(w, "|---|---|---|")
	if !f.Reused {
		fmt.Fprintf(w, "| push of %d ADDs (not a goal) | %.1f s | %.1f |\n", f.N, f.Push.Seconds, f.Push.Load)
		fmt.Fprintf(w, "| full compaction with indexing: job | %.1f s | %.1f |\n", f.Full.JobSeconds, f.Full.Load)
		fmt.Fprintf(w, "| … its index phase | %.1f s | |\n", f.Full.IndexSeconds)
		fmt.Fprintf(w, "| … peak RSS of the server (VmHWM) | %d MiB | |\n", f.Full.PeakRSS>>20)
		fmt.Fprintf(w, "| the full compaction's log purge, still running after the exact answers (queries wait for it) | %.1f s | %.1f |\n", f.PurgeWait.Seconds, f.PurgeWait.Load)
	}
	for _, q := range []struct {
		name string
		l    latency
	}{{"cold caches (the first run after the compaction)", f.Query}, {"warm (the same run again)", f.QueryWarm}} {
		fmt.Fprintf(w, "| QueryRecords, %d clients × %d, %s: p50 / p99 / max | %.2f / %.2f / %.1f ms | %.1f |\n",
			f.Clients, f.Requests, q.name, q.l.P50ms, q.l.P99ms, q.l.MaxMs, q.l.Load)
		fmt.Fprintf(w, "| … queries/s; the server's, the clients' CPU time per query | %.0f; %.2f, %.2f ms | |\n", q.l.QPS, q.l.ServerCPUms, q.l.ClientCPUms)
	}
	recallRow := "recall@10"
	if f.Reused {
		// The kept collection holds the earlier run's upserts; the truth is
		// the vector set as generated.
		recallRow = "recall@10 against the vector set as generated (the earlier run's upserts are in the collection)"
	}
	fmt.Fprintf(w, "| … %s | %.4f | |\n", recallRow, f.Recall)
	fmt.Fprintf(w, "| … RSS of the server after the queries (VmRSS) | %d MiB | |\n", f.QueryRSS>>20)
	for _, x := range f.Filtered {
		fmt.Fprintf(w, "| filtered %.1f %% (%d records), 1 client: recall@10, p50 / p99, server CPU per query | %.4f, %.2f / %.2f ms, %.2f ms | %.1f |\n",
			100*x.Selectivity, x.Allowed, x.Recall, x.Latency.P50ms, x.Latency.P99ms, x.Latency.ServerCPUms, x.Latency.Load)
	}
	if f.Upserts > 0 {
		fmt.Fprintf(w, "| %d upserts: compaction job | %.2f s | %.1f |\n", f.Upserts, f.Upsert.JobSeconds, f.Upsert.Load)
		pct := math.NaN()
		if f.Full.IndexSeconds > 0 {
			pct = 100 * f.Upsert.IndexSeconds / f.Full.IndexSeconds
		}
		fmt.Fprintf(w, "| … its index phase, and as %% of the full build's | %.2f s, %.1f %% | |\n", f.Upsert.IndexSeconds, pct)
		fmt.Fprintf(w, "| … peak RSS of the server (VmHWM) | %d MiB | |\n", f.Upsert.PeakRSS>>20)
		fmt.Fprintf(w, "| … recall@10 after it | %.4f | %.1f |\n", f.UpsertRecall, f.UpsertRecallLoad)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Loads above 1.0 on the 2-core machine make every time here a loaded figure, not a verdict.")
}

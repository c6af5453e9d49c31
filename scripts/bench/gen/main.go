// Command gen writes the operation records of scripts/bench.sh (the anchor of
// docs/performance.md): a log of -n operation records with -dim-dimensional embeddings,
// deterministic by -seed, as the CLI's JSONL push format and as Parquet for
// DuckDB, plus the two incremental changes the benchmark applies to the
// compacted collection.
//
//	go run ./scripts/bench/gen -n 1000000 -dim 128 -seed 1 -out DIR
//
// The log's mix, drawn per operation record: 70 % ADD of a new id, 20 %
// UPDATE of a live id, 10 % DELETE of a live id (an ADD while no id is live),
// so about 60 % of the operation records end as rows (1,000,000 -> ~600,000;
// 100,000 -> ~60,000). An id is never added twice and never updated or
// deleted once deleted, so the materialization rules (DESIGN.md §6) reduce,
// per id, to: absent when its last operation record is a DELETE; otherwise
// its ADD merged with its UPDATEs in log order (embedding and document: the
// last non-null value; metadata: each UPDATE's keys set, a null deleting its
// key). scripts/bench.sh's DuckDB query relies on exactly this.
//
// Records: ids "a-<16 hex digits>" (a bijective mix of the add counter, so
// they are unique and their order is unrelated to log order); embeddings
// uniform in [-1, 1] rounded to -decimals decimals (3 by default, as in the
// anchor: few distinct values, which DuckDB's dictionary encoding exploits;
// -decimals -1 keeps full float32 precision); a short document; metadata
// {"section", "n", "even"}. An UPDATE carries a new embedding (half of them),
// a new document (half of them) and metadata {"rev": n}, with "even": null
// (deleting the key) in a quarter of them.
//
// Files written into -out (created if missing):
//
//	ops.jsonl      the log in the push format ({"op", "id", "embedding", "document", "metadata"})
//	ops.parquet    the same records with their log offset (1-based line number):
//	               offset INT64, op STRING, id STRING, embedding LIST<FLOAT> (null when
//	               absent), document STRING, metadata STRING (a JSON object) (null when absent)
//	append.jsonl   -incremental ADDs of new ids "b-<9 digits>", which sort after every
//	               id of the log (an append at the end of the collection)
//	updates.jsonl  -incremental UPDATEs (new embedding, metadata {"rev"}) of live ids
//	               spread evenly over the id order of the materialized log
//	summary.json   counts: ops, adds, updates, deletes, rows (records after
//	               materialization), incremental, dim, seed, decimals
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"

	"github.com/parquet-go/parquet-go"

	"github.com/compactorhq/compactor/internal/flagcheck"
)

func main() {
	if err := run(os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

type config struct {
	n, dim, incremental, decimals int
	seed                          uint64
	out                           string
}

func run(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("gen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c config
	fs.IntVar(&c.n, "n", 100_000, "operation records in the log")
	fs.IntVar(&c.dim, "dim", 128, "embedding dimension")
	fs.Uint64Var(&c.seed, "seed", 1, "seed of the generator (same seed, same files)")
	fs.IntVar(&c.decimals, "decimals", 3, "decimals embedding values are rounded to (-1: full float32 precision)")
	fs.IntVar(&c.incremental, "incremental", 1000, "records of append.jsonl and of updates.jsonl")
	fs.StringVar(&c.out, "out", "", "directory to write the files into (required)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := flagcheck.First(
		flagcheck.That(c.out != "", "-out is required"),
		flagcheck.Positive("-n", c.n),
		flagcheck.Positive("-dim", c.dim),
		flagcheck.NotNegative("-incremental", c.incremental),
		flagcheck.That(c.decimals >= -1 && c.decimals <= 7, "-decimals must be -1 (full precision) or 0..7, got %d", c.decimals),
	); err != nil {
		return err
	}
	if err := os.MkdirAll(c.out, 0o755); err != nil {
		return err
	}
	sum, err := generate(c)
	if err != nil {
		return err
	}
	b, err := json.MarshalIndent(sum, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(c.out, "summary.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "gen: %d operation records (%d adds, %d updates, %d deletes) -> %d rows, dim %d, seed %d, in %s\n",
		sum.Ops, sum.Adds, sum.Updates, sum.Deletes, sum.Rows, c.dim, c.seed, c.out)
	return nil
}

// summary is summary.json.
type summary struct {
	Ops         int    `json:"ops"`
	Adds        int    `json:"adds"`
	Updates     int    `json:"updates"`
	Deletes     int    `json:"deletes"`
	Rows        int    `json:"rows"`
	Incremental int    `json:"incremental"`
	Dim         int    `json:"dim"`
	Seed        uint64 `json:"seed"`
	Decimals    int    `json:"decimals"`
}

// op is one operation record: a line of the push format and a row of
// ops.parquet.
type op struct {
	Offset    int64          `json:"-" parquet:"offset"`
	Op        string         `json:"op" parquet:"op"`
	ID        string         `json:"id" parquet:"id"`
	Embedding []float32      `json:"embedding,omitempty" parquet:"embedding,optional,list"`
	Document  *string        `json:"document,omitempty" parquet:"document,optional"`
	Metadata  map[string]any `json:"metadata,omitempty" parquet:"-"`
	MetaJSON  *string        `json:"-" parquet:"metadata,optional"`
}

// gen draws records; its state is the random source and the live ids.
type gen struct {
	c    config
	r    *rand.Rand
	live []string       // ids whose last operation record is not a DELETE
	pos  map[string]int // index of each live id in live
	adds uint64
}

// mix is splitmix64's finalizer: a bijection on uint64, so distinct add
// counters give distinct ids.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

func (g *gen) embedding() []float32 {
	e := make([]float32, g.c.dim)
	scale := math.Pow10(max(g.c.decimals, 0))
	for i := range e {
		v := g.r.Float64()*2 - 1
		if g.c.decimals >= 0 {
			v = math.Round(v*scale) / scale
		}
		e[i] = float32(v)
	}
	return e
}

func ptr(s string) *string { return &s }

func (g *gen) add(offset int64) op {
	g.adds++
	id := fmt.Sprintf("a-%016x", mix(g.adds+g.c.seed<<40))
	g.pos[id] = len(g.live)
	g.live = append(g.live, id)
	return op{Op: "add", ID: id, Embedding: g.embedding(),
		Document: ptr(fmt.Sprintf("record %d of the benchmark, added at log offset %d", g.adds, offset)),
		Metadata: map[string]any{"section": "bench", "n": float64(g.adds), "even": g.adds%2 == 0}}
}

func (g *gen) update(id string, offset int64) op {
	o := op{Op: "update", ID: id, Metadata: map[string]any{"rev": float64(offset)}}
	if g.r.IntN(2) == 0 {
		o.Embedding = g.embedding()
	}
	if g.r.IntN(2) == 0 {
		o.Document = ptr(fmt.Sprintf("record %s revised at log offset %d", id, offset))
	}
	if g.r.IntN(4) == 0 {
		o.Metadata["even"] = nil
	}
	return o
}

func (g *gen) delete(id string) op {
	i := g.pos[id]
	last := g.live[len(g.live)-1]
	g.live[i] = last
	g.pos[last] = i
	g.live = g.live[:len(g.live)-1]
	delete(g.pos, id)
	return op{Op: "delete", ID: id}
}

// next draws the operation record at offset.
func (g *gen) next(offset int64, sum *summary) op {
	x := g.r.Float64()
	switch {
	case len(g.live) == 0 || x < 0.7:
		sum.Adds++
		return g.add(offset)
	case x < 0.9:
		sum.Updates++
		return g.update(g.live[g.r.IntN(len(g.live))], offset)
	default:
		sum.Deletes++
		return g.delete(g.live[g.r.IntN(len(g.live))])
	}
}

func generate(c config) (summary, error) {
	sum := summary{Ops: c.n, Incremental: c.incremental, Dim: c.dim, Seed: c.seed, Decimals: c.decimals}
	g := &gen{c: c, r: rand.New(rand.NewPCG(c.seed, 0x636f6d7061637472)), pos: map[string]int{}}

	jsonl, err := newJSONL(filepath.Join(c.out, "ops.jsonl"))
	if err != nil {
		return sum, err
	}
	defer jsonl.f.Close()
	pf, err := os.Create(filepath.Join(c.out, "ops.parquet"))
	if err != nil {
		return sum, err
	}
	defer pf.Close()
	// Row groups of 64k rows, so that DuckDB reads the file on both threads.
	pw := parquet.NewGenericWriter[op](pf, parquet.MaxRowsPerRowGroup(65536))
	batch := make([]op, 0, 4096)
	flush := func() error {
		if _, err := pw.Write(batch); err != nil {
			return fmt.Errorf("write %s: %w", pf.Name(), err)
		}
		batch = batch[:0]
		return nil
	}
	for i := 1; i <= c.n; i++ {
		o := g.next(int64(i), &sum)
		o.Offset = int64(i)
		if err := jsonl.write(o); err != nil {
			return sum, err
		}
		if o.Metadata != nil {
			b, err := json.Marshal(o.Metadata)
			if err != nil {
				return sum, err
			}
			o.MetaJSON = ptr(string(b))
		}
		batch = append(batch, o)
		if len(batch) == cap(batch) {
			if err := flush(); err != nil {
				return sum, err
			}
		}
	}
	if err := flush(); err != nil {
		return sum, err
	}
	if err := pw.Close(); err != nil {
		return sum, fmt.Errorf("write %s: %w", pf.Name(), err)
	}
	if err := pf.Close(); err != nil {
		return sum, err
	}
	if err := jsonl.close(); err != nil {
		return sum, err
	}
	sum.Rows = len(g.live)

	// The incremental changes, applied to the compacted log.
	app, err := newJSONL(filepath.Join(c.out, "append.jsonl"))
	if err != nil {
		return sum, err
	}
	defer app.f.Close()
	offset := int64(c.n)
	for i := range c.incremental {
		offset++
		o := op{Op: "add", ID: fmt.Sprintf("b-%09d", i+1), Embedding: g.embedding(),
			Document: ptr(fmt.Sprintf("record b-%09d appended", i+1)),
			Metadata: map[string]any{"section": "append", "n": float64(i + 1), "even": i%2 == 1}}
		if err := app.write(o); err != nil {
			return sum, err
		}
	}
	if err := app.close(); err != nil {
		return sum, err
	}
	upd, err := newJSONL(filepath.Join(c.out, "updates.jsonl"))
	if err != nil {
		return sum, err
	}
	defer upd.f.Close()
	ids := slices.Clone(g.live)
	slices.Sort(ids)
	for i := range min(c.incremental, len(ids)) {
		offset++
		o := op{Op: "update", ID: ids[i*len(ids)/c.incremental], Embedding: g.embedding(),
			Metadata: map[string]any{"rev": float64(offset)}}
		if err := upd.write(o); err != nil {
			return sum, err
		}
	}
	return sum, upd.close()
}

type jsonlFile struct {
	f   *os.File
	w   *bufio.Writer
	enc *json.Encoder
}

func newJSONL(path string) (*jsonlFile, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return &jsonlFile{f: f, w: w, enc: enc}, nil
}

func (j *jsonlFile) write(o op) error {
	if err := j.enc.Encode(o); err != nil {
		return fmt.Errorf("write %s: %w", j.f.Name(), err)
	}
	return nil
}

func (j *jsonlFile) close() error {
	if err := j.w.Flush(); err != nil {
		return fmt.Errorf("write %s: %w", j.f.Name(), err)
	}
	return j.f.Close()
}

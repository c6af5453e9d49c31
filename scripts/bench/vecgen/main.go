// Command vecgen writes the vector sets of scripts/bench/vindex.sh (the
// index benchmark against hnswlib) as raw little-endian float32 files,
// deterministic by -seed:
//
//	go run ./scripts/bench/vecgen -kind mixture -n 1000000 -queries 1000 -out DIR
//
// Kinds:
//
//	mixture  -n vectors of -dim dimensions from a Gaussian mixture: 1,000
//	         centres drawn standard-normal, each vector a centre (chosen
//	         uniformly) plus standard-normal noise (unit variance); the
//	         queries are drawn the same way (l2).
//	uniform  -n vectors uniform in [-1, 1)^dim, queries likewise (l2): the
//	         hard case, with no clusters to navigate by.
//	debian   the embeddings of -debian (the shared Debian sample, JSON
//	         Lines gzipped, 64-dim; cosine) as the base, and those of
//	         -debian-queries (its updates) as the queries; -n and -dim are
//	         taken from the files.
//
// Files written into -out: KIND.base.f32 (n × dim float32), KIND.query.f32
// (queries × dim), KIND.json ({"kind", "n", "queries", "dim", "distance",
// "seed"}): the format of package scripts/bench/vecset.
package main

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"

	"github.com/compactorhq/compactor/scripts/bench/vecset"
)

func main() {
	if err := run(os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "vecgen:", err)
		os.Exit(1)
	}
}

func run(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("vecgen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	kind := fs.String("kind", "mixture", "mixture, uniform or debian")
	n := fs.Int("n", 100_000, "base vectors (mixture, uniform)")
	queries := fs.Int("queries", 1000, "query vectors (mixture, uniform)")
	dim := fs.Int("dim", 128, "dimensions (mixture, uniform)")
	centres := fs.Int("centres", 1000, "mixture centres")
	seed := fs.Uint64("seed", 1, "seed (same seed, same files)")
	debian := fs.String("debian", "", "the Debian sample's base load (debian kind)")
	debianQ := fs.String("debian-queries", "", "the Debian sample's updates, the queries (debian kind)")
	out := fs.String("out", "", "directory to write into (required)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" {
		return errors.New("-out is required")
	}
	if *n < 1 || *queries < 1 || *dim < 1 || *centres < 1 {
		return errors.New("-n, -queries, -dim and -centres must be positive")
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	m := vecset.Meta{Kind: *kind, N: *n, Queries: *queries, Dim: *dim, Distance: "l2", Seed: *seed}
	var base, query [][]float32
	switch *kind {
	case "mixture":
		rng := rand.New(rand.NewPCG(*seed, 0x6d6978))
		cs := make([][]float32, *centres)
		for i := range cs {
			cs[i] = normal(rng, *dim, nil)
		}
		draw := func(count int) [][]float32 {
			vs := make([][]float32, count)
			for i := range vs {
				vs[i] = normal(rng, *dim, cs[rng.IntN(len(cs))])
			}
			return vs
		}
		base, query = draw(*n), draw(*queries)
	case "uniform":
		rng := rand.New(rand.NewPCG(*seed, 0x756e69))
		draw := func(count int) [][]float32 {
			vs := make([][]float32, count)
			for i := range vs {
				v := make([]float32, *dim)
				for j := range v {
					v[j] = rng.Float32()*2 - 1
				}
				vs[i] = v
			}
			return vs
		}
		base, query = draw(*n), draw(*queries)
	case "debian":
		var err error
		if base, err = readEmbeddings(*debian); err != nil {
			return err
		}
		if query, err = readEmbeddings(*debianQ); err != nil {
			return err
		}
		m.N, m.Queries, m.Dim, m.Distance = len(base), len(query), len(base[0]), "cosine"
	default:
		return fmt.Errorf("-kind %q: want mixture, uniform or debian", *kind)
	}
	if err := vecset.WriteF32(vecset.BasePath(*out, *kind), base, m.Dim); err != nil {
		return err
	}
	if err := vecset.WriteF32(vecset.QueryPath(*out, *kind), query, m.Dim); err != nil {
		return err
	}
	return vecset.WriteMeta(*out, m)
}

// normal returns centre plus a standard-normal vector (centre nil: zero).
func normal(rng *rand.Rand, dim int, centre []float32) []float32 {
	v := make([]float32, dim)
	for j := range v {
		v[j] = float32(rng.NormFloat64())
		if centre != nil {
			v[j] += centre[j]
		}
	}
	return v
}

// readEmbeddings reads the embeddings of a gzipped JSON Lines file in the
// push format; lines without one (deletes) are skipped.
func readEmbeddings(path string) ([][]float32, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	sc := bufio.NewScanner(z)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	var out [][]float32
	for line := 1; sc.Scan(); line++ {
		var r struct {
			Embedding []float32 `json:"embedding"`
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		if len(r.Embedding) == 0 {
			continue
		}
		if len(out) > 0 && len(r.Embedding) != len(out[0]) {
			return nil, fmt.Errorf("%s:%d: %d dimensions, earlier lines %d", path, line, len(r.Embedding), len(out[0]))
		}
		out = append(out, r.Embedding)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no embeddings", path)
	}
	return out, nil
}

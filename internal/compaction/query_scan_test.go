package compaction

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/materialize"
	"github.com/compactorhq/compactor/internal/segment"
	"github.com/compactorhq/compactor/internal/vindex"
	"github.com/compactorhq/compactor/internal/where"
)

// countedIndex is a version's index whose in-memory scans are counted;
// otherKernel makes it say its distances are not the scan's (a cosine
// index another kernel normalised).
type countedIndex struct {
	*versionIndex
	scans       *int
	otherKernel bool
}

func (c countedIndex) ScanWhere(qs [][]float32, k int, f *where.Filter, skip map[string]bool) ([][]Hit, error) {
	*c.scans++
	return c.versionIndex.ScanWhere(qs, k, f, skip)
}

func (c countedIndex) BetweenDistances() bool {
	return !c.otherKernel && c.versionIndex.BetweenDistances()
}

// countingSource opens the indexes compactions write as countedIndexes.
type countingSource struct {
	c           *Compactor
	scans       *int
	otherKernel bool
}

func (s countingSource) Index(ctx context.Context, coll catalog.Collection, m *segment.Manifest) (Searcher, error) {
	idx, err := storedIndexes{s.c}.Index(ctx, coll, m)
	if err != nil || idx == nil {
		return idx, err
	}
	return countedIndex{versionIndex: idx.(*versionIndex), scans: s.scans, otherKernel: s.otherKernel}, nil
}

// scanGen makes the records of TestSelectiveFilterScansTheIndexAsTheBlocks:
// ids r0000..r(ids-1), embeddings on a coarse grid (equal distances are
// common), metadata with a bucket 0..99 (a filter's selectivity in
// percent), a tag of five values and a flag.
type scanGen struct {
	r        *rand.Rand
	ids, dim int
}

func (g scanGen) id() string { return fmt.Sprintf("r%04d", g.r.IntN(g.ids)) }

func (g scanGen) embedding() []float32 {
	e := make([]float32, g.dim)
	for i := range e {
		e[i] = float32(g.r.IntN(9)-4) / 2
	}
	return e
}

func (g scanGen) metadata(update bool) materialize.Metadata {
	md := materialize.Metadata{}
	if !update || g.r.IntN(2) == 0 {
		md["bucket"] = float64(g.r.IntN(100))
	}
	if !update || g.r.IntN(3) == 0 {
		md["tag"] = fmt.Sprintf("t%d", g.r.IntN(5))
	}
	switch g.r.IntN(4) {
	case 0:
		md["flag"] = true
	case 1:
		md["flag"] = false
	case 2:
		if update {
			md["flag"] = nil // removes the key
		}
	}
	return md
}

func (g scanGen) add(id string) materialize.OperationRecord {
	doc := "doc of " + id
	return materialize.OperationRecord{Op: materialize.OpAdd, ID: id, Embedding: g.embedding(), Document: &doc, Metadata: g.metadata(false)}
}

// tailOp is an update (of the embedding, the metadata or both), an
// upsert (with an embedding, as the log requires), a delete or an add.
func (g scanGen) tailOp() materialize.OperationRecord {
	op := materialize.OperationRecord{ID: g.id()}
	switch g.r.IntN(5) {
	case 0:
		op.Op = materialize.OpDelete
		return op
	case 1:
		return g.add(op.ID)
	case 2:
		op.Op = materialize.OpUpsert
	default:
		op.Op = materialize.OpUpdate
	}
	if op.Op == materialize.OpUpsert || g.r.IntN(2) == 0 {
		op.Embedding = g.embedding()
	}
	if op.Embedding == nil || g.r.IntN(2) == 0 {
		op.Metadata = g.metadata(true)
	}
	return op
}

// filter returns a where filter of about 1 %, 10 % or 50 % selectivity
// on the bucket, alone or in an $and, $or or $in.
func (g scanGen) filter() string {
	pct := []int{1, 10, 50}[g.r.IntN(3)]
	lo := g.r.IntN(100 - pct + 1)
	rng := fmt.Sprintf(`{"$and": [{"bucket": {"$gte": %d}}, {"bucket": {"$lt": %d}}]}`, lo, lo+pct)
	switch g.r.IntN(5) {
	case 0:
		return fmt.Sprintf(`{"bucket": {"$lt": %d}}`, pct)
	case 1:
		in := make([]string, pct)
		for i, b := range g.r.Perm(100)[:pct] {
			in[i] = fmt.Sprint(b)
		}
		return fmt.Sprintf(`{"bucket": {"$in": [%s]}}`, strings.Join(in, ", "))
	case 2:
		return fmt.Sprintf(`{"$and": [%s, {"tag": {"$ne": "t%d"}}]}`, rng, g.r.IntN(5))
	case 3:
		return fmt.Sprintf(`{"$or": [%s, {"$and": [{"flag": true}, {"tag": "t%d"}, {"bucket": {"$lt": 2}}]}]}`, rng, g.r.IntN(5))
	}
	return rng
}

// A filtered query that the index prices as a scan (at a few thousand
// records, every filter) is answered from the index's memory, with the
// tail merged, and gives exactly the answer of an exact query (a scan of
// the blocks): the same ids, records, distances and order, with random
// filters of 1 %, 10 % and 50 % ($and, $or, $in), random tails of updates,
// upserts, deletes and adds, after incremental compactions and a restart
// (the graph decoded from its blobs), for every distance; it takes no scan
// slot and reads the blocks of its hits and of the tail's records alone.
// A cosine index whose distances are not the scan's scans the blocks.
func TestSelectiveFilterScansTheIndexAsTheBlocks(t *testing.T) {
	for _, d := range []vindex.Distance{vindex.DistanceL2, vindex.DistanceCosine, vindex.DistanceIP} {
		t.Run(d.String(), func(t *testing.T) {
			r := rand.New(rand.NewPCG(61, uint64(d)))
			e := newEnv(t, envConfig{maxRecords: 5000, batchRecords: 500, maxBlock: 64, minBlock: 16,
				seg: segment.Config{BlockCacheBytes: -1, DeltaMinBlocks: 2, DeltaMaxFraction: 0.5, DeltaFoldRecords: 200}})
			c, err := e.cat.CreateCollectionSpec(e.ctx, catalog.CollectionSpec{Name: "scan-" + d.String(),
				Index: catalog.IndexSettings{Distance: d, M: 8, EfConstruction: 32}})
			if err != nil {
				t.Fatal(err)
			}
			e.id = c.ID
			const n, dim = 1500, 6
			g := scanGen{r: r, ids: n + n/5, dim: dim}
			ops := make([]materialize.OperationRecord, n)
			for i := range ops {
				ops[i] = g.add(fmt.Sprintf("r%04d", i))
			}
			e.push(ops...)
			e.compactAll()

			scans := 0
			install := func() { e.comp.index = countingSource{c: e.comp, scans: &scans} }
			install()
			queries := func() [][]float32 {
				qs := [][]float32{g.embedding(), g.embedding()}
				ids := make([]string, 0, len(e.model))
				for id := range e.model {
					ids = append(ids, id)
				}
				slices.Sort(ids)
				return append(qs, slices.Clone(e.model[ids[r.IntN(len(ids))]].Embedding)) // distance 0
			}
			rounds := 6
			if raceEnabled {
				rounds = 4
			}
			checked := 0
			for round := range rounds {
				tail := make([]materialize.OperationRecord, r.IntN(60))
				for i := range tail {
					tail[i] = g.tailOp()
				}
				if len(tail) > 0 {
					e.push(tail...)
				}
				for range 8 {
					fs := g.filter()
					q := Query{Embeddings: queries(), K: []int{1, 10, 100}[r.IntN(3)], Where: mustWhere(t, fs), NoEmbeddings: r.IntN(2) == 0}
					before := scans
					got, err := e.comp.QueryRecords(e.ctx, e.id, q)
					if err != nil {
						t.Fatalf("round %d where %s: %v", round, fs, err)
					}
					if scans != before+1 {
						t.Fatalf("round %d where %s: %d in-memory scans, want 1", round, fs, scans-before)
					}
					q.Exact = true
					want, err := e.comp.QueryRecords(e.ctx, e.id, q)
					if err != nil {
						t.Fatalf("round %d where %s exact: %v", round, fs, err)
					}
					if scans != before+1 {
						t.Fatalf("round %d where %s: an exact query scanned the index", round, fs)
					}
					if !got.Exact || !want.Exact {
						t.Fatalf("round %d where %s: exact %v and %v, want both", round, fs, got.Exact, want.Exact)
					}
					for i := range q.Embeddings {
						if !reflect.DeepEqual(got.Hits[i], want.Hits[i]) {
							t.Fatalf("round %d where %s k %d no-embeddings %v, tail %d ops, query %d:\n got%s\nwant%s",
								round, fs, q.K, q.NoEmbeddings, len(tail), i, briefHits(got.Hits[i]), briefHits(want.Hits[i]))
						}
						checked += len(want.Hits[i])
					}
				}
				switch round {
				case 1, 3:
					e.compactAll() // an incremental successor of the graph
				case 2:
					e.restart() // the graph decoded from its blobs
					install()
				}
			}
			if checked < 100 {
				t.Fatalf("only %d hits compared", checked)
			}

			// No tail, k 1: the query reads the manifest and its hit's
			// block, the exact one every block, with every scan slot taken
			// (which only the exact one waits for).
			e.compactAll()
			q := Query{Embeddings: [][]float32{g.embedding()}, K: 1, Where: mustWhere(t, `{"bucket": {"$lt": 10}}`)}
			if _, err := e.comp.QueryRecords(e.ctx, e.id, q); err != nil {
				t.Fatal(err) // the version's metadata, read once
			}
			m := e.currentManifest()
			for range MaxConcurrentScans {
				e.comp.scans <- struct{}{}
			}
			e.faulty.Reset()
			got, err := e.comp.QueryRecords(e.ctx, e.id, q)
			if err != nil {
				t.Fatal(err)
			}
			if reads, most := e.faulty.Gets(), 2+len(m.Deltas); reads > most {
				t.Errorf("the in-memory scan read %d blobs, want at most %d: the manifest, %d deltas and one block", reads, most, len(m.Deltas))
			}
			for range MaxConcurrentScans {
				<-e.comp.scans
			}
			e.faulty.Reset()
			q.Exact = true
			want, err := e.comp.QueryRecords(e.ctx, e.id, q)
			if err != nil {
				t.Fatal(err)
			}
			if blocks := len(m.Blocks); e.faulty.Gets() < blocks {
				t.Errorf("the exact query read %d blobs of a version of %d blocks", e.faulty.Gets(), blocks)
			}
			if !reflect.DeepEqual(got.Hits, want.Hits) {
				t.Errorf("no tail:\n got%v\nwant%v", got.Hits, want.Hits)
			}

			// Distances the index cannot vouch for: the blocks are scanned.
			e.comp.index = countingSource{c: e.comp, scans: &scans, otherKernel: true}
			before := scans
			q.Exact = false
			other, err := e.comp.QueryRecords(e.ctx, e.id, q)
			if err != nil {
				t.Fatal(err)
			}
			if scans != before || !other.Exact || !reflect.DeepEqual(other.Hits, want.Hits) {
				t.Errorf("an index whose distances are not the scan's: %d in-memory scans, exact %v, hits %v; want a scan of the blocks",
					scans-before, other.Exact, other.Hits)
			}
		})
	}
}

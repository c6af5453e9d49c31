package compaction

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/compactorhq/compactor/internal/materialize"
)

// readFixture fills e with a segment of 200 records k-000..k-199 (blocks of
// at most 8) and a tail that exercises the read path: a run of 150 deletes
// (more than a page and than one tail read's rows), 300 updates of one id,
// ids only in the tail (before, between and after the segment's ids), an id
// added and deleted within the tail, an ADD of an existing id, upserts.
func readFixture(t *testing.T, e *env) {
	t.Helper()
	var base []materialize.OperationRecord
	for i := range 200 {
		base = append(base, materialize.OperationRecord{Op: materialize.OpAdd, ID: fmt.Sprintf("k-%03d", i), Embedding: emb(float32(i)), Document: doc("base")})
	}
	e.push(base...)
	e.compactAll()
	var tail []materialize.OperationRecord
	for i := 20; i < 170; i++ {
		tail = append(tail, materialize.OperationRecord{Op: materialize.OpDelete, ID: fmt.Sprintf("k-%03d", i)})
	}
	for i := range 300 {
		tail = append(tail, materialize.OperationRecord{Op: materialize.OpUpdate, ID: "k-005", Metadata: materialize.Metadata{"n": float64(i), fmt.Sprintf("key%d", i%3): nil}})
	}
	tail = append(tail,
		materialize.OperationRecord{Op: materialize.OpAdd, ID: "a-first", Embedding: emb(1)},
		materialize.OperationRecord{Op: materialize.OpAdd, ID: "k-050a", Embedding: emb(2)},
		materialize.OperationRecord{Op: materialize.OpUpsert, ID: "k-199z", Embedding: emb(3)},
		materialize.OperationRecord{Op: materialize.OpAdd, ID: "z-last", Embedding: emb(4)},
		materialize.OperationRecord{Op: materialize.OpAdd, ID: "k-100x", Embedding: emb(5)},
		materialize.OperationRecord{Op: materialize.OpDelete, ID: "k-100x"},
		materialize.OperationRecord{Op: materialize.OpAdd, ID: "k-007", Embedding: emb(6), Document: doc("ignored")},
		materialize.OperationRecord{Op: materialize.OpUpsert, ID: "k-008", Embedding: emb(8), Document: doc("upserted")},
		materialize.OperationRecord{Op: materialize.OpAdd, ID: "k-030", Embedding: emb(7), Document: doc("re-added")},
		materialize.OperationRecord{Op: materialize.OpUpdate, ID: "k-199", Metadata: materialize.Metadata{"last": true}},
	)
	for i := 0; i < len(tail); i += 97 {
		e.push(tail[i:min(i+97, len(tail))]...)
	}
}

// checkPages compares ListRecords with the model from many cursors (none,
// every id ever written, and between ids) and page sizes: each page is the
// model's next records after the cursor, and Next is its last id exactly
// when records remain.
func checkPages(t *testing.T, e *env, when string, cursors []string) {
	t.Helper()
	want := e.model.sorted()
	for _, after := range cursors {
		var rest []materialize.Record
		if i := slices.IndexFunc(want, func(r materialize.Record) bool { return r.ID > after }); i >= 0 {
			rest = want[i:]
		}
		for _, limit := range []int{1, 2, 7, 64, 1000} {
			res, err := e.comp.ListRecords(e.ctx, e.id, after, limit)
			if err != nil {
				t.Fatalf("%s: list after %q, limit %d: %v", when, after, limit, err)
			}
			page := rest[:min(limit, len(rest))]
			e.compare(fmt.Sprintf("%s: page after %q of %d", when, after, limit), res.Records, page)
			wantNext := ""
			if len(rest) > limit {
				wantNext = page[len(page)-1].ID
			}
			if res.Next != wantNext {
				t.Fatalf("%s: page after %q of %d: next %q, want %q", when, after, limit, res.Next, wantNext)
			}
		}
	}
}

// cursorsOf returns "", and every id ever written with the ids just before
// and after it (every step-th of them, and the ends).
func cursorsOf(ids []string, step int) []string {
	slices.Sort(ids)
	ids = slices.Compact(ids)
	cursors := []string{""}
	for i, id := range ids {
		if i%step == 0 || i == len(ids)-1 {
			cursors = append(cursors, id, id+"!", id[:len(id)-1])
		}
	}
	return cursors
}

// Pages from every kind of cursor match the model with a segment and a
// tail of deletes, updates and ids only in the tail; and still after each
// partial compaction until the tail is gone.
func TestPagesFromEveryCursorMatchTheModel(t *testing.T) {
	e := newEnv(t, envConfig{maxRecords: 150, batchRecords: 50, maxBlock: 8, minBlock: 2})
	readFixture(t, e)
	var ids []string
	for id := range e.model {
		ids = append(ids, id)
	}
	ids = append(ids, "k-020", "k-100", "k-169", "k-100x", "0", "zz")
	step := 5
	if raceEnabled {
		step = 23
	}
	cursors := cursorsOf(ids, step)
	checkPages(t, e, "segment and tail", cursors)
	e.check("segment and tail")
	for i := 0; ; i++ {
		res := e.compact()
		checkPages(t, e, fmt.Sprintf("after compaction %d", i), cursors)
		if res.Remaining == 0 {
			break
		}
	}
	e.check("compacted")
}

// A paged read that a compaction interrupts (the page's view is older than
// the commit, whose purge may remove the tail rows it needs) reads the page
// again on the new version.
func TestPageReadAgainWhenACompactionCommitsMeanwhile(t *testing.T) {
	e := newEnv(t, envConfig{maxRecords: 100, batchRecords: 50, maxBlock: 8, minBlock: 2})
	readFixture(t, e)
	stale := e.coll()
	want := e.model.sorted()[:10]
	e.compact() // commits a new version and purges tail rows
	res, moved, err := e.comp.listPage(e.ctx, stale, "", 10)
	if err != nil {
		t.Fatal(err)
	}
	if moved == nil || moved.SegmentVersion != stale.SegmentVersion+1 {
		t.Fatalf("a page of version %d read after the commit of the next: moved %+v, result %d records", stale.SegmentVersion, moved, len(res.Records))
	}
	got, err := e.comp.ListRecords(e.ctx, e.id, "", 10)
	if err != nil {
		t.Fatal(err)
	}
	e.compare("the page read on the new version", got.Records, want)
	if got.SegmentVersion != moved.SegmentVersion {
		t.Fatalf("page of version %d, want %d", got.SegmentVersion, moved.SegmentVersion)
	}
}

// Paging through a collection while compactions commit between the pages
// returns every record once, in order, the same as the model (nothing is
// pushed meanwhile): the invariant "the same records before and after any
// compaction" holds across the pages of one listing.
func TestPagingAcrossCompactions(t *testing.T) {
	for seed := range uint64(3) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 7))
			e := newEnv(t, envConfig{maxRecords: 1 + r.IntN(20), batchRecords: 1 + r.IntN(5), maxBlock: 4 + r.IntN(6), minBlock: 2})
			g := gen{r: r, ids: 60, dim: 3}
			for round := range 6 {
				e.push(g.batch(40 + r.IntN(80))...)
				want := e.model.sorted()
				var got []materialize.Record
				after := ""
				for range 10_000 {
					if r.IntN(3) == 0 {
						e.compact()
					}
					res, err := e.comp.ListRecords(e.ctx, e.id, after, 1+r.IntN(9))
					if err != nil {
						t.Fatal(err)
					}
					got = append(got, res.Records...)
					if res.Next == "" {
						break
					}
					after = res.Next
				}
				e.compare(fmt.Sprintf("round %d: pages across compactions", round), got, want)
			}
		})
	}
}

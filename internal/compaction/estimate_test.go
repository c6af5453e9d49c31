package compaction

import (
	"fmt"
	"testing"

	"github.com/compactorhq/compactor/internal/jobtype"
	"github.com/compactorhq/compactor/internal/materialize"
)

func TestEstimateCountsTheBlocksTheNextCompactionRewrites(t *testing.T) {
	e := newEnv(t, envConfig{maxRecords: 1000, batchRecords: 7, maxBlock: 10, minBlock: 5})
	version := float32(0)
	add := func(ids ...int) []materialize.OperationRecord {
		version++ // every call changes the records it names
		var ops []materialize.OperationRecord
		for _, i := range ids {
			ops = append(ops, materialize.OperationRecord{Op: materialize.OpUpsert, ID: fmt.Sprintf("id-%03d", i), Embedding: emb(float32(i) + version)})
		}
		return ops
	}
	if est, err := e.comp.Estimate(e.ctx, e.id); err != nil || est != (jobtype.Estimate{}) {
		t.Fatalf("estimate of an empty collection: %+v, %v", est, err)
	}
	var base []int
	for i := range 100 {
		base = append(base, i*10) // ids id-000 .. id-990, ten blocks of ten
	}
	e.push(add(base...)...)
	est, err := e.comp.Estimate(e.ctx, e.id)
	if err != nil {
		t.Fatal(err)
	}
	if est.OpRecords != 100 || est.BlocksTotal != 0 || est.BlocksToRewrite != 0 || est.BytesToRewrite != 0 {
		t.Fatalf("estimate before the first version: %+v", est)
	}
	e.compactAll()
	m, err := e.seg.ReadManifest(e.ctx, e.coll().ManifestKey)
	if err != nil {
		t.Fatal(err)
	}
	// Two updates in the first block, one in the last, and one id past
	// every block: two blocks rewritten, one new record.
	e.push(add(0, 10, 990, 995)...)
	est, err = e.comp.Estimate(e.ctx, e.id)
	if err != nil {
		t.Fatal(err)
	}
	first, last := m.Blocks[0], m.Blocks[len(m.Blocks)-1]
	var total, records int64
	for _, b := range m.Blocks {
		total, records = total+b.Bytes, records+b.Records
	}
	want := jobtype.Estimate{OpRecords: 4, BlocksTotal: len(m.Blocks), BlocksToRewrite: 2, BytesToRewrite: first.Bytes + last.Bytes + total/records,
		Indexed: true, VectorsToInsert: 4} // four upserts with embeddings, into the index incrementally
	if first.MaxID < "id-010" || last.MinID > "id-990" || last.MaxID != "id-990" {
		t.Fatalf("test setup: blocks %+v do not have the assumed ranges", m.Blocks)
	}
	if est != want {
		t.Fatalf("estimate %+v, want %+v", est, want)
	}
	if res := e.compact(); res.BlocksReused != len(m.Blocks)-est.BlocksToRewrite {
		t.Fatalf("the compaction reused %d blocks of %d; the estimate said it would rewrite %d", res.BlocksReused, len(m.Blocks), est.BlocksToRewrite)
	}
}

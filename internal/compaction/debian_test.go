package compaction

import (
	"reflect"
	"testing"

	"github.com/compactorhq/compactor/internal/materialize"
	"github.com/compactorhq/compactor/internal/sampletest"
)

// TestDebianSample loads the real sample (Debian package records with
// 64-dim embeddings): the base load as ADD, then the security and point
// updates as UPSERT, and checks the figures of testdata's README: 5,000
// records; each of the 216 updated packages carries the metadata of its last
// update line, 104 of them with a version different from the base. A read
// returns the same records before and after compaction.
func TestDebianSample(t *testing.T) {
	base, updates := sampletest.Base(t), sampletest.Updates(t)
	if len(base) != 5000 || len(updates) != 217 {
		t.Fatalf("sample has %d base and %d update lines, want 5000 and 217", len(base), len(updates))
	}
	e := newEnv(t, envConfig{maxRecords: 2000, batchRecords: 500, maxBlock: 1024, minBlock: 256})
	for i := 0; i < len(base); i += 1000 {
		e.push(base[i:min(i+1000, len(base))]...)
	}
	e.compactAll() // several jobs: 2,000 records each
	e.push(updates...)

	before, err := e.comp.ListRecords(e.ctx, e.id, "", 10_000)
	if err != nil {
		t.Fatal(err)
	}
	e.compactAll()
	after, err := e.comp.ListRecords(e.ctx, e.id, "", 10_000)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(before.Records, after.Records) {
		t.Fatal("compaction changed what a read returns")
	}
	e.compare("the sample after compaction", after.Records, e.model.sorted())
	if len(after.Records) != 5000 || e.coll().RecordCount != 5000 {
		t.Fatalf("%d records (catalog %d), want 5,000", len(after.Records), e.coll().RecordCount)
	}

	byID := make(map[string]materialize.Record, len(after.Records))
	for _, r := range after.Records {
		byID[r.ID] = r
	}
	baseVersion := make(map[string]any, len(base))
	for _, op := range base {
		baseVersion[op.ID] = op.Metadata["version"]
	}
	last := map[string]materialize.OperationRecord{}
	for _, op := range updates {
		last[op.ID] = op
	}
	if len(last) != 216 {
		t.Fatalf("%d updated ids, want 216", len(last))
	}
	changed := 0
	for id, op := range last {
		r, ok := byID[id]
		if !ok {
			t.Fatalf("updated package %s is missing", id)
		}
		for k, v := range op.Metadata {
			if !reflect.DeepEqual(r.Metadata[k], v) {
				t.Fatalf("%s: metadata %s = %v, want %v from its last update", id, k, r.Metadata[k], v)
			}
		}
		if !reflect.DeepEqual(r.Embedding, op.Embedding) {
			t.Fatalf("%s: embedding is not its last update's", id)
		}
		if r.Metadata["version"] != baseVersion[id] {
			changed++
		}
	}
	if changed != 104 {
		t.Fatalf("%d updated packages have a version different from the base, want 104", changed)
	}
	e.checkNoGarbage("after the sample")
}

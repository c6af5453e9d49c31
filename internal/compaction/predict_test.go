package compaction

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"syscall"
	"testing"

	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/jobtype"
	"github.com/compactorhq/compactor/internal/materialize"
	"github.com/compactorhq/compactor/internal/segment"
)

// countedEnv is newEnv with the segment store's blobs counted (CountBlobs,
// as the binary wires them) and no decoded block cache, so that every
// block a compaction rewrites is a blob GET.
func countedEnv(t *testing.T, ec envConfig) *env {
	t.Helper()
	ec.seg.BlockCacheBytes = -1
	e := newEnv(t, ec)
	scfg := ec.seg
	scfg.MaxBlockRecords, scfg.MinBlockRecords, scfg.BlockCacheBytes = ec.maxBlock, ec.minBlock, 0
	e.seg = segment.NewStore(CountBlobs(e.blobs), scfg, e.clock.Now)
	cfg := DefaultConfig()
	cfg.MaxRecords, cfg.BatchRecords = ec.maxRecords, ec.batchRecords
	var err error
	if e.comp, err = New(e.cat, e.seg, cfg, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.comp.WaitPurges)
	return e
}

// within reports whether actual is within frac of predicted.
func within(actual, predicted int64, frac float64) bool {
	return math.Abs(float64(actual-predicted)) <= frac*float64(predicted)
}

// TestEstimatePredictsTheCompactionItPrices runs real compactions of a
// seeded collection (SQLite catalog, blobs in memory, the vector index on)
// and checks each one against the estimate made just before it (which
// must equal the one the compaction makes from its own read of the slice,
// Options.OnEstimate), with the tolerances the README states:
//   - operation records: exact; blocks rewritten: exact;
//   - blob PUTs: exact for copy-on-write compactions and deltas (blocks,
//     manifest, index graph and chunk);
//   - blob GETs: exact with a cold block cache (a warm cache only lowers
//     them);
//   - bytes of blocks and manifest written (a job's bytes_written): within
//     10 % (the bytes per record of the version's blocks; for the first
//     compaction, of a block of the slice's first records encoded as a
//     sample); every byte written, the vector index's included: within
//     35 % (the graph's size per node varies with its links and repairs);
//   - bytes read: within 10 %; vectors inserted: at least the actual (an
//     upper bound: an ADD of an id present is ignored).
func TestEstimatePredictsTheCompactionItPrices(t *testing.T) {
	e := countedEnv(t, envConfig{maxRecords: 100_000, batchRecords: 1000, maxBlock: 200, minBlock: 100})
	r := rand.New(rand.NewPCG(7, 8))
	vec := func() []float32 {
		v := make([]float32, 16)
		for i := range v {
			v[i] = r.Float32()
		}
		return v
	}
	op := func(kind materialize.Op, i int) materialize.OperationRecord {
		o := materialize.OperationRecord{Op: kind, ID: fmt.Sprintf("id-%05d", i)}
		if kind != materialize.OpDelete {
			o.Embedding = vec()
			o.Document = doc(fmt.Sprintf("document %d with some text", i))
			o.Metadata = map[string]any{"n": float64(i), "tag": "t"}
		}
		return o
	}
	type step struct {
		name      string
		ops       func() []materialize.OperationRecord
		bytesFrac float64
	}
	steps := []step{
		{"first compaction of 4,000 records, with updates and deletes of records added in the same slice", func() []materialize.OperationRecord {
			var ops []materialize.OperationRecord
			for i := range 4000 {
				ops = append(ops, op(materialize.OpUpsert, i*10))
				if i%10 == 9 {
					ops = append(ops, op(materialize.OpUpdate, (i-5)*10))
				}
				if i%4 == 0 && i < 1200 { // 300 added, 200 of them deleted again
					ops = append(ops, op(materialize.OpUpsert, i*10+5))
				}
				if i%6 == 2 && i < 1200 {
					ops = append(ops, op(materialize.OpDelete, (i-2)*10+5))
				}
			}
			return ops
		}, 0.10},
		{"updates of 400 ids in a quarter of the blocks and 100 new ids", func() []materialize.OperationRecord {
			var ops []materialize.OperationRecord
			for i := range 400 {
				ops = append(ops, op(materialize.OpUpsert, (i%1000)*10))
			}
			for i := range 100 {
				ops = append(ops, op(materialize.OpUpsert, 40_000+i))
			}
			return ops
		}, 0.10},
		{"deletes spread over every block", func() []materialize.OperationRecord {
			var ops []materialize.OperationRecord
			for i := range 300 {
				ops = append(ops, op(materialize.OpDelete, i*130+10))
			}
			return ops
		}, 0.10},
		{"a few updates spread wide: one delta", func() []materialize.OperationRecord {
			var ops []materialize.OperationRecord
			for i := range 12 {
				ops = append(ops, op(materialize.OpUpsert, i*3000+20))
			}
			return ops
		}, 0.10},
	}
	for _, s := range steps {
		e.push(s.ops()...)
		est, err := e.comp.Estimate(e.ctx, e.id)
		if err != nil {
			t.Fatalf("%s: estimate: %v", s.name, err)
		}
		// The compaction prices itself from the slice it reads: the same
		// figures as the estimate's own scan.
		var inline []jobtype.Estimate
		res, err := e.comp.Compact(e.ctx, e.id, Options{OnEstimate: func(est jobtype.Estimate) { inline = append(inline, est) }})
		if err != nil {
			t.Fatalf("%s: compact: %v", s.name, err)
		}
		if len(inline) != 1 || inline[0] != est {
			t.Errorf("%s: the compaction's own estimates %+v; want one, %+v", s.name, inline, est)
		}
		a := res.Outcome().Actual
		t.Logf("%s:\n  predicted %+v\n  actual    records %d, written %d, bytes %d (blob %d), read %d, gets %d, puts %d, blocks %d, deltas %d, vectors %d (%s)",
			s.name, est, res.OpRecordsRead, res.RecordsWritten, res.BytesWritten, a.BytesWritten, a.BytesRead, a.BlobGets, a.BlobPuts, a.BlocksWritten, a.DeltasWritten, a.VectorsIndexed, a.IndexBuild)
		checkPrediction(t, s.name, est, res, s.bytesFrac)
	}
}

func checkPrediction(t *testing.T, name string, est jobtype.Estimate, res Result, bytesFrac float64) {
	t.Helper()
	a := res.Outcome().Actual
	if est.OpRecords != res.OpRecordsRead {
		t.Errorf("%s: predicted %d operation records, read %d", name, est.OpRecords, res.OpRecordsRead)
	}
	if est.Delta != (a.DeltasWritten == 1) {
		t.Errorf("%s: predicted delta %v, wrote %d deltas", name, est.Delta, a.DeltasWritten)
	}
	if !est.Delta && est.BlocksTotal > 0 && est.BlocksToRewrite != est.BlocksTotal-res.BlocksReused {
		t.Errorf("%s: predicted %d blocks rewritten, the compaction reused %d of %d", name, est.BlocksToRewrite, res.BlocksReused, est.BlocksTotal)
	}
	if est.BlobPuts != a.BlobPuts {
		t.Errorf("%s: predicted %d blob PUTs, made %d", name, est.BlobPuts, a.BlobPuts)
	}
	if est.BlobGets != a.BlobGets {
		t.Errorf("%s: predicted %d blob GETs, made %d", name, est.BlobGets, a.BlobGets)
	}
	if !within(res.BytesWritten, est.BytesWritten-est.IndexBytes, bytesFrac) {
		t.Errorf("%s: predicted %d bytes of blocks and manifest written, wrote %d (tolerance %.0f %%)", name, est.BytesWritten-est.IndexBytes, res.BytesWritten, bytesFrac*100)
	}
	if !within(a.BytesWritten, est.BytesWritten, 0.35) {
		t.Errorf("%s: predicted %d bytes written in all, wrote %d (tolerance 35 %%)", name, est.BytesWritten, a.BytesWritten)
	}
	if est.BlocksTotal > 0 && !within(a.BytesRead, est.BytesRead, 0.10) {
		t.Errorf("%s: predicted %d bytes read, read %d (tolerance 10 %%)", name, est.BytesRead, a.BytesRead)
	}
	if est.VectorsToInsert < a.VectorsIndexed {
		t.Errorf("%s: predicted %d vectors inserted, the index took %d", name, est.VectorsToInsert, a.VectorsIndexed)
	}
}

func TestClassifyTellsInfrastructureDataAndInternalFailuresApart(t *testing.T) {
	corrupt := &segment.CorruptError{Kind: segment.KindBlock, CollectionID: "c", Key: "c/b1", Err: segment.ErrCorrupt}
	for _, tc := range []struct {
		name string
		err  error
		want jobtype.FailureClass
	}{
		{"success", nil, ""},
		{"a blob store error marked transient", transient(errors.New("dial tcp: connection refused")), jobtype.FailureInfrastructure},
		{"the catalog unavailable", fmt.Errorf("read log: %w", catalog.ErrUnavailable), jobtype.FailureInfrastructure},
		{"a lost compare-and-swap", fmt.Errorf("commit: %w", catalog.ErrConflict), jobtype.FailureInfrastructure},
		{"a full disk", &catalog.StorageFullError{Store: catalog.StoreBlobs, Code: "ENOSPC", Err: syscall.ENOSPC}, jobtype.FailureInfrastructure},
		{"a corrupt block", fmt.Errorf("compact c: %w", corrupt), jobtype.FailureData},
		{"a corrupt block read through a flaky store", transient(corrupt), jobtype.FailureData},
		{"a log row that does not decode", fmt.Errorf("read log: %w", materialize.ErrCorruptRecord), jobtype.FailureData},
		{"a block too large to decode", fmt.Errorf("write: %w", segment.ErrBlockTooLarge), jobtype.FailureData},
		{"an error nobody classified", errors.New("index out of range"), jobtype.FailureInternal},
	} {
		if got := Classify(tc.err); got != tc.want {
			t.Errorf("%s: Classify(%v) = %q, want %q", tc.name, tc.err, got, tc.want)
		}
	}
}

package compaction

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/catalog/catalogtest"
	"github.com/compactorhq/compactor/internal/materialize"
	"github.com/compactorhq/compactor/internal/segment"
	"github.com/compactorhq/compactor/internal/segment/segmenttest"
)

// corruptEnv is several collections over one SQLite catalog (whose file the
// test can write behind the catalog's back) and one blob store.
type corruptEnv struct {
	t     *testing.T
	ctx   context.Context
	path  string
	cat   *catalog.Catalog
	blobs segment.Blobs
	seg   *segment.Store
	comp  *Compactor
	reg   *prometheus.Registry
}

func newCorruptEnv(t *testing.T) *corruptEnv {
	e := &corruptEnv{t: t, ctx: context.Background(), path: filepath.Join(t.TempDir(), "catalog.db"), reg: prometheus.NewRegistry()}
	e.cat = catalogtest.OpenConfig(t, catalog.Config{DSN: e.path})
	e.blobs = segmenttest.NewMem(t)
	e.seg = segment.NewStore(e.blobs, segment.Config{MaxBlockRecords: 8}, nil)
	var err error
	if e.comp, err = New(e.cat, e.seg, DefaultConfig(), nil, WithRegisterer(e.reg)); err != nil {
		t.Fatal(err)
	}
	return e
}

// collection creates a collection holding n compacted records c-000.. and
// one more record in its log.
func (e *corruptEnv) collection(name string, n int) string {
	e.t.Helper()
	c, err := e.cat.CreateCollection(e.ctx, name, 0)
	if err != nil {
		e.t.Fatal(err)
	}
	e.push(c.ID, 0, n)
	if _, err := e.comp.Compact(e.ctx, c.ID, Options{}); err != nil {
		e.t.Fatal(err)
	}
	// The test writes the database on a connection of its own: no purge
	// of the compactor's may hold the write lock then.
	e.comp.WaitPurges()
	e.push(c.ID, n, n+1)
	return c.ID
}

func (e *corruptEnv) push(id string, from, to int) {
	e.t.Helper()
	var ops []materialize.OperationRecord
	for i := from; i < to; i++ {
		ops = append(ops, materialize.OperationRecord{Op: materialize.OpUpsert, ID: fmt.Sprintf("c-%03d", i), Embedding: []float32{float32(i)}})
	}
	if _, _, err := e.cat.AppendLog(e.ctx, id, ops, catalog.AppendLimits{}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *corruptEnv) manifest(id string) (string, *segment.Manifest) {
	e.t.Helper()
	c, err := e.cat.GetCollection(e.ctx, id)
	if err != nil {
		e.t.Fatal(err)
	}
	m, err := e.seg.ReadManifest(e.ctx, c.ManifestKey)
	if err != nil {
		e.t.Fatal(err)
	}
	return c.ManifestKey, m
}

// wantCorrupt checks that err is damaged data of kind, not transient, and
// names the collection and what is damaged.
func wantCorrupt(t *testing.T, what string, err error, kind, collectionID, names string) {
	t.Helper()
	got, ok := CorruptKind(err)
	switch {
	case !ok || got != kind:
		t.Errorf("%s: %v, want corrupt data of kind %s", what, err, kind)
	case IsTransient(err):
		t.Errorf("%s: %v is marked transient", what, err)
	case !strings.Contains(err.Error(), collectionID) || !strings.Contains(err.Error(), names):
		t.Errorf("%s: %q does not name the collection %s and %s", what, err, collectionID, names)
	}
}

// One damaged collection fails its reads and compactions with a
// non-transient error naming what is damaged; the others keep working; the
// metric counts each failure by kind.
func TestCorruptDataFailsOnlyItsCollection(t *testing.T) {
	e := newCorruptEnv(t)
	badBlock := e.collection("bad-block", 20)
	badManifest := e.collection("bad-manifest", 20)
	badLog := e.collection("bad-log", 20)
	good := e.collection("good", 20)

	// A block replaced by garbage, a manifest by truncated JSON, a log
	// row by bytes MarshalBinary never writes.
	_, m := e.manifest(badBlock)
	blockKey := m.Blocks[len(m.Blocks)-1].Key // the block the new record c-020 goes to
	if err := e.blobs.Put(e.ctx, blockKey, []byte("PAR1 not a block PAR1")); err != nil {
		t.Fatal(err)
	}
	manifestKey, _ := e.manifest(badManifest)
	if err := e.blobs.Put(e.ctx, manifestKey, []byte(`{"format_version": 1, "collection_id": "`)); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", e.path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if r, err := db.ExecContext(e.ctx, `UPDATE log SET record = ? WHERE collection_id = ?`, []byte{1, 9, 1, 'x'}, badLog); err != nil {
		t.Fatal(err)
	} else if n, _ := r.RowsAffected(); n != 1 {
		t.Fatalf("%d log rows changed, want 1", n)
	}

	ids := []string{"c-001", "c-010", "c-019", "c-020"}
	for _, c := range []struct{ id, kind, names string }{
		{badBlock, segment.KindBlock, blockKey},
		{badManifest, segment.KindManifest, manifestKey},
		{badLog, KindLogRow, "offset 21"},
	} {
		_, err := e.comp.Compact(e.ctx, c.id, Options{})
		wantCorrupt(t, "compaction of "+c.kind, err, c.kind, c.id, c.names)
		_, err = e.comp.GetRecords(e.ctx, c.id, ids)
		wantCorrupt(t, "read by ids of "+c.kind, err, c.kind, c.id, c.names)
		_, err = e.comp.ListRecords(e.ctx, c.id, "", 100)
		wantCorrupt(t, "paged read of "+c.kind, err, c.kind, c.id, c.names)
	}

	// The healthy collection compacts and reads as if nothing happened.
	if res, err := e.comp.Compact(e.ctx, good, Options{}); err != nil || res.OpRecordsRead != 1 {
		t.Fatalf("compaction of the healthy collection: %+v, %v", res, err)
	}
	res, err := e.comp.GetRecords(e.ctx, good, ids)
	if err != nil || len(res.Records) != len(ids) {
		t.Fatalf("read of the healthy collection: %d records, %v", len(res.Records), err)
	}
	page, err := e.comp.ListRecords(e.ctx, good, "", 100)
	if err != nil || len(page.Records) != 21 {
		t.Fatalf("paged read of the healthy collection: %d records, %v", len(page.Records), err)
	}

	if err := testutil.GatherAndCompare(e.reg, strings.NewReader(`
# HELP compactor_corrupt_blocks_total Reads and compactions that failed on a corrupt segment block, delta, manifest or log row, by kind. A damaged blob counts at every read that meets it: any increase needs an operator (the log and the collection's last job name the collection and the blob).
# TYPE compactor_corrupt_blocks_total counter
compactor_corrupt_blocks_total{kind="block"} 3
compactor_corrupt_blocks_total{kind="delta"} 0
compactor_corrupt_blocks_total{kind="index"} 0
compactor_corrupt_blocks_total{kind="log_row"} 3
compactor_corrupt_blocks_total{kind="manifest"} 3
`), "compactor_corrupt_blocks_total"); err != nil {
		t.Error(err)
	}
	if problems, err := testutil.GatherAndLint(e.reg); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}

// A block or manifest deleted from the blob store while the current version
// lists it is data loss: reads and compactions fail with a non-transient
// error naming the key (so that the manager dead-letters the collection
// instead of retrying it for ever), counted by kind.
func TestMissingBlobOfTheCurrentVersionIsDataLoss(t *testing.T) {
	e := newCorruptEnv(t)
	noBlock := e.collection("no-block", 20)
	noManifest := e.collection("no-manifest", 20)

	_, m := e.manifest(noBlock)
	blockKey := m.Blocks[len(m.Blocks)-1].Key // the block the new record c-020 goes to
	if err := e.blobs.Delete(e.ctx, blockKey); err != nil {
		t.Fatal(err)
	}
	manifestKey, _ := e.manifest(noManifest)
	if err := e.blobs.Delete(e.ctx, manifestKey); err != nil {
		t.Fatal(err)
	}
	ids := []string{"c-001", "c-010", "c-019", "c-020"}
	for _, c := range []struct{ id, kind, key string }{
		{noBlock, segment.KindBlock, blockKey},
		{noManifest, segment.KindManifest, manifestKey},
	} {
		_, err := e.comp.Compact(e.ctx, c.id, Options{})
		wantCorrupt(t, "compaction without its "+c.kind, err, c.kind, c.id, c.key)
		_, err = e.comp.GetRecords(e.ctx, c.id, ids)
		wantCorrupt(t, "read by ids without its "+c.kind, err, c.kind, c.id, c.key)
		_, err = e.comp.ListRecords(e.ctx, c.id, "", 100)
		wantCorrupt(t, "paged read without its "+c.kind, err, c.kind, c.id, c.key)
		if err == nil || !strings.Contains(err.Error(), "missing") {
			t.Errorf("paged read without its %s: %v, want it said missing", c.kind, err)
		}
	}
	if e.comp.readRetries.Load() != 0 {
		t.Errorf("%d reads retried: the version read is the current one", e.comp.readRetries.Load())
	}
	if err := testutil.GatherAndCompare(e.reg, strings.NewReader(`
# HELP compactor_corrupt_blocks_total Reads and compactions that failed on a corrupt segment block, delta, manifest or log row, by kind. A damaged blob counts at every read that meets it: any increase needs an operator (the log and the collection's last job name the collection and the blob).
# TYPE compactor_corrupt_blocks_total counter
compactor_corrupt_blocks_total{kind="block"} 3
compactor_corrupt_blocks_total{kind="delta"} 0
compactor_corrupt_blocks_total{kind="index"} 0
compactor_corrupt_blocks_total{kind="log_row"} 0
compactor_corrupt_blocks_total{kind="manifest"} 3
`), "compactor_corrupt_blocks_total"); err != nil {
		t.Error(err)
	}
}

func TestLogPurgeMetricsCountRowsAndRunningPurges(t *testing.T) {
	e := newCorruptEnv(t)
	e.collection("purged", 12) // 12 rows compacted, then purged; 1 row left in the log
	if got := testutil.ToFloat64(e.comp.purgem.rows); got != 12 {
		t.Errorf("compactor_log_purged_rows_total = %v after one compaction of 12 rows, want 12", got)
	}
	if got := testutil.ToFloat64(e.comp.purgem.running); got != 0 {
		t.Errorf("compactor_log_purges_running = %v once the purges ended, want 0", got)
	}
}

package compaction

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/catalog/catalogtest"
	"github.com/compactorhq/compactor/internal/clock"
	"github.com/compactorhq/compactor/internal/materialize"
	"github.com/compactorhq/compactor/internal/segment"
	"github.com/compactorhq/compactor/internal/segment/segmenttest"
)

// model is the plain in-memory model of a collection the storage tests
// compare reads with: each operation is applied at once, with the rules
// written out again here independently of package materialize.
type model map[string]materialize.Record

func (m model) apply(op materialize.OperationRecord) {
	cur, present := m[op.ID]
	switch op.Op {
	case materialize.OpAdd:
		if !present {
			m[op.ID] = fresh(op)
		}
	case materialize.OpUpsert:
		if present {
			m[op.ID] = merged(cur, op)
		} else {
			m[op.ID] = fresh(op)
		}
	case materialize.OpUpdate:
		if present {
			m[op.ID] = merged(cur, op)
		}
	case materialize.OpDelete:
		delete(m, op.ID)
	}
}

func fresh(op materialize.OperationRecord) materialize.Record {
	r := materialize.Record{ID: op.ID, Embedding: slices.Clone(op.Embedding), Document: op.Document}
	for k, v := range op.Metadata {
		if v != nil {
			if r.Metadata == nil {
				r.Metadata = materialize.Metadata{}
			}
			r.Metadata[k] = v
		}
	}
	return r
}

func merged(cur materialize.Record, op materialize.OperationRecord) materialize.Record {
	r := materialize.Record{ID: cur.ID, Embedding: cur.Embedding, Document: cur.Document, Metadata: maps.Clone(cur.Metadata)}
	if op.Embedding != nil {
		r.Embedding = slices.Clone(op.Embedding)
	}
	if op.Document != nil {
		r.Document = op.Document
	}
	for k, v := range op.Metadata {
		if v == nil {
			delete(r.Metadata, k)
		} else {
			if r.Metadata == nil {
				r.Metadata = materialize.Metadata{}
			}
			r.Metadata[k] = v
		}
	}
	if len(r.Metadata) == 0 {
		r.Metadata = nil
	}
	return r
}

func (m model) sorted() []materialize.Record {
	out := make([]materialize.Record, 0, len(m))
	for _, id := range slices.Sorted(maps.Keys(m)) {
		out = append(out, m[id])
	}
	return out
}

// crashable is a blob store that can "die": once dead every Put and Delete
// fails, as if the process had stopped, so nothing is cleaned up.
type crashable struct {
	segment.Blobs
	mu   sync.Mutex
	dead bool
}

func (c *crashable) kill(dead bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dead = dead
}

func (c *crashable) isDead() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dead
}

func (c *crashable) Put(ctx context.Context, key string, data []byte) error {
	if c.isDead() {
		return fmt.Errorf("put %s: process gone", key)
	}
	return c.Blobs.Put(ctx, key, data)
}

func (c *crashable) Delete(ctx context.Context, key string) error {
	if c.isDead() {
		return fmt.Errorf("delete %s: process gone", key)
	}
	return c.Blobs.Delete(ctx, key)
}

// env is one collection over a real SQLite catalog and an in-memory blob
// store with fault injection and a fake clock.
type env struct {
	t      testing.TB
	ctx    context.Context
	cat    *catalog.Catalog
	clock  *clock.Fake
	faulty *segmenttest.FaultyBlobs
	crash  *crashable
	blobs  *segmenttest.Clocked
	seg    *segment.Store
	comp   *Compactor
	id     string
	model  model
}

type envConfig struct {
	maxRecords, batchRecords int
	maxBlock, minBlock       int
	// spill, when set, makes the compactor's memory budget a few hundred
	// bytes, below what Validate accepts, so that nearly every log batch is
	// a sorted run spilled to a temp dir.
	spill bool
	// seg sets the delta fields of the segment.Config (the block sizes
	// come from maxBlock and minBlock). Its BlockCacheBytes 0 gives a
	// decoded block cache of 256 KiB (small, so that reads also evict);
	// negative: no cache.
	seg segment.Config
	// noIndex creates the collection with indexing off (tests of the
	// blocks over many records, which an HNSW build under -race would
	// slow down by minutes).
	noIndex bool
}

func newEnv(t testing.TB, ec envConfig) *env {
	t.Helper()
	e := &env{t: t, ctx: context.Background(), model: model{}}
	e.clock = clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	// Exclusive, as compactor serve opens a SQLite catalog: reads of an
	// empty tail are then answered from the remembered collection rows.
	e.cat = catalogtest.OpenConfig(t, catalog.Config{Now: e.clock.Now, Exclusive: true, Holder: "test"})
	e.faulty = segmenttest.NewFaulty(segmenttest.NewMem(t))
	e.crash = &crashable{Blobs: e.faulty}
	e.blobs = segmenttest.NewClocked(e.crash, e.clock.Now)
	scfg := ec.seg
	scfg.MaxBlockRecords, scfg.MinBlockRecords = ec.maxBlock, ec.minBlock
	switch {
	case scfg.BlockCacheBytes == 0:
		scfg.BlockCacheBytes = 256 << 10
	case scfg.BlockCacheBytes < 0:
		scfg.BlockCacheBytes = 0
	}
	e.seg = segment.NewStore(e.blobs, scfg, e.clock.Now)
	cfg := DefaultConfig()
	cfg.MaxRecords, cfg.BatchRecords = ec.maxRecords, ec.batchRecords
	var err error
	if e.comp, err = New(e.cat, e.seg, cfg, nil); err != nil {
		t.Fatal(err)
	}
	if ec.spill {
		e.comp.cfg.MemoryBytes, e.comp.cfg.SpillDir = 600, t.TempDir()
	}
	t.Cleanup(e.comp.WaitPurges)
	c, err := e.cat.CreateCollectionSpec(e.ctx, catalog.CollectionSpec{Name: "test", Index: catalog.IndexSettings{Disabled: ec.noIndex}})
	if err != nil {
		t.Fatal(err)
	}
	e.id = c.ID
	return e
}

// push appends ops to the log and to the model.
func (e *env) push(ops ...materialize.OperationRecord) {
	e.t.Helper()
	if _, _, err := e.cat.AppendLog(e.ctx, e.id, ops, catalog.AppendLimits{}); err != nil {
		e.t.Fatalf("append %d ops: %v", len(ops), err)
	}
	for _, op := range ops {
		e.model.apply(op)
	}
}

func (e *env) compact() Result {
	e.t.Helper()
	res, err := e.comp.Compact(e.ctx, e.id, Options{})
	if err != nil {
		e.t.Fatalf("compact: %v", err)
	}
	return res
}

// compactAll compacts until the backlog is empty.
func (e *env) compactAll() {
	e.t.Helper()
	for range 10_000 {
		if res := e.compact(); res.Remaining == 0 {
			return
		}
	}
	e.t.Fatal("backlog never emptied")
}

func (e *env) coll() catalog.Collection {
	e.t.Helper()
	c, err := e.cat.GetCollection(e.ctx, e.id)
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

// check compares every read path with the model: a paged listing with a
// small page, and GetRecords of every id the model has plus absent ones.
func (e *env) check(when string) {
	e.t.Helper()
	want := e.model.sorted()
	var got []materialize.Record
	after := ""
	for range 100_000 {
		res, err := e.comp.ListRecords(e.ctx, e.id, after, 7)
		if err != nil {
			e.t.Fatalf("%s: list records after %q: %v", when, after, err)
		}
		got = append(got, res.Records...)
		if res.Next == "" {
			break
		}
		after = res.Next
	}
	e.compare(when+": paged listing", got, want)
	ids := append(slices.Sorted(maps.Keys(e.model)), "absent-1", "zzz-absent")
	res, err := e.comp.GetRecords(e.ctx, e.id, ids)
	if err != nil {
		e.t.Fatalf("%s: get records: %v", when, err)
	}
	e.compare(when+": get by ids", res.Records, want)
}

func (e *env) compare(what string, got, want []materialize.Record) {
	e.t.Helper()
	if len(got) == 0 && len(want) == 0 {
		return
	}
	if !reflect.DeepEqual(got, want) {
		e.t.Fatalf("%s differs from the model:\n got %d records: %s\nwant %d records: %s", what, len(got), brief(got), len(want), brief(want))
	}
}

func brief(rs []materialize.Record) string {
	var b strings.Builder
	for i, r := range rs {
		if i == 12 {
			fmt.Fprintf(&b, " …")
			break
		}
		doc := "<nil>"
		if r.Document != nil {
			doc = *r.Document
		}
		fmt.Fprintf(&b, " {%s %v %s %v}", r.ID, r.Embedding, doc, r.Metadata)
	}
	return b.String()
}

// checkNoGarbage runs GC twice, a grace period apart (the first retires
// superseded versions, the second collects them), and asserts that every
// blob left is referenced by a retained version: its manifest or one of its
// blocks.
func (e *env) checkNoGarbage(when string) {
	e.t.Helper()
	e.crash.kill(false)
	for range 2 {
		e.clock.Advance(2 * DefaultConfig().GCGrace)
		if _, err := e.comp.GC(e.ctx, e.id); err != nil {
			e.t.Fatalf("%s: gc: %v", when, err)
		}
	}
	versions, err := e.cat.ListVersions(e.ctx, e.id)
	if err != nil {
		e.t.Fatal(err)
	}
	referenced := map[string]bool{}
	if len(versions) > DefaultConfig().VersionsToKeep {
		e.t.Fatalf("%s: %d versions left after GC, want at most %d", when, len(versions), DefaultConfig().VersionsToKeep)
	}
	for _, v := range versions {
		referenced[v.ManifestKey] = true
		m, err := e.seg.ReadManifest(e.ctx, v.ManifestKey)
		if err != nil {
			e.t.Fatalf("%s: retained version %d: %v", when, v.Version, err)
		}
		for _, b := range m.Blocks {
			referenced[b.Key] = true
		}
		for _, d := range m.Deltas {
			referenced[d.Key] = true
		}
		for _, k := range indexKeys(m) {
			referenced[k] = true
		}
	}
	blobs, err := e.blobs.List(e.ctx, "collections/"+e.id+"/")
	if err != nil {
		e.t.Fatal(err)
	}
	for _, b := range blobs {
		if !referenced[b.Key] {
			e.t.Fatalf("%s: blob %s survives GC past the grace period but no version references it", when, b.Key)
		}
	}
}

// indexKeys returns the keys of m's index blobs: graph and chunks.
func indexKeys(m *segment.Manifest) []string {
	if m.Index == nil {
		return nil
	}
	keys := []string{m.Index.Graph.Key}
	for _, c := range m.Index.Chunks {
		keys = append(keys, c.Key)
	}
	return keys
}

// gen makes random operations over a small id space, so collisions are
// common.
type gen struct {
	r   *rand.Rand
	ids int
	dim int
}

func (g gen) op() materialize.OperationRecord {
	ops := []materialize.Op{materialize.OpAdd, materialize.OpUpdate, materialize.OpUpsert, materialize.OpDelete}
	o := materialize.OperationRecord{Op: ops[g.r.IntN(len(ops))], ID: fmt.Sprintf("id-%02d", g.r.IntN(g.ids))}
	if o.Op == materialize.OpDelete {
		return o
	}
	if o.Op != materialize.OpUpdate || g.r.IntN(2) == 0 {
		o.Embedding = make([]float32, g.dim)
		for i := range o.Embedding {
			o.Embedding[i] = float32(g.r.IntN(200)-100) / 10
		}
	}
	if g.r.IntN(3) > 0 {
		d := fmt.Sprintf("doc %d", g.r.IntN(1000))
		o.Document = &d
	}
	if g.r.IntN(2) == 0 {
		o.Metadata = materialize.Metadata{}
		for _, k := range []string{"a", "b", "c"} {
			switch g.r.IntN(5) {
			case 0:
				o.Metadata[k] = nil
			case 1:
				o.Metadata[k] = fmt.Sprintf("s%d", g.r.IntN(10))
			case 2:
				o.Metadata[k] = float64(g.r.IntN(100)) / 4
			case 3:
				o.Metadata[k] = g.r.IntN(2) == 0
			}
		}
	}
	return o
}

func (g gen) batch(n int) []materialize.OperationRecord {
	out := make([]materialize.OperationRecord, n)
	for i := range out {
		out[i] = g.op()
	}
	return out
}

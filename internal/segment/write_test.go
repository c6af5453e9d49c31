package segment_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/compactorhq/compactor/internal/materialize"
	"github.com/compactorhq/compactor/internal/segment"
)

// write runs Write over base with changes and writes the manifest; kinds
// records every OnKind call.
func write(t testing.TB, s *segment.Store, base *segment.Manifest, changes []segment.Change, opts segment.WriteOptions) (*segment.Manifest, segment.WriteReport, []segment.WriteKind) {
	t.Helper()
	ctx := context.Background()
	var kinds []segment.WriteKind
	opts.OnKind = func(k segment.WriteKind) { kinds = append(kinds, k) }
	w := s.NewWriter(testCollection, base)
	m, rep, err := w.Write(ctx, segment.Seq(changes), opts)
	if err != nil {
		t.Fatalf("write: %v", err)
	}
	if _, _, err := w.WriteManifest(ctx, m); err != nil {
		t.Fatalf("write manifest: %v", err)
	}
	if len(kinds) != 1 || kinds[0] != rep.Kind {
		t.Errorf("OnKind calls %v, want one, of the report's kind %q", kinds, rep.Kind)
	}
	return m, rep, kinds
}

// updates returns an UPDATE of the document of each id, as operation
// records.
func updates(doc string, ids ...string) []segment.Change {
	out := make([]segment.Change, len(ids))
	for i, id := range ids {
		d := doc
		out[i] = segment.Change{ID: id, Ops: []materialize.OperationRecord{{Offset: int64(i + 1), Op: materialize.OpUpdate, ID: id, Document: &d}}}
	}
	return out
}

// applyOps applies changes with operation records to model.
func applyOps(model map[string]materialize.Record, changes []segment.Change) {
	for _, c := range changes {
		var cur *materialize.Record
		if r, ok := model[c.ID]; ok {
			cur = &r
		}
		if r := materialize.Apply(cur, c.Ops); r != nil {
			model[c.ID] = *r
		} else {
			delete(model, c.ID)
		}
	}
}

func TestWriteDecidesBetweenADeltaAndBlocks(t *testing.T) {
	rng := rand.New(rand.NewPCG(50, 50))
	cfg := segment.Config{MaxBlockRecords: 100, DeltaFoldRecords: 60}
	s, blobs := NewStore(t, cfg)
	base, _, _ := commit(t, s, nil, upserts(records(rng, "k%04d", 2000, 4))) // 20 blocks of 100
	model := map[string]materialize.Record{}
	all, err := collect(s, base)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range all {
		model[r.ID] = r
	}
	spread := func(n int) []string { // n ids over n blocks
		var ids []string
		for i := range n {
			ids = append(ids, fmt.Sprintf("k%04d", i*100+7))
		}
		return ids
	}

	// 1. Few changes over many blocks: a delta; no block is written, every
	// block reused, and the materialized values are the delta's.
	ch := updates("first", spread(20)...)
	applyOps(model, ch)
	var blocks int
	m1, rep, _ := write(t, s, base, ch, segment.WriteOptions{CompactionOffset: 1, OnBlock: func(int64) { blocks++ }})
	if rep.Kind != segment.WroteDelta || rep.DeltasWritten != 1 || rep.BlocksWritten != 0 || rep.BlocksReused != 20 || blocks != 0 || rep.RecordsWritten != 20 {
		t.Fatalf("20 updates over 20 blocks: report %+v, %d OnBlock calls; want a delta of 20 rows reusing 20 blocks", rep, blocks)
	}
	if !slices.Equal(blockKeys(m1), blockKeys(base)) || len(m1.Deltas) != 1 || m1.CompactionOffset != 1 || m1.Dimension != 4 {
		t.Errorf("delta version: blocks changed %v, %d deltas, offset %d, dimension %d", !slices.Equal(blockKeys(m1), blockKeys(base)), len(m1.Deltas), m1.CompactionOffset, m1.Dimension)
	}
	checkReads(t, s, m1, model, spread(20))

	// 2. A base with deltas: a change in one block is a delta too.
	ch = updates("second", "k0001", "k0002")
	applyOps(model, ch)
	m2, rep, _ := write(t, s, m1, ch, segment.WriteOptions{CompactionOffset: 2})
	if rep.Kind != segment.WroteDelta || len(m2.Deltas) != 2 {
		t.Fatalf("2 updates in one block over a base with a delta: report %+v, %d deltas; want a second delta", rep, len(m2.Deltas))
	}
	checkReads(t, s, m2, model, []string{"k0001", "k0002", "k0007"})

	// 3. More changes than the deltas may still take (fold threshold 60,
	// 22 rows listed): blocks, the deltas folded.
	var ids []string
	for i := range 40 {
		ids = append(ids, fmt.Sprintf("k%04d", 300+i))
	}
	ch = updates("third", ids...)
	applyOps(model, ch)
	m3, rep, _ := write(t, s, m2, ch, segment.WriteOptions{CompactionOffset: 3, OnBlock: func(int64) { blocks++ }})
	if rep.Kind != segment.WroteBlocks || rep.DeltasFolded != 2 || len(m3.Deltas) != 0 || rep.BlocksWritten == 0 || blocks != rep.BlocksWritten {
		t.Fatalf("40 updates past the fold threshold: report %+v, %d deltas left, %d OnBlock calls; want blocks folding both deltas", rep, len(m3.Deltas), blocks)
	}
	got, err := collect(s, m3)
	if err != nil {
		t.Fatal(err)
	}
	if want := slices.Collect(maps.Values(model)); len(got) != len(want) || !reflect.DeepEqual(byID(got), model) {
		t.Errorf("folded version: %d records, want the model's %d", len(got), len(want))
	}

	// 4. No deltas listed, changes in few blocks: blocks.
	ch = updates("fourth", "k0500", "k0601")
	applyOps(model, ch)
	m4, rep, _ := write(t, s, m3, ch, segment.WriteOptions{CompactionOffset: 4})
	if rep.Kind != segment.WroteBlocks || rep.BlocksWritten != 2 || len(m4.Deltas) != 0 {
		t.Fatalf("2 updates in 2 blocks: report %+v; want 2 blocks rewritten", rep)
	}

	// 5. Deltas off: the spread change of 1. rewrites its 20 blocks.
	off := segment.NewStore(blobs, segment.Config{MaxBlockRecords: 100, NoDeltas: true}, func() time.Time { return epoch })
	_, rep, _ = write(t, off, m4, updates("fifth", spread(20)...), segment.WriteOptions{CompactionOffset: 5})
	if rep.Kind != segment.WroteBlocks || rep.BlocksWritten != 20 {
		t.Errorf("deltas off: report %+v, want 20 blocks rewritten", rep)
	}
}

// A delta materializes operation records against the current records: an
// UPDATE of an absent id, an ADD of a present one and a DELETE of an
// absent one change nothing and are left out of the delta and of OnChange.
func TestWriteOfADeltaAppliesTheMaterializationRules(t *testing.T) {
	rng := rand.New(rand.NewPCG(51, 51))
	s, _ := NewStore(t, segment.Config{MaxBlockRecords: 100})
	base, _, _ := commit(t, s, nil, upserts(records(rng, "k%04d", 2000, 4)))
	doc := "new"
	op := func(o materialize.Op, id string) segment.Change {
		r := materialize.OperationRecord{Offset: 1, Op: o, ID: id}
		switch o {
		case materialize.OpAdd, materialize.OpUpsert:
			r.Embedding = []float32{1, 2, 3, 4}
		case materialize.OpUpdate:
			r.Document = &doc
		}
		return segment.Change{ID: id, Ops: []materialize.OperationRecord{r}}
	}
	changes := []segment.Change{
		op(materialize.OpUpdate, "k0005"),        // merged
		op(materialize.OpAdd, "k0105"),           // ignored: present
		op(materialize.OpUpdate, "k0205-absent"), // ignored: absent
		op(materialize.OpDelete, "k0305"),        // deleted
		op(materialize.OpDelete, "k0405-absent"), // ignored: absent
		op(materialize.OpUpsert, "k0505-new"),    // inserted
		op(materialize.OpAdd, "k0605-new"),       // inserted
	}
	model := map[string]materialize.Record{}
	all, err := collect(s, base)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range all {
		model[r.ID] = r
	}
	wantChanged := map[string]bool{"k0005": true, "k0305": true, "k0505-new": true, "k0605-new": true}
	applyOps(model, slices.Clone(changes))
	reported := map[string]*materialize.Record{}
	m, rep, _ := write(t, s, base, changes, segment.WriteOptions{CompactionOffset: 1, OnChange: func(id string, r *materialize.Record) {
		if r != nil {
			c := r.Clone()
			r = &c
		}
		reported[id] = r
	}})
	if rep.Kind != segment.WroteDelta || m.Deltas[0].Records != 3 || m.Deltas[0].Tombstones != 1 || m.RecordCount != 2001 {
		t.Fatalf("report %+v, delta %+v, %d records; want a delta of 3 records and 1 tombstone, 2001 records", rep, m.Deltas, m.RecordCount)
	}
	if len(reported) != len(wantChanged) {
		t.Errorf("OnChange told %d ids, want %d (%v)", len(reported), len(wantChanged), slices.Sorted(maps.Keys(reported)))
	}
	for id := range wantChanged {
		want, ok := model[id]
		if r, told := reported[id]; !told || (r == nil) == ok || (r != nil && !reflect.DeepEqual(*r, want)) {
			t.Errorf("OnChange(%s) = %v (told %v), want %+v (present %v)", id, r, told, want, ok)
		}
	}
	checkReads(t, s, m, model, []string{"k0005", "k0105", "k0205-absent", "k0305", "k0505-new", "k0605-new"})
}

// Write returns an error of the stream as it is, whether the writer is
// still gathering the changes or already writing blocks.
func TestWriteReturnsTheStreamsError(t *testing.T) {
	rng := rand.New(rand.NewPCG(52, 52))
	s, blobs := NewStore(t, segment.Config{MaxBlockRecords: 10, DeltaFoldRecords: 20})
	base, _, _ := commit(t, s, nil, upserts(records(rng, "k%04d", 200, 4)))
	boom := errors.New("log read failed")
	failAfter := func(n int) iter.Seq2[segment.Change, error] {
		return func(yield func(segment.Change, error) bool) {
			for i := range n {
				r := newRecord(rng, fmt.Sprintf("k%04d", i*10+5), 4)
				if !yield(segment.Change{ID: r.ID, Record: &r}, nil) {
					return
				}
			}
			yield(segment.Change{}, boom)
		}
	}
	for _, n := range []int{3, 19} { // within the gathered part, past it
		t.Run(fmt.Sprintf("after %d changes", n), func(t *testing.T) {
			w := s.NewWriter(testCollection, base)
			if _, _, err := w.Write(context.Background(), failAfter(n), segment.WriteOptions{Encoders: 1}); !errors.Is(err, boom) {
				t.Fatalf("Write: %v, want the stream's error", err)
			}
			if err := w.Abort(context.Background()); err != nil {
				t.Fatal(err)
			}
			if left := len(listKeys(t, blobs, "collections/"+testCollection+"/")); left != 1+len(base.Blocks) {
				t.Errorf("%d blobs after Abort, want the base's %d", left, 1+len(base.Blocks))
			}
		})
	}
}

// A property test: random operation records against a plain map, written
// with Write's own choice over small blocks and the default delta policy,
// so that deltas are written, stacked and folded.
func TestWriteMatchesAMapModel(t *testing.T) {
	cfg := segment.Config{MaxBlockRecords: 32, MinBlockRecords: 8}
	s, _ := NewStore(t, cfg)
	rng := rand.New(rand.NewPCG(2026, 12))
	ctx := context.Background()
	model := map[string]materialize.Record{}
	var m *segment.Manifest
	kinds := map[segment.WriteKind]int{}
	folds := 0
	const universe = 800
	for round := range 60 {
		size := 1 + rng.IntN(12)
		if round%9 == 0 {
			size = 50 + rng.IntN(400)
		}
		opsOf := map[string][]materialize.OperationRecord{}
		for k := range size {
			id := fmt.Sprintf("id%05d", rng.IntN(universe))
			op := materialize.OperationRecord{Offset: int64(k + 1), ID: id, Op: materialize.Op(1 + rng.IntN(4))}
			if op.Op != materialize.OpDelete {
				r := newRecord(rng, id, 3)
				if op.Op != materialize.OpUpdate || rng.IntN(2) == 0 {
					op.Embedding = r.Embedding
				}
				op.Document, op.Metadata = r.Document, r.Metadata
				if op.Metadata != nil && rng.IntN(3) == 0 {
					op.Metadata = materialize.Metadata{"s": nil}
				}
			}
			opsOf[id] = append(opsOf[id], op)
		}
		ids := slices.Sorted(maps.Keys(opsOf))
		changes := make([]segment.Change, len(ids))
		changed := map[string]bool{}
		for i, id := range ids {
			changes[i] = segment.Change{ID: id, Ops: opsOf[id]}
			var cur *materialize.Record
			if r, ok := model[id]; ok {
				cur = &r
			}
			next := materialize.Apply(cur, opsOf[id])
			if (cur == nil) != (next == nil) || (cur != nil && !reflect.DeepEqual(*cur, *next)) {
				changed[id] = true
			}
			if next != nil {
				model[id] = *next
			} else {
				delete(model, id)
			}
		}
		reported := map[string]bool{}
		w := s.NewWriter(testCollection, m)
		next, rep, err := w.Write(ctx, segment.Seq(changes), segment.WriteOptions{CompactionOffset: int64(round + 1), Dimension: 3, Window: 70, Encoders: 2,
			OnChange: func(id string, r *materialize.Record) {
				reported[id] = true
				if !changed[id] {
					return // a base delta's record folded into a block
				}
				if want, ok := model[id]; (r != nil) != ok || (r != nil && !reflect.DeepEqual(*r, want)) {
					t.Errorf("round %d: OnChange(%s) = %+v, want %+v (present %v)", round, id, r, want, ok)
				}
			}})
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if _, _, err := w.WriteManifest(ctx, next); err != nil {
			t.Fatal(err)
		}
		kinds[rep.Kind]++
		if rep.DeltasFolded > 0 {
			folds++
		}
		for id := range changed {
			if !reported[id] {
				t.Errorf("round %d (%s): %s changed but OnChange did not say", round, rep.Kind, id)
			}
		}
		switch rep.Kind {
		case segment.WroteDelta:
			if len(reported) != len(changed) {
				t.Errorf("round %d: a delta told OnChange of %d ids, %d changed", round, len(reported), len(changed))
			}
			if !slices.Equal(blockKeys(next), blockKeys(m)) {
				t.Errorf("round %d: a delta changed the blocks", round)
			}
		case segment.WroteBlocks:
			if len(next.Deltas) != 0 {
				t.Errorf("round %d: a block write left %d deltas", round, len(next.Deltas))
			}
		default:
			t.Fatalf("round %d: kind %q", round, rep.Kind)
		}
		got, err := collect(s, next)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(byID(got), model) || next.RecordCount != int64(len(model)) {
			t.Fatalf("round %d (%s): version holds %d records (count %d), model %d", round, rep.Kind, len(got), next.RecordCount, len(model))
		}
		probe := make([]string, 0, 30)
		for range 30 {
			probe = append(probe, fmt.Sprintf("id%05d", rng.IntN(universe+50)))
		}
		checkReads(t, s, next, model, probe)
		m = next
	}
	if kinds[segment.WroteDelta] < 10 || kinds[segment.WroteBlocks] < 5 || folds < 2 {
		t.Errorf("kinds written %v, %d folds: the test did not exercise both kinds and folds", kinds, folds)
	}
}

// collect scans every record of m.
func collect(s *segment.Store, m *segment.Manifest) ([]materialize.Record, error) {
	var out []materialize.Record
	err := s.Scan(context.Background(), m, "", func(r materialize.Record) bool {
		out = append(out, r)
		return true
	})
	return out, err
}

func byID(recs []materialize.Record) map[string]materialize.Record {
	out := make(map[string]materialize.Record, len(recs))
	for _, r := range recs {
		out[r.ID] = r
	}
	return out
}

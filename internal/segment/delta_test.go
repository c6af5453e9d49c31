package segment_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/compactorhq/compactor/internal/materialize"
	"github.com/compactorhq/compactor/internal/segment"
)

// writeDelta runs one Writer over base, writes changes as a delta and the
// manifest.
func writeDelta(t testing.TB, s *segment.Store, base *segment.Manifest, changes []segment.Change) (*segment.Manifest, segment.WriteReport, string) {
	t.Helper()
	ctx := context.Background()
	w := s.NewWriter(testCollection, base)
	m, stats, err := w.WriteDelta(ctx, changes, base.CompactionOffset+1, 4)
	if err != nil {
		t.Fatalf("write delta: %v", err)
	}
	key, _, err := w.WriteManifest(ctx, m)
	if err != nil {
		t.Fatalf("write manifest: %v", err)
	}
	return m, stats, key
}

// applyModel applies changes to model.
func applyModel(model map[string]materialize.Record, changes []segment.Change) {
	for _, c := range changes {
		if c.Record == nil {
			delete(model, c.ID)
		} else {
			model[c.ID] = *c.Record
		}
	}
}

// checkReads compares Store.Get (every id of ids), Store.Scan (from every
// id of ids and from "") and Writer.Get with model.
func checkReads(t *testing.T, s *segment.Store, m *segment.Manifest, model map[string]materialize.Record, ids []string) {
	t.Helper()
	ctx := context.Background()
	got, err := s.Get(ctx, m, ids)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]materialize.Record{}
	for _, id := range ids {
		if r, ok := model[id]; ok {
			want[id] = r
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Store.Get: %d records, want %d", len(got), len(want))
		for id, r := range want {
			if !reflect.DeepEqual(got[id], r) {
				t.Errorf("  %s: got %+v, want %+v", id, got[id], r)
			}
		}
	}
	wgot, err := s.NewWriter(testCollection, m).Get(ctx, ids)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(wgot, want) {
		t.Errorf("Writer.Get: %d records, want %d", len(wgot), len(want))
	}
	all := slices.Sorted(maps.Keys(model))
	for _, after := range append([]string{""}, ids...) {
		var scanned []string
		if err := s.Scan(ctx, m, after, func(r materialize.Record) bool {
			if !reflect.DeepEqual(r, model[r.ID]) {
				t.Errorf("Scan after %q: %s is %+v, want %+v", after, r.ID, r, model[r.ID])
			}
			scanned = append(scanned, r.ID)
			return true
		}); err != nil {
			t.Fatal(err)
		}
		var wantIDs []string
		for _, id := range all {
			if id > after {
				wantIDs = append(wantIDs, id)
			}
		}
		if !slices.Equal(scanned, wantIDs) {
			t.Errorf("Scan after %q: %v, want %v", after, scanned, wantIDs)
		}
	}
}

func TestDeltaOverlayNewestWinsAndTombstonesHide(t *testing.T) {
	rng := rand.New(rand.NewPCG(40, 40))
	s, blobs := NewStore(t, segment.Config{MaxBlockRecords: 10})
	base := records(rng, "k%03d0", 100, 4) // k0000 … k0990, 10 blocks
	m, _, _ := commit(t, s, nil, upserts(base))
	model := map[string]materialize.Record{}
	applyModel(model, upserts(base))

	rec := func(id string) *materialize.Record { r := newRecord(rng, id, 4); return &r }
	// Delta 1: an update, a delete, an insert inside a block's range and
	// one past the last block, a delete of an absent id (left out).
	d1 := []segment.Change{
		{ID: "a-before-all", Record: rec("a-before-all")},
		{ID: "k0050", Record: rec("k0050")},
		{ID: "k0100"},
		{ID: "k0105", Record: rec("k0105")},
		{ID: "k0106"},
		{ID: "z-after-all", Record: rec("z-after-all")},
	}
	m1, stats, _ := writeDelta(t, s, m, d1)
	applyModel(model, d1)
	if len(m1.Deltas) != 1 || stats.DeltasWritten != 1 || stats.BlocksReused != 10 || stats.BlocksWritten != 0 {
		t.Fatalf("delta 1: %d deltas, stats %+v", len(m1.Deltas), stats)
	}
	if d := m1.Deltas[0]; d.Records != 4 || d.Tombstones != 1 || d.MinID != "a-before-all" || d.MaxID != "z-after-all" {
		t.Errorf("delta 1 entry %+v: want 4 records, 1 tombstone (the absent id left out), range [a-before-all, z-after-all]", d)
	}
	if m1.RecordCount != int64(len(model)) || m1.FormatVersion != 2 || !slices.Equal(blockKeys(m1), blockKeys(m)) {
		t.Errorf("delta 1 manifest: %d records (want %d), format version %d (want 2), blocks changed", m1.RecordCount, len(model), m1.FormatVersion)
	}
	ids := []string{"", "a", "a-before-all", "k0000", "k0050", "k0100", "k0105", "k0106", "k0990", "z-after-all", "zz"}
	checkReads(t, s, m1, model, ids)

	// Delta 2 over delta 1: a tombstone of a delta record, a record over
	// a tombstone, an update of an updated record.
	d2 := []segment.Change{
		{ID: "k0050", Record: rec("k0050")},
		{ID: "k0100", Record: rec("k0100")},
		{ID: "k0105"},
		{ID: "z-after-all"},
	}
	m2, _, _ := writeDelta(t, s, m1, d2)
	applyModel(model, d2)
	if len(m2.Deltas) != 2 || m2.RecordCount != int64(len(model)) {
		t.Fatalf("delta 2: %d deltas, %d records (want 2, %d)", len(m2.Deltas), m2.RecordCount, len(model))
	}
	checkReads(t, s, m2, model, ids)

	// A Get of ids that only the deltas decide reads no block.
	blobs.Reset()
	if _, err := s.Get(context.Background(), m2, []string{"k0105", "k0050"}); err != nil {
		t.Fatal(err)
	}
	if blobs.Gets() != 2 {
		t.Errorf("Get of ids the deltas hold: %d reads, want 2 (the deltas only)", blobs.Gets())
	}

	// No change left: no delta written, the version still moves on.
	m3, stats, _ := writeDelta(t, s, m2, []segment.Change{{ID: "k0050", Record: &[]materialize.Record{model["k0050"]}[0]}, {ID: "k0105"}})
	if len(m3.Deltas) != 2 || stats.DeltasWritten != 0 || m3.Version != m2.Version+1 || m3.RecordCount != m2.RecordCount {
		t.Errorf("no-op delta: %d deltas, stats %+v, version %d", len(m3.Deltas), stats, m3.Version)
	}

	// Writing a delta without base blocks is refused.
	if _, _, err := s.NewWriter(testCollection, nil).WriteDelta(context.Background(), d1, 1, 4); err == nil {
		t.Error("WriteDelta over no base succeeded")
	}
}

func TestWriteFoldsDeltasIntoTheBlocksTheyTouch(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 41))
	cfg := segment.Config{MaxBlockRecords: 10, MinBlockRecords: 3}
	s, _ := NewStore(t, cfg)
	base := records(rng, "k%03d0", 100, 4)
	m, _, _ := commit(t, s, nil, upserts(base))
	model := map[string]materialize.Record{}
	applyModel(model, upserts(base))
	r1, r2 := newRecord(rng, "k0010", 4), newRecord(rng, "k0011", 4)
	d1 := []segment.Change{{ID: "k0010", Record: &r1}, {ID: "k0011", Record: &r2}, {ID: "k0300"}}
	m1, _, _ := writeDelta(t, s, m, d1)
	applyModel(model, d1)
	r3 := newRecord(rng, "k0011", 4)
	d2 := []segment.Change{{ID: "k0011", Record: &r3}, {ID: "k0012"}}
	m2, _, _ := writeDelta(t, s, m1, d2)
	applyModel(model, d2)

	// A write touching one other block folds both deltas: the newest
	// change wins (the write's over delta 2's over delta 1's).
	r4 := newRecord(rng, "k0905", 4)
	r5 := newRecord(rng, "k0012", 4)
	change := []segment.Change{{ID: "k0012", Record: &r5}, {ID: "k0905", Record: &r4}}
	m3, stats, _ := commit(t, s, m2, change)
	applyModel(model, change)
	if len(m3.Deltas) != 0 || m3.FormatVersion != 1 || stats.DeltasFolded != 2 {
		t.Fatalf("fold: %d deltas left, format version %d, %d folded (want 0, 1, 2)", len(m3.Deltas), m3.FormatVersion, stats.DeltasFolded)
	}
	// Blocks k0000-k0090, k0300-k0390 (the deltas') and k0900-k0990 (the
	// change's) are rewritten (the first and last split in two), the other
	// seven reused.
	if stats.BlocksWritten != 5 || stats.BlocksReused != 7 {
		t.Errorf("fold wrote %d blocks and reused %d, want 5 and 7", stats.BlocksWritten, stats.BlocksReused)
	}
	for i, b := range m.Blocks {
		if reused := slices.Contains(blockKeys(m3), b.Key); reused != (i != 0 && i != 3 && i != 9) {
			t.Errorf("block %d [%s, %s]: reused %v", i, b.MinID, b.MaxID, reused)
		}
	}
	all := checkManifest(t, s, m3, cfg)
	got := map[string]materialize.Record{}
	for _, r := range all {
		got[r.ID] = r
	}
	if !reflect.DeepEqual(got, model) {
		t.Errorf("folded version holds %d records, want the model's %d", len(got), len(model))
	}
	checkReads(t, s, m3, model, []string{"k0010", "k0011", "k0012", "k0300", "k0905"})
}

func TestPreferDelta(t *testing.T) {
	// 20 blocks of 100 records; PreferDelta reads only the manifest.
	blocks := make([]segment.BlockRef, 20)
	for i := range blocks {
		blocks[i] = segment.BlockRef{Key: fmt.Sprintf("b%d", i), MinID: fmt.Sprintf("k%02d000", i), MaxID: fmt.Sprintf("k%02d990", i), Records: 100}
	}
	base := &segment.Manifest{FormatVersion: 1, Version: 1, RecordCount: 2000, Blocks: blocks}
	withDeltas := func(n int, rows int64) *segment.Manifest {
		m := *base
		for i := range n {
			m.Deltas = append(m.Deltas, segment.DeltaRef{Key: fmt.Sprint(i), Records: rows})
		}
		return &m
	}
	// spread returns n changes over the first `over` blocks, round-robin.
	spread := func(n, over int) []segment.Change {
		var out []segment.Change
		for i := range n {
			out = append(out, segment.Change{ID: fmt.Sprintf("k%02d%03d", i%over, i/over+1)})
		}
		slices.SortFunc(out, func(a, b segment.Change) int { return strings.Compare(a.ID, b.ID) })
		return out
	}
	for _, tc := range []struct {
		name    string
		cfg     segment.Config
		base    *segment.Manifest
		changes []segment.Change
		want    bool
	}{
		{"20 changes over 20 blocks: 1% of their records", segment.Config{}, base, spread(20, 20), true},
		{"no base", segment.Config{}, nil, spread(20, 20), false},
		{"no changes", segment.Config{}, base, nil, false},
		{"over only 4 blocks", segment.Config{}, base, spread(4, 4), false},
		{"over 5 blocks", segment.Config{}, base, spread(5, 5), true},
		{"5% of the records of the blocks touched", segment.Config{}, base, spread(100, 20), false},
		{"just under 5%", segment.Config{}, base, spread(99, 20), true},
		{"a larger fraction allowed", segment.Config{DeltaMaxFraction: 0.2}, base, spread(100, 20), true},
		{"more blocks needed", segment.Config{DeltaMinBlocks: 20}, base, spread(20, 20), false},
		{"deltas off", segment.Config{NoDeltas: true}, base, spread(20, 20), false},
		{"base with deltas: one block is enough", segment.Config{}, withDeltas(1, 10), spread(50, 1), true},
		{"base with deltas: no changes, no fold", segment.Config{}, withDeltas(1, 10), nil, true},
		{"deltas with the changes over the fold threshold", segment.Config{DeltaFoldRecords: 100}, withDeltas(1, 90), spread(20, 20), false},
		{"at the fold threshold", segment.Config{DeltaFoldRecords: 100}, withDeltas(1, 80), spread(20, 20), true},
		{"the default fold threshold: max(MaxBlockRecords, 10%)", segment.Config{MaxBlockRecords: 100}, withDeltas(1, 190), spread(20, 20), false},
		{"MaxDeltas deltas", segment.Config{MaxDeltas: 3}, withDeltas(3, 1), spread(20, 20), false},
		{"under MaxDeltas", segment.Config{MaxDeltas: 3}, withDeltas(2, 1), spread(20, 20), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := NewStore(t, tc.cfg)
			if got := s.PreferDelta(tc.base, tc.changes); got != tc.want {
				t.Errorf("PreferDelta = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestGCKeepsDeltasOfKeptVersionsAndDeletesExpiredOnes(t *testing.T) {
	rng := rand.New(rand.NewPCG(42, 42))
	s, blobs := NewStore(t, segment.Config{MaxBlockRecords: 10})
	ctx := context.Background()
	m1, _, k1 := commit(t, s, nil, upserts(records(rng, "k%03d0", 100, 4)))
	r := newRecord(rng, "k0500", 4)
	m2, _, k2 := writeDelta(t, s, m1, []segment.Change{{ID: "k0500", Record: &r}, {ID: "k0600"}})
	dkey := m2.Deltas[0].Key
	r2 := newRecord(rng, "k0001", 4)
	_, _, k3 := commit(t, s, m2, []segment.Change{{ID: "k0001", Record: &r2}})

	// v2 kept: its delta stays whatever its age (and whatever orphan grace).
	if _, err := s.GC(ctx, testCollection, segment.GCPlan{Keep: []string{k2, k3}, Expired: []string{k1}}); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(listKeys(t, blobs, "collections/"+testCollection+"/deltas/"), dkey) {
		t.Fatal("GC deleted the delta of a kept version")
	}
	// v2 expired: its delta goes with it.
	st, err := s.GC(ctx, testCollection, segment.GCPlan{Keep: []string{k3}, Expired: []string{k2}})
	if err != nil {
		t.Fatal(err)
	}
	if left := listKeys(t, blobs, "collections/"+testCollection+"/deltas/"); len(left) != 0 || st.BlobsDeleted == 0 {
		t.Errorf("after v2 expired: deltas left %v, %d blobs deleted", left, st.BlobsDeleted)
	}

	// An orphan delta (a failed compaction's) goes after the grace period.
	w := s.NewWriter(testCollection, m1)
	if _, _, err := w.WriteDelta(ctx, []segment.Change{{ID: "k0700"}}, 2, 4); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GC(ctx, testCollection, segment.GCPlan{Keep: []string{k3}, OrphanGrace: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if len(listKeys(t, blobs, "collections/"+testCollection+"/deltas/")) != 1 {
		t.Error("GC deleted a young orphan delta")
	}
	later := segment.NewStore(blobs, segment.Config{MaxBlockRecords: 10}, func() time.Time { return time.Now().Add(2 * time.Hour) })
	if _, err := later.GC(ctx, testCollection, segment.GCPlan{Keep: []string{k3}, OrphanGrace: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if left := listKeys(t, blobs, "collections/"+testCollection+"/deltas/"); len(left) != 0 {
		t.Errorf("orphan delta left past the grace period: %v", left)
	}
}

func TestCorruptDeltaIsACorruptErrorOfKindDelta(t *testing.T) {
	rng := rand.New(rand.NewPCG(43, 43))
	s, blobs := NewStore(t, segment.Config{MaxBlockRecords: 10})
	ctx := context.Background()
	m1, _, _ := commit(t, s, nil, upserts(records(rng, "k%03d0", 50, 4)))
	r := newRecord(rng, "k0100", 4)
	m2, _, _ := writeDelta(t, s, m1, []segment.Change{{ID: "k0100", Record: &r}, {ID: "k0200"}})
	ref := m2.Deltas[0]

	mismatch := map[string]func(d *segment.DeltaRef){
		"record count":    func(d *segment.DeltaRef) { d.Records++ },
		"tombstone count": func(d *segment.DeltaRef) { d.Tombstones++; d.Records-- },
		"id range":        func(d *segment.DeltaRef) { d.MinID = "k" },
		"size":            func(d *segment.DeltaRef) { d.Bytes-- },
	}
	for name, edit := range mismatch {
		d := ref
		edit(&d)
		if _, err := s.ReadDelta(ctx, d); !errors.Is(err, segment.ErrCorrupt) || !strings.Contains(err.Error(), ref.Key) {
			t.Errorf("a delta with another %s than its manifest entry: %v, want ErrCorrupt naming the key", name, err)
		}
	}

	// Damaged bytes, and a block (no deleted column) stored as a delta:
	// every read of the version fails with a CorruptError of kind delta.
	blockData, err := blobs.Get(ctx, m1.Blocks[0].Key)
	if err != nil {
		t.Fatal(err)
	}
	good, err := blobs.Get(ctx, ref.Key)
	if err != nil {
		t.Fatal(err)
	}
	truncated := good[:len(good)/2]
	for name, data := range map[string][]byte{"garbage": []byte("not parquet"), "a block": blockData, "truncated": truncated} {
		if err := blobs.Put(ctx, ref.Key, data); err != nil {
			t.Fatal(err)
		}
		d := ref
		d.Bytes = int64(len(data))
		m := *m2
		m.Deltas = []segment.DeltaRef{d}
		var ce *segment.CorruptError
		if _, err := s.Get(ctx, &m, []string{"k0100"}); !errors.As(err, &ce) || ce.Kind != segment.KindDelta || ce.Key != ref.Key || ce.CollectionID != testCollection {
			t.Errorf("%s: Get: %v, want a CorruptError of kind delta naming key and collection", name, err)
		}
		if err := s.Scan(ctx, &m, "", func(materialize.Record) bool { return true }); !errors.As(err, &ce) || ce.Kind != segment.KindDelta {
			t.Errorf("%s: Scan: %v, want a CorruptError of kind delta", name, err)
		}
		if _, err := s.NewWriter(testCollection, &m).Get(ctx, []string{"k0100"}); !errors.As(err, &ce) || ce.Kind != segment.KindDelta {
			t.Errorf("%s: Writer.Get: %v, want a CorruptError of kind delta", name, err)
		}
	}
	if err := blobs.Delete(ctx, ref.Key); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, m2, []string{"k0100"}); !errors.Is(err, segment.ErrNotExist) {
		t.Errorf("missing delta: %v, want ErrNotExist", err)
	}
}

func TestWriterGetOfFewSpreadIDsReadsRowsAndMatchesAWholeRead(t *testing.T) {
	rng := rand.New(rand.NewPCG(45, 45))
	s, blobs := NewStore(t, segment.Config{MaxBlockRecords: 100})
	whole, wblobs := NewStore(t, segment.Config{MaxBlockRecords: 100, NoDeltas: true})
	recs := records(rng, "k%04d", 2000, 4) // 20 blocks
	m, _, _ := commit(t, s, nil, upserts(recs))
	ctx := context.Background()
	// One id every 100 (present), one absent inside each range, and ids
	// outside every range: few ids over every block.
	var ids []string
	for i := 0; i < 2000; i += 100 {
		ids = append(ids, fmt.Sprintf("k%04d", i+rng.IntN(100)), fmt.Sprintf("k%04d-absent", i))
	}
	ids = append(ids, "a", "zzz")
	if !s.PreferDelta(m, deletes(slices.Sorted(slices.Values(ids))...)) {
		t.Fatal("the ids would not make a delta: the test reads whole blocks")
	}
	got, err := s.NewWriter(testCollection, m).Get(ctx, ids)
	if err != nil {
		t.Fatal(err)
	}
	// The same blocks through a store that never writes deltas (whole
	// blocks read).
	for _, b := range m.Blocks {
		data, err := blobs.Get(ctx, b.Key)
		if err != nil {
			t.Fatal(err)
		}
		if err := wblobs.Put(ctx, b.Key, data); err != nil {
			t.Fatal(err)
		}
	}
	want, err := whole.NewWriter(testCollection, m).Get(ctx, ids)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 20 || !reflect.DeepEqual(got, want) {
		t.Errorf("row reads found %d records, whole reads %d (want 20, equal)", len(got), len(want))
	}

	// A block that contradicts its entry is corrupt on this path too.
	bad := *m
	bad.Blocks = slices.Clone(m.Blocks)
	bad.Blocks[3].Records--
	var ce *segment.CorruptError
	if _, err := s.NewWriter(testCollection, &bad).Get(ctx, ids); !errors.As(err, &ce) || ce.Kind != segment.KindBlock || ce.Key != m.Blocks[3].Key {
		t.Errorf("block with a wrong record count: %v, want a CorruptError naming it", err)
	}
	bad.Blocks[3] = m.Blocks[3]
	bad.Blocks[5].MaxID = "k0599x"
	if _, err := s.NewWriter(testCollection, &bad).Get(ctx, ids); !errors.As(err, &ce) || ce.Key != m.Blocks[5].Key {
		t.Errorf("block with a wrong id range: %v, want a CorruptError naming it", err)
	}
}

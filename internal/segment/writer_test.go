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

	"github.com/compactorhq/compactor/internal/materialize"
	"github.com/compactorhq/compactor/internal/segment"
	"github.com/compactorhq/compactor/internal/segment/segmenttest"
)

func TestWriterIntoEmptyCollectionChunksIntoNearEqualBlocks(t *testing.T) {
	for _, tc := range []struct {
		n, max     int
		wantBlocks int
	}{
		{n: 0, max: 100, wantBlocks: 0},
		{n: 1, max: 100, wantBlocks: 1},
		{n: 100, max: 100, wantBlocks: 1},
		{n: 101, max: 100, wantBlocks: 2},
		{n: 1000, max: 100, wantBlocks: 10},
		{n: 1001, max: 100, wantBlocks: 11},
	} {
		t.Run(fmt.Sprintf("%d records, max %d", tc.n, tc.max), func(t *testing.T) {
			cfg := segment.Config{MaxBlockRecords: tc.max}
			s, blobs := NewStore(t, cfg)
			rng := rand.New(rand.NewPCG(1, uint64(tc.n)))
			recs := records(rng, "id-%05d", tc.n, 8)
			var onBlockBytes int64
			w := s.NewWriter(testCollection, nil)
			m, stats, err := w.WriteBlocks(context.Background(), upserts(recs), 42, 8, func(n int64) { onBlockBytes += n })
			if err != nil {
				t.Fatal(err)
			}
			if len(m.Blocks) != tc.wantBlocks || stats.BlocksWritten != tc.wantBlocks {
				t.Fatalf("%d blocks (stats %d), want %d", len(m.Blocks), stats.BlocksWritten, tc.wantBlocks)
			}
			for _, b := range m.Blocks {
				if lo, hi := int64(tc.n/max(tc.wantBlocks, 1)), int64((tc.n+tc.wantBlocks-1)/max(tc.wantBlocks, 1)); b.Records < lo || b.Records > hi {
					t.Errorf("block of %d records, want near-equal sizes in [%d, %d]", b.Records, lo, hi)
				}
			}
			wantManifest := segment.Manifest{FormatVersion: 1, CollectionID: testCollection, Version: 1,
				CompactionOffset: 42, Dimension: 8, RecordCount: int64(tc.n), CreatedAt: epoch, Blocks: m.Blocks,
				Digest: segment.DigestOf(recs).String()}
			if !reflect.DeepEqual(*m, wantManifest) {
				t.Errorf("manifest %+v, want %+v", *m, wantManifest)
			}
			var bytes int64
			for _, b := range m.Blocks {
				bytes += b.Bytes
			}
			wantStats := segment.WriteReport{Kind: segment.WroteBlocks, BlocksWritten: tc.wantBlocks, RecordsWritten: int64(tc.n), BytesWritten: bytes}
			if stats != wantStats || onBlockBytes != bytes {
				t.Errorf("stats %+v (onBlock total %d), want %+v", stats, onBlockBytes, wantStats)
			}
			if got := checkManifest(t, s, m, cfg); !equalRecords(got, recs) {
				t.Error("blocks do not hold the records written")
			}
			if got := blobs.Puts(); got != tc.wantBlocks {
				t.Errorf("%d puts, want %d", got, tc.wantBlocks)
			}
		})
	}
}

func equalRecords(a, b []materialize.Record) bool {
	if len(a) == 0 && len(b) == 0 {
		return true
	}
	return reflect.DeepEqual(a, b)
}

// Copy-on-write is observable: a few new ids rewrite only the blocks that
// own them, and every other block of the base is reused by reference.
func TestWriterRewritesOnlyTheBlocksOwningChangedIDs(t *testing.T) {
	const n, maxRecs, newIDs = 100_000, 2048, 10
	cfg := segment.Config{MaxBlockRecords: maxRecs}
	s, blobs := NewStore(t, cfg)
	rng := rand.New(rand.NewPCG(7, 7))
	// Small records (ids r0000000 … r0099999): this test is about blocks.
	recs := make([]materialize.Record, n)
	for i := range recs {
		recs[i] = materialize.Record{ID: fmt.Sprintf("r%07d", i), Embedding: []float32{float32(i)}}
	}
	base, _, _ := commit(t, s, nil, upserts(recs))
	// New ids sit between existing ones: "r0001234a" sorts after "r0001234".
	var added []materialize.Record
	for _, i := range rng.Perm(n)[:newIDs] {
		added = append(added, newRecord(rng, fmt.Sprintf("r%07da", i), 2))
	}
	slices.SortFunc(added, func(a, b materialize.Record) int { return strings.Compare(a.ID, b.ID) })

	// The owners, computed here by a linear scan: the last block whose
	// MinID <= id.
	owners := map[int]int{} // base block index -> new ids
	for _, r := range added {
		o := 0
		for i, b := range base.Blocks {
			if b.MinID <= r.ID {
				o = i
			}
		}
		owners[o]++
	}
	for o, k := range owners {
		if base.Blocks[o].Records+int64(k) > maxRecs {
			t.Fatalf("precondition: block %d would split (%d + %d records); pick another seed", o, base.Blocks[o].Records, k)
		}
	}

	blobs.Reset()
	w := s.NewWriter(testCollection, base)
	m, stats, err := w.WriteBlocks(context.Background(), upserts(added), 0, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	if stats.BlocksWritten != len(owners) {
		t.Errorf("wrote %d blocks, want %d (the distinct owners of the new ids)", stats.BlocksWritten, len(owners))
	}
	// Each block written is read back once (the read-back check).
	if blobs.Gets() != 2*len(owners) || blobs.Puts() != len(owners) {
		t.Errorf("%d gets and %d puts, want %d gets (a read and a read-back per owner) and %d puts", blobs.Gets(), blobs.Puts(), 2*len(owners), len(owners))
	}
	if want := len(base.Blocks) - len(owners); stats.BlocksReused != want || stats.BlocksDropped != len(owners) {
		t.Errorf("stats %+v, want %d reused and %d dropped", stats, want, len(owners))
	}
	if len(m.Blocks) != len(base.Blocks) {
		t.Fatalf("%d blocks, want %d", len(m.Blocks), len(base.Blocks))
	}
	for i := range base.Blocks {
		if k, touched := owners[i]; touched {
			if m.Blocks[i].Key == base.Blocks[i].Key || m.Blocks[i].Records != base.Blocks[i].Records+int64(k) {
				t.Errorf("block %d: %+v, want a new block of %d records", i, m.Blocks[i], base.Blocks[i].Records+int64(k))
			}
		} else if m.Blocks[i] != base.Blocks[i] {
			t.Errorf("block %d: %+v, want the base's %+v", i, m.Blocks[i], base.Blocks[i])
		}
	}
	if m.Version != base.Version+1 || m.RecordCount != n+newIDs {
		t.Errorf("version %d, %d records; want %d, %d", m.Version, m.RecordCount, base.Version+1, n+newIDs)
	}
	got, err := s.Get(context.Background(), m, []string{added[0].ID, added[newIDs-1].ID, "r0000000"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || !reflect.DeepEqual(got[added[0].ID], added[0]) {
		t.Errorf("get after write: %d records", len(got))
	}
}

func TestWriterMergesABlockShrunkBelowMinWithANeighbour(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	// Base: 20 blocks of 50 (written with max 50), then max 100, min 25.
	mem := segmenttest.NewMem(t)
	small := segment.NewStore(mem, segment.Config{MaxBlockRecords: 50}, nil)
	base, _, _ := commit(t, small, nil, upserts(records(rng, "k%04d", 1000, 4)))
	if len(base.Blocks) != 20 {
		t.Fatalf("base has %d blocks, want 20", len(base.Blocks))
	}
	cfg := segment.Config{MaxBlockRecords: 100, MinBlockRecords: 25}
	s := segment.NewStore(mem, cfg, nil)

	// Delete 30 of block 7's 50 records (k0350 … k0379): 20 left < 25.
	var ids []string
	for i := 350; i < 380; i++ {
		ids = append(ids, fmt.Sprintf("k%04d", i))
	}
	m, stats, _ := commit(t, s, base, deletes(ids...))
	want := segment.WriteReport{Kind: segment.WroteBlocks, BlocksWritten: 1, BlocksReused: 18, BlocksDropped: 2, RecordsWritten: 70}
	want.BytesWritten = stats.BytesWritten
	if stats != want {
		t.Errorf("stats %+v, want %+v", stats, want)
	}
	if len(m.Blocks) != 19 {
		t.Fatalf("%d blocks, want 19", len(m.Blocks))
	}
	// Both neighbours hold 50: the merge goes to the previous one (block 6).
	merged := m.Blocks[6]
	if merged.MinID != "k0300" || merged.MaxID != "k0399" || merged.Records != 70 {
		t.Errorf("merged block %+v, want k0300…k0399 with 70 records", merged)
	}
	for i, b := range m.Blocks {
		j := i
		if i > 6 {
			j = i + 1
		}
		if i != 6 && b != base.Blocks[j] {
			t.Errorf("block %d is not the base's block %d", i, j)
		}
	}
	if got := checkManifest(t, s, m, cfg); len(got) != 970 {
		t.Errorf("%d records, want 970", len(got))
	}

	// Block k0500…k0549 keeps 30 of 50 records: rewritten, not merged.
	m2, _, _ := commit(t, s, m, deletes(idRange(500, 520)...))
	// Block 9 (k0450…k0499) shrinks to 10: its neighbours hold 50 (before)
	// and 30 (after): it merges with the smaller one, the next.
	m3, stats, _ := commit(t, s, m2, deletes(idRange(450, 490)...))
	if stats.BlocksWritten != 1 || stats.BlocksDropped != 2 {
		t.Errorf("stats %+v, want 1 written and 2 dropped", stats)
	}
	i := slices.IndexFunc(m3.Blocks, func(b segment.BlockRef) bool { return b.MinID == "k0490" })
	if i < 0 || m3.Blocks[i].MaxID != "k0549" || m3.Blocks[i].Records != 40 {
		t.Errorf("blocks %+v: want one of k0490…k0549 with 40 records", m3.Blocks)
	}

	// Block k0550… shrinks to 10 while its next neighbour is rewritten too
	// (one delete): it merges with that one, although the other is smaller.
	m4, stats, _ := commit(t, s, m3, deletes(append(idRange(550, 590), "k0620")...))
	if stats.BlocksWritten != 1 || stats.BlocksDropped != 2 {
		t.Errorf("stats %+v, want 1 written and 2 dropped", stats)
	}
	i = slices.IndexFunc(m4.Blocks, func(b segment.BlockRef) bool { return b.MinID == "k0590" })
	if i < 0 || m4.Blocks[i].MaxID != "k0649" || m4.Blocks[i].Records != 59 {
		t.Errorf("blocks %+v: want one of k0590…k0649 with 59 records", m4.Blocks)
	}
	checkManifest(t, s, m4, cfg)
}

func idRange(from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, fmt.Sprintf("k%04d", i))
	}
	return out
}

func TestWriterMergeThatOverflowsSplitsAgain(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	cfg := segment.Config{MaxBlockRecords: 100, MinBlockRecords: 25}
	s, _ := NewStore(t, cfg)
	base, _, _ := commit(t, s, nil, upserts(records(rng, "k%04d", 1000, 4))) // 10 blocks of 100
	var ids []string
	for i := 300; i < 390; i++ { // block 3 keeps 10
		ids = append(ids, fmt.Sprintf("k%04d", i))
	}
	m, stats, _ := commit(t, s, base, deletes(ids...))
	// 10 + a neighbour's 100 = 110 > 100: two blocks of 55.
	if stats.BlocksWritten != 2 || stats.BlocksReused != 8 || stats.BlocksDropped != 2 || stats.RecordsWritten != 110 {
		t.Errorf("stats %+v", stats)
	}
	for _, b := range m.Blocks {
		if b.Records < 25 {
			t.Errorf("block %+v under the minimum", b)
		}
	}
	checkManifest(t, s, m, cfg)
}

func TestWriterSplitsABlockGrownPastMax(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	cfg := segment.Config{MaxBlockRecords: 100}
	s, _ := NewStore(t, cfg)
	base, _, _ := commit(t, s, nil, upserts(records(rng, "k%04d0", 1000, 4))) // 10 blocks of 100
	// 150 new ids inside block 4 (k04000 … k04990): 250 records -> 3 blocks.
	var added []materialize.Record
	for i := 400; i < 475; i++ {
		added = append(added, newRecord(rng, fmt.Sprintf("k%04d1", i), 4), newRecord(rng, fmt.Sprintf("k%04d2", i), 4))
	}
	m, stats, _ := commit(t, s, base, upserts(added))
	if stats.BlocksWritten != 3 || stats.BlocksReused != 9 || stats.BlocksDropped != 1 || stats.RecordsWritten != 250 {
		t.Errorf("stats %+v", stats)
	}
	if len(m.Blocks) != 12 {
		t.Fatalf("%d blocks, want 12", len(m.Blocks))
	}
	for i, want := range []int64{84, 83, 83} {
		if got := m.Blocks[4+i].Records; got != want {
			t.Errorf("split block %d: %d records, want %d", i, got, want)
		}
	}
	if got := checkManifest(t, s, m, cfg); len(got) != 1150 {
		t.Errorf("%d records, want 1150", len(got))
	}
}

func TestWriterDeletingEverythingYieldsZeroBlocks(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 6))
	s, _ := NewStore(t, segment.Config{MaxBlockRecords: 100})
	recs := records(rng, "k%04d", 350, 4)
	base, _, _ := commit(t, s, nil, upserts(recs))
	var ids []string
	for _, r := range recs {
		ids = append(ids, r.ID)
	}
	m, stats, _ := commit(t, s, base, deletes(ids...))
	if len(m.Blocks) != 0 || m.RecordCount != 0 || m.Version != 2 {
		t.Errorf("manifest %+v, want version 2 with no blocks", m)
	}
	if stats != (segment.WriteReport{Kind: segment.WroteBlocks, BlocksDropped: 4}) {
		t.Errorf("stats %+v, want 4 dropped", stats)
	}
	// An empty version is a valid base.
	m3, _, _ := commit(t, s, m, upserts(recs[:3]))
	if len(m3.Blocks) != 1 || m3.RecordCount != 3 || m3.Version != 3 {
		t.Errorf("manifest over an empty base: %+v", m3)
	}
}

func TestWriterNoOpChangesRewriteNothing(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	s, blobs := NewStore(t, segment.Config{MaxBlockRecords: 100})
	recs := records(rng, "k%04d", 500, 4)
	base, _, _ := commit(t, s, nil, upserts(recs))
	blobs.Reset()
	// Re-upserting identical records and deleting absent ids changes nothing.
	same := []segment.Change{{ID: "k0000a"}, {ID: recs[1].ID, Record: &recs[1]}, {ID: recs[250].ID, Record: &recs[250]}, {ID: "zzz"}}
	m, stats, _ := commit(t, s, base, same)
	if stats.BlocksWritten != 0 || stats.BlocksReused != 5 || !reflect.DeepEqual(m.Blocks, base.Blocks) {
		t.Errorf("stats %+v, want every block reused", stats)
	}
	if blobs.Puts() != 1 { // the manifest
		t.Errorf("%d puts, want 1", blobs.Puts())
	}
}

func TestWriterRejectsBadChanges(t *testing.T) {
	s, _ := NewStore(t, segment.Config{})
	r := materialize.Record{ID: "b", Embedding: []float32{1, 2}}
	other := materialize.Record{ID: "x", Embedding: []float32{1, 2}}
	for name, changes := range map[string][]segment.Change{
		"unsorted":        {{ID: "b"}, {ID: "a"}},
		"duplicate":       {{ID: "a"}, {ID: "a"}},
		"empty id":        {{ID: ""}},
		"record id":       {{ID: "b", Record: &other}},
		"wrong dimension": {{ID: "b", Record: &materialize.Record{ID: "b", Embedding: []float32{1}}}},
		"int metadata":    {{ID: "b", Record: &materialize.Record{ID: "b", Embedding: []float32{1, 2}, Metadata: materialize.Metadata{"n": 1}}}},
	} {
		w := s.NewWriter(testCollection, nil)
		if _, _, err := w.WriteBlocks(context.Background(), changes, 0, 2, nil); err == nil {
			t.Errorf("%s: Write succeeded", name)
		}
	}
	w := s.NewWriter(testCollection, nil)
	if _, _, err := w.WriteBlocks(context.Background(), upserts([]materialize.Record{r}), 0, 2, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := w.WriteBlocks(context.Background(), nil, 0, 2, nil); err == nil {
		t.Error("a second Write succeeded")
	}
	if _, _, err := s.NewWriter("bad/id", nil).WriteBlocks(context.Background(), nil, 0, 0, nil); err == nil {
		t.Error("Write with a collection id holding a slash succeeded")
	}
	foreign := &segment.Manifest{FormatVersion: 1, CollectionID: "other", Version: 1}
	if _, _, err := s.NewWriter(testCollection, foreign).WriteBlocks(context.Background(), nil, 0, 0, nil); err == nil {
		t.Error("Write over another collection's base succeeded")
	}
}

func TestWriterGetReadsOnlyOwningBlocksOnce(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	s, blobs := NewStore(t, segment.Config{MaxBlockRecords: 100})
	recs := records(rng, "k%04d", 1000, 4) // 10 blocks of 100
	base, _, _ := commit(t, s, nil, upserts(recs))
	blobs.Reset()
	ctx := context.Background()
	w := s.NewWriter(testCollection, base)
	// Blocks 2 and 5, an absent id inside block 5's range, and ids outside
	// every range (no read needed).
	got, err := w.Get(ctx, []string{"k0250", "k0520", "k0520x", "a", "zzz"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || !reflect.DeepEqual(got["k0250"], recs[250]) || !reflect.DeepEqual(got["k0520"], recs[520]) {
		t.Errorf("Get returned %v", slices.Sorted(maps.Keys(got)))
	}
	if blobs.Gets() != 2 {
		t.Errorf("%d block reads, want 2", blobs.Gets())
	}
	// Mutating what Get returned does not leak into the write.
	got["k0520"].Embedding[0] = 999
	// Write into the same blocks reads nothing again.
	upd := newRecord(rng, "k0250", 4)
	m, _, err := w.WriteBlocks(ctx, []segment.Change{{ID: "k0250", Record: &upd}, {ID: "k0521"}}, 0, 4, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The write reads back the two blocks it writes, and no base block
	// again.
	if blobs.Gets() != 4 {
		t.Errorf("%d block reads after Write, want 4 (still 2, plus the read-backs of the 2 blocks written)", blobs.Gets())
	}
	after, err := s.Get(ctx, m, []string{"k0250", "k0251", "k0520", "k0521"})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(after["k0250"], upd) || !reflect.DeepEqual(after["k0251"], recs[251]) ||
		!reflect.DeepEqual(after["k0520"], recs[520]) || len(after) != 3 {
		t.Errorf("records after write: %v", after)
	}
}

// A property test: random batches of changes against a plain map, with
// small blocks so that splits and merges happen all the time.
func TestWriterMatchesAMapModel(t *testing.T) {
	t.Run("blocks", func(t *testing.T) { testWriterMatchesAMapModel(t, false) })
	// Write with a window of a few blocks and several encoders: runs send
	// blocks from their front, blocks finish out of order.
	t.Run("Write streaming", func(t *testing.T) { testWriterMatchesAMapModel(t, true) })
}

func testWriterMatchesAMapModel(t *testing.T, streaming bool) {
	// Deltas off: every round checks the block layout.
	cfg := segment.Config{MaxBlockRecords: 32, MinBlockRecords: 8, NoDeltas: true}
	s, _ := NewStore(t, cfg)
	rng := rand.New(rand.NewPCG(2026, 11))
	ctx := context.Background()
	model := map[string]materialize.Record{}
	var m *segment.Manifest
	universe := 800
	for round := range 30 {
		// A batch: mostly small, sometimes large, deletes and upserts.
		size := 1 + rng.IntN(40)
		if round%7 == 0 {
			size = 1 + rng.IntN(400)
		}
		delShare := rng.Float64() * 0.6
		batch := map[string]*materialize.Record{}
		for range size {
			id := fmt.Sprintf("id%05d", rng.IntN(universe))
			if rng.Float64() < delShare {
				batch[id] = nil
			} else {
				r := newRecord(rng, id, 3)
				batch[id] = &r
			}
		}
		ids := slices.Sorted(maps.Keys(batch))
		changes := make([]segment.Change, len(ids))
		for i, id := range ids {
			changes[i] = segment.Change{ID: id, Record: batch[id]}
		}

		w := s.NewWriter(testCollection, m)
		before, err := w.Get(ctx, ids)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			want, ok := model[id]
			got, gotOK := before[id]
			if ok != gotOK || (ok && !reflect.DeepEqual(got, want)) {
				t.Fatalf("round %d: Writer.Get(%s) = %v, %v; want %v, %v", round, id, got, gotOK, want, ok)
			}
		}
		var onBlock int64
		var (
			next  *segment.Manifest
			stats segment.WriteReport
		)
		if streaming {
			next, stats, err = w.Write(ctx, segment.Seq(changes), segment.WriteOptions{CompactionOffset: int64(round), Dimension: 3,
				OnBlock: func(n int64) { onBlock += n }, Encoders: 3, Window: 70})
		} else {
			next, stats, err = w.WriteBlocks(ctx, changes, int64(round), 3, func(n int64) { onBlock += n })
		}
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		key, _, err := w.WriteManifest(ctx, next)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range changes {
			if c.Record == nil {
				delete(model, c.ID)
			} else {
				model[c.ID] = *c.Record
			}
		}

		read, err := s.ReadManifest(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(read, next) {
			t.Fatalf("round %d: manifest read back differs", round)
		}
		checkRound(t, s, cfg, m, next, stats, onBlock, model, rng)
		m = next
	}
}

func checkRound(t *testing.T, s *segment.Store, cfg segment.Config, base, m *segment.Manifest, stats segment.WriteReport, onBlock int64, model map[string]materialize.Record, rng *rand.Rand) {
	t.Helper()
	ctx := context.Background()
	all := checkManifest(t, s, m, cfg)
	wantIDs := slices.Sorted(maps.Keys(model))
	if len(all) != len(wantIDs) {
		t.Fatalf("version %d holds %d records, model %d", m.Version, len(all), len(wantIDs))
	}
	for i, r := range all {
		if !reflect.DeepEqual(r, model[wantIDs[i]]) {
			t.Fatalf("version %d record %d: %+v, want %+v", m.Version, i, r, model[wantIDs[i]])
		}
	}

	// Stats and copy-on-write: blocks are the base's (reused) or new.
	baseKeys := map[string]segment.BlockRef{}
	if base != nil {
		for _, b := range base.Blocks {
			baseKeys[b.Key] = b
		}
	}
	var reused, written int
	var recs, bytes int64
	for _, b := range m.Blocks {
		if old, ok := baseKeys[b.Key]; ok {
			if old != b {
				t.Errorf("reused block %s changed: %+v -> %+v", b.Key, old, b)
			}
			reused++
			continue
		}
		written++
		recs += b.Records
		bytes += b.Bytes
		if b.Records < int64(cfg.MinBlockRecords) && len(m.Blocks) > 1 {
			t.Errorf("version %d: new block of %d records under the minimum %d", m.Version, b.Records, cfg.MinBlockRecords)
		}
	}
	want := segment.WriteReport{Kind: segment.WroteBlocks, BlocksWritten: written, BlocksReused: reused, BlocksDropped: len(baseKeys) - reused, RecordsWritten: recs, BytesWritten: bytes}
	if stats != want || onBlock != bytes {
		t.Errorf("version %d: stats %+v (onBlock %d), want %+v", m.Version, stats, onBlock, want)
	}

	// Get: present and absent ids.
	var ids []string
	for range 50 {
		ids = append(ids, fmt.Sprintf("id%05d", rng.IntN(850)))
	}
	got, err := s.Get(ctx, m, ids)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		want, ok := model[id]
		if g, gotOK := got[id]; ok != gotOK || (ok && !reflect.DeepEqual(g, want)) {
			t.Fatalf("Get(%s) = %v, %v; want %v, %v", id, g, gotOK, want, ok)
		}
	}

	// Scan from a random point (an existing id, or not), with an early stop.
	after := fmt.Sprintf("id%05d", rng.IntN(850))
	if rng.IntN(4) == 0 {
		after = ""
	}
	limit := 1 + rng.IntN(200)
	var scanned []string
	if err := s.Scan(ctx, m, after, func(r materialize.Record) bool {
		if !reflect.DeepEqual(r, model[r.ID]) {
			t.Errorf("Scan gave %+v, want %+v", r, model[r.ID])
		}
		scanned = append(scanned, r.ID)
		return len(scanned) < limit
	}); err != nil {
		t.Fatal(err)
	}
	var wantScan []string
	for _, id := range wantIDs {
		if id > after && len(wantScan) < limit {
			wantScan = append(wantScan, id)
		}
	}
	if !slices.Equal(scanned, wantScan) {
		t.Fatalf("Scan(after %q, limit %d) = %d ids, want %d", after, limit, len(scanned), len(wantScan))
	}
}

func TestAbortDeletesOnlyWhatTheWriterWrote(t *testing.T) {
	rng := rand.New(rand.NewPCG(10, 10))
	s, blobs := NewStore(t, segment.Config{MaxBlockRecords: 100})
	ctx := context.Background()
	base, _, baseKey := commit(t, s, nil, upserts(records(rng, "k%04d", 1000, 4)))
	before := listKeys(t, blobs, "")

	blobs.Reset()
	w := s.NewWriter(testCollection, base)
	var ids []string
	for i := 0; i < 1000; i += 7 {
		ids = append(ids, fmt.Sprintf("k%04d", i))
	}
	m, stats, err := w.WriteBlocks(ctx, deletes(ids...), 0, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := w.WriteManifest(ctx, m); err != nil {
		t.Fatal(err)
	}
	wrote := blobs.PutKeys()
	if len(wrote) != stats.BlocksWritten+1 {
		t.Fatalf("%d puts, want %d blocks + 1 manifest", len(wrote), stats.BlocksWritten)
	}
	if err := w.Abort(ctx); err != nil {
		t.Fatal(err)
	}
	if blobs.Deletes() != len(wrote) {
		t.Errorf("%d deletes, want %d", blobs.Deletes(), len(wrote))
	}
	if after := listKeys(t, blobs, ""); !slices.Equal(after, before) {
		t.Errorf("after abort: %v, want the base's %v", after, before)
	}
	if want := sorted(blockKeys(base), []string{baseKey}); !slices.Equal(before, want) {
		t.Errorf("base blobs %v, want %v", before, want)
	}
	// Abort twice is harmless.
	if err := w.Abort(ctx); err != nil {
		t.Errorf("second abort: %v", err)
	}
}

func TestCancelledBeforeABlockPutStopsThereAndAbortCleansUp(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 11))
	s, blobs := NewStore(t, segment.Config{MaxBlockRecords: 10})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	blocks := 0
	w := s.NewWriter(testCollection, nil)
	_, _, err := w.WriteBlocks(ctx, upserts(records(rng, "k%04d", 100, 4)), 0, 4, func(int64) {
		blocks++
		if blocks == 2 {
			cancel() // between the second and the third block
		}
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Write: %v, want context.Canceled", err)
	}
	if blobs.Puts() != 2 {
		t.Errorf("%d puts, want 2 (nothing after the cancellation)", blobs.Puts())
	}
	if got := listKeys(t, blobs, ""); len(got) != 2 {
		t.Errorf("%d blobs stored, want 2", len(got))
	}
	if err := w.Abort(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := listKeys(t, blobs, ""); len(got) != 0 {
		t.Errorf("after abort: %v", got)
	}
}

func TestCancelWhileAPutIsHeld(t *testing.T) {
	rng := rand.New(rand.NewPCG(12, 12))
	mem := segmenttest.NewMem(t)
	hold := make(chan struct{}) // never closed
	entered := make(chan string, 1)
	blobs := &segmenttest.FaultyBlobs{Blobs: mem, Hold: hold, BeforePut: func(_ int, key string) { entered <- key }}
	s := segment.NewStore(blobs, segment.Config{MaxBlockRecords: 10}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	w := s.NewWriter(testCollection, nil)
	done := make(chan error, 1)
	go func() {
		_, _, err := w.WriteBlocks(ctx, upserts(records(rng, "k%04d", 100, 4)), 0, 4, nil)
		done <- err
	}()
	<-entered
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Write: %v, want context.Canceled", err)
	}
	if blobs.Puts() != 1 {
		t.Errorf("%d puts, want 1", blobs.Puts())
	}
	if err := w.Abort(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := listKeys(t, mem, ""); len(got) != 0 {
		t.Errorf("after abort: %v", got)
	}
}

func TestFailedBlockPutIsReportedAndAbortCleansUp(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 13))
	s, blobs := NewStore(t, segment.Config{MaxBlockRecords: 100})
	base, _, _ := commit(t, s, nil, upserts(records(rng, "k%04d", 500, 4)))
	before := listKeys(t, blobs, "")
	blobs.Reset()
	blobs.FailPutAt = 2
	w := s.NewWriter(testCollection, base)
	_, _, err := w.WriteBlocks(context.Background(), deletes("k0001", "k0101", "k0201", "k0301"), 0, 0, nil)
	if !errors.Is(err, segmenttest.ErrInjected) {
		t.Fatalf("Write: %v, want the injected fault", err)
	}
	if blobs.Puts() != 2 || len(blobs.PutKeys()) != 1 {
		t.Errorf("%d puts (%d stored), want 2 (1)", blobs.Puts(), len(blobs.PutKeys()))
	}
	if err := w.Abort(context.Background()); err != nil {
		t.Fatal(err)
	}
	if blobs.Deletes() != 2 { // the stored block and the failed key
		t.Errorf("%d deletes, want 2", blobs.Deletes())
	}
	if after := listKeys(t, blobs, ""); !slices.Equal(after, before) {
		t.Errorf("after abort: %v, want %v", after, before)
	}
}

func TestWriteManifestKeysAndChecks(t *testing.T) {
	rng := rand.New(rand.NewPCG(14, 14))
	s, _ := NewStore(t, segment.Config{})
	ctx := context.Background()
	w := s.NewWriter(testCollection, nil)
	m, _, err := w.WriteBlocks(ctx, upserts(records(rng, "k%02d", 10, 4)), 9, 4, nil)
	if err != nil {
		t.Fatal(err)
	}
	key, size, err := w.WriteManifest(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	prefix := "collections/" + testCollection + "/manifests/00000000000000000001-"
	if len(key) != len(prefix)+36+len(".json") || key[:len(prefix)] != prefix || size <= 0 {
		t.Errorf("manifest key %q (%d bytes)", key, size)
	}
	for _, b := range m.Blocks {
		if want := "collections/" + testCollection + "/blocks/"; len(b.Key) != len(want)+36+len(".parquet") || b.Key[:len(want)] != want {
			t.Errorf("block key %q", b.Key)
		}
	}
	if _, err := s.ReadManifest(ctx, "collections/x/manifests/missing.json"); !errors.Is(err, segment.ErrNotExist) {
		t.Errorf("missing manifest: %v, want ErrNotExist", err)
	}
	bad := *m
	bad.RecordCount++
	if _, _, err := w.WriteManifest(ctx, &bad); err == nil {
		t.Error("inconsistent manifest written")
	}
	bad = *m
	bad.CollectionID = "other"
	if _, _, err := w.WriteManifest(ctx, &bad); err == nil {
		t.Error("manifest of another collection written")
	}
}

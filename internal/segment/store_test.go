package segment_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/compactorhq/compactor/internal/clock"
	"github.com/compactorhq/compactor/internal/materialize"
	"github.com/compactorhq/compactor/internal/segment"
	"github.com/compactorhq/compactor/internal/segment/segmenttest"
)

func TestStoreGetReadsOnlyTheBlocksHoldingIDs(t *testing.T) {
	rng := rand.New(rand.NewPCG(20, 20))
	s, blobs := NewStore(t, segment.Config{MaxBlockRecords: 100})
	recs := records(rng, "k%04d0", 1000, 4) // 10 blocks of 100: k00000 … k09990
	m, _, _ := commit(t, s, nil, upserts(recs))
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		ids   []string
		reads int
		found int
	}{
		{"none", nil, 0, 0},
		{"two blocks", []string{"k00100", "k09990", "k00110"}, 2, 3},
		{"absent inside a block's range", []string{"k00105"}, 1, 0},
		{"outside every range", []string{"a", "k00995", "zzz"}, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			blobs.Reset()
			got, err := s.Get(ctx, m, tc.ids)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != tc.found || blobs.Gets() != tc.reads {
				t.Errorf("%d records in %d reads, want %d in %d", len(got), blobs.Gets(), tc.found, tc.reads)
			}
			for id, r := range got {
				var i int
				fmt.Sscanf(id, "k%04d0", &i)
				if !reflect.DeepEqual(r, recs[i]) {
					t.Errorf("Get(%s) = %+v, want %+v", id, r, recs[i])
				}
			}
		})
	}
	got, err := s.Get(ctx, nil, []string{"k00100"})
	if err != nil || len(got) != 0 {
		t.Errorf("Get on a nil manifest: %v, %v", got, err)
	}
}

func TestStoreScanStartsAtTheBlockOwningAfter(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 21))
	s, blobs := NewStore(t, segment.Config{MaxBlockRecords: 100})
	recs := records(rng, "k%04d", 1000, 4)
	m, _, _ := commit(t, s, nil, upserts(recs))
	ctx := context.Background()

	blobs.Reset()
	var got []materialize.Record
	err := s.Scan(ctx, m, "k0705", func(r materialize.Record) bool {
		got = append(got, r)
		return len(got) < 3
	})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, recs[706:709]) {
		t.Errorf("Scan after k0705 gave %d records starting %q", len(got), got[0].ID)
	}
	if blobs.Gets() != 1 {
		t.Errorf("%d block reads, want 1", blobs.Gets())
	}

	// The last id of a block: the scan goes on in the next block only.
	blobs.Reset()
	got = nil
	if err := s.Scan(ctx, m, "k0299", func(r materialize.Record) bool { got = append(got, r); return false }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].ID != "k0300" || blobs.Gets() != 1 {
		t.Errorf("Scan after k0299: %d records, %d reads", len(got), blobs.Gets())
	}

	// A full scan reads every block once, in order.
	blobs.Reset()
	got = nil
	if err := s.Scan(ctx, m, "", func(r materialize.Record) bool { got = append(got, r); return true }); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, recs) || blobs.Gets() != 10 {
		t.Errorf("full scan: %d records in %d reads", len(got), blobs.Gets())
	}

	// Past the end, and a nil manifest: nothing, no reads.
	blobs.Reset()
	if err := s.Scan(ctx, m, "zzz", func(materialize.Record) bool { t.Error("called"); return true }); err != nil || blobs.Gets() != 0 {
		t.Errorf("scan past the end: %v, %d reads", err, blobs.Gets())
	}
	if err := s.Scan(ctx, nil, "", func(materialize.Record) bool { t.Error("called"); return true }); err != nil {
		t.Error(err)
	}

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.Scan(cctx, m, "", func(materialize.Record) bool { return true }); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled scan: %v", err)
	}
}

func TestStoreReadBlockDetectsAMissingOrMismatchedBlock(t *testing.T) {
	rng := rand.New(rand.NewPCG(22, 22))
	s, blobs := NewStore(t, segment.Config{MaxBlockRecords: 100})
	m, _, _ := commit(t, s, nil, upserts(records(rng, "k%04d", 200, 4)))
	ctx := context.Background()
	ref := m.Blocks[0]
	wrongCount := ref
	wrongCount.Records++
	wrongRange := ref
	wrongRange.MinID = "k"
	wrongSize := ref
	wrongSize.Bytes--
	for name, r := range map[string]segment.BlockRef{"record count": wrongCount, "id range": wrongRange, "size": wrongSize} {
		if _, err := s.ReadBlock(ctx, r); !errors.Is(err, segment.ErrCorrupt) || !strings.Contains(err.Error(), ref.Key) {
			t.Errorf("a block with another %s than its manifest entry: %v, want ErrCorrupt naming the key", name, err)
		}
	}
	garbage := segment.BlockRef{Key: "collections/" + testCollection + "/blocks/garbage.parquet", MinID: "a", MaxID: "a", Records: 1}
	if err := blobs.Put(ctx, garbage.Key, []byte("not parquet")); err != nil {
		t.Fatal(err)
	}
	_, err := s.ReadBlock(ctx, garbage)
	var ce *segment.CorruptError
	if !errors.As(err, &ce) || ce.Kind != segment.KindBlock || ce.Key != garbage.Key || ce.CollectionID != testCollection {
		t.Errorf("garbage block: %#v, want a *CorruptError of kind block naming the key and the collection", err)
	}
	if want := "collection " + testCollection + ": corrupt block " + garbage.Key + ": "; !strings.HasPrefix(err.Error(), want) {
		t.Errorf("garbage block: %q, want it to start with %q", err, want)
	}
	badManifest := "collections/" + testCollection + "/manifests/00000000000000000009-bad.json"
	if err := blobs.Put(ctx, badManifest, []byte(`{"format_version": 1, "collection_id": "`+testCollection+`", "version": 0}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReadManifest(ctx, badManifest); !errors.Is(err, segment.ErrCorrupt) || errors.Is(err, segment.ErrNotExist) {
		t.Errorf("undecodable manifest: %v, want ErrCorrupt", err)
	}
	if err := blobs.Delete(ctx, ref.Key); err != nil {
		t.Fatal(err)
	}
	_, err = s.ReadBlock(ctx, ref)
	if !errors.Is(err, segment.ErrNotExist) || !strings.Contains(err.Error(), ref.Key) {
		t.Errorf("missing block: %v, want ErrNotExist naming the key", err)
	}
}

func TestGC(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 23))
	ctx := context.Background()
	fake := clock.NewFake(epoch)
	faulty := segmenttest.NewFaulty(segmenttest.NewMem(t))
	blobs := segmenttest.NewClocked(faulty, fake.Now)
	s := segment.NewStore(blobs, segment.Config{MaxBlockRecords: 100}, fake.Now)
	recs := records(rng, "k%04d", 1000, 4)

	// t0: version 1. t0+2h: version 2 (rewrites block 0), and a failed
	// compaction's orphan block. t0+3h: an in-flight compaction's block.
	v1, _, v1Key := commit(t, s, nil, upserts(recs))
	fake.Advance(2 * time.Hour)
	v2, _, v2Key := commit(t, s, v1, deletes("k0000"))
	orphan := s.NewWriter(testCollection, v2)
	if _, _, err := orphan.WriteBlocks(ctx, deletes("k0500"), 0, 0, nil); err != nil {
		t.Fatal(err)
	}
	orphanKeys := diff(listKeys(t, blobs, ""), sorted(blockKeys(v1), blockKeys(v2), []string{v1Key, v2Key}))
	fake.Advance(time.Hour)
	young := s.NewWriter(testCollection, v2)
	if _, _, err := young.WriteBlocks(ctx, deletes("k0900"), 0, 0, nil); err != nil {
		t.Fatal(err)
	}
	youngKeys := diff(listKeys(t, blobs, ""), sorted(blockKeys(v1), blockKeys(v2), []string{v1Key, v2Key}, orphanKeys))
	if len(orphanKeys) != 1 || len(youngKeys) != 1 {
		t.Fatalf("setup: %d orphan and %d young blobs, want 1 and 1", len(orphanKeys), len(youngKeys))
	}
	other := segment.NewStore(blobs, segment.Config{}, fake.Now)
	ow := other.NewWriter("other-collection", nil)
	if _, _, err := ow.WriteBlocks(ctx, upserts(recs[:5]), 0, 0, nil); err != nil {
		t.Fatal(err)
	}
	otherKeys := listKeys(t, blobs, "collections/other-collection/")

	// A kept manifest that is missing, or of another collection: an error,
	// nothing deleted.
	before := listKeys(t, blobs, "")
	for _, keep := range [][]string{
		{v2Key, "collections/" + testCollection + "/manifests/00000000000000000003-missing.json"},
		{"collections/other-collection/manifests/x.json"},
		{"collections/" + testCollection + "/blocks/x.parquet"},
	} {
		if _, err := s.GC(ctx, testCollection, segment.GCPlan{Keep: keep, OrphanGrace: 30 * time.Minute}); err == nil {
			t.Errorf("GC keeping %v succeeded", keep)
		}
		if after := listKeys(t, blobs, ""); !slices.Equal(after, before) {
			t.Fatalf("GC keeping %v deleted %v", keep, diff(before, after))
		}
	}
	if _, err := s.GC(ctx, testCollection, segment.GCPlan{OrphanGrace: -time.Second}); err == nil {
		t.Error("GC with a negative grace succeeded")
	}

	// Keep v2 with a 30 min grace: v1's manifest and dropped block (2 h old)
	// and the orphan (1 h old) go; v2, its blocks (some from v1) and the
	// young block stay; the other collection is not touched.
	wantDeleted := sorted(diff(blockKeys(v1), blockKeys(v2)), []string{v1Key}, orphanKeys)
	var wantBytes int64
	infos, err := blobs.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range infos {
		if slices.Contains(wantDeleted, i.Key) {
			wantBytes += i.Size
		}
	}
	faulty.Reset()
	stats, err := s.GC(ctx, testCollection, segment.GCPlan{Keep: []string{v2Key}, OrphanGrace: 30 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	// The manifest goes first: a pass cut short never leaves a manifest
	// whose blocks are gone.
	if got := faulty.DeleteKeys(); len(got) == 0 || got[0] != v1Key {
		t.Errorf("deleted in the order %v, want the manifest %s first", got, v1Key)
	}
	if got := diff(before, listKeys(t, blobs, "")); !slices.Equal(got, wantDeleted) {
		t.Errorf("GC deleted %v, want %v", got, wantDeleted)
	}
	if stats != (segment.GCStats{BlobsDeleted: len(wantDeleted), BytesDeleted: wantBytes}) {
		t.Errorf("stats %+v, want %d blobs, %d bytes", stats, len(wantDeleted), wantBytes)
	}
	if _, err := s.ReadManifest(ctx, v2Key); err != nil {
		t.Errorf("kept manifest: %v", err)
	}
	if err := s.Scan(ctx, v2, "", func(materialize.Record) bool { return true }); err != nil {
		t.Errorf("kept version unreadable: %v", err)
	}
	if got := listKeys(t, blobs, "collections/other-collection/"); !slices.Equal(got, otherKeys) {
		t.Errorf("other collection: %v, want %v", got, otherKeys)
	}

	// Once older than the grace, the young block goes too.
	fake.Advance(time.Hour)
	stats, err = s.GC(ctx, testCollection, segment.GCPlan{Keep: []string{v2Key}, OrphanGrace: 30 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if stats.BlobsDeleted != 1 || slices.Contains(listKeys(t, blobs, ""), youngKeys[0]) {
		t.Errorf("second GC: %+v", stats)
	}
}

// TestGCExpiredAndSparedOrphans: the blobs of an expired version go
// whatever their age, except blocks a kept version shares; with
// SpareOrphans, unreferenced blobs stay however old they are.
func TestGCExpiredAndSparedOrphans(t *testing.T) {
	rng := rand.New(rand.NewPCG(29, 29))
	ctx := context.Background()
	fake := clock.NewFake(epoch)
	blobs := segmenttest.NewClocked(segmenttest.NewMem(t), fake.Now)
	s := segment.NewStore(blobs, segment.Config{MaxBlockRecords: 100}, fake.Now)
	recs := records(rng, "k%04d", 1000, 4)
	v1, _, v1Key := commit(t, s, nil, upserts(recs))
	v2, _, v2Key := commit(t, s, v1, deletes("k0000"))
	orphan := s.NewWriter(testCollection, v2)
	if _, _, err := orphan.WriteBlocks(ctx, deletes("k0500"), 0, 0, nil); err != nil {
		t.Fatal(err)
	}
	fake.Advance(time.Hour)
	orphanKeys := diff(listKeys(t, blobs, ""), sorted(blockKeys(v1), blockKeys(v2), []string{v1Key, v2Key}))
	if len(orphanKeys) != 1 {
		t.Fatalf("setup: %d orphans, want 1", len(orphanKeys))
	}
	corrupt := "collections/" + testCollection + "/manifests/00000000000000000000-corrupt.json"
	if err := blobs.Put(ctx, corrupt, []byte("{not json")); err != nil {
		t.Fatal(err)
	}
	before := listKeys(t, blobs, "")
	missing := "collections/" + testCollection + "/manifests/00000000000000000000-gone.json"
	// Nothing is older than the orphan grace: only the expired versions' own
	// blobs go, a missing expired manifest is skipped and an undecodable one
	// goes alone.
	stats, err := s.GC(ctx, testCollection, segment.GCPlan{Keep: []string{v2Key}, Expired: []string{v1Key, missing, corrupt}, OrphanGrace: 2 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	want := sorted(diff(blockKeys(v1), blockKeys(v2)), []string{v1Key, corrupt})
	if got := diff(before, listKeys(t, blobs, "")); !slices.Equal(got, want) || stats.BlobsDeleted != len(want) {
		t.Fatalf("deleted %v (%+v), want %v", got, stats, want)
	}
	// The orphan is old enough but spared while a compaction is in flight.
	if _, err := s.GC(ctx, testCollection, segment.GCPlan{Keep: []string{v2Key}, SpareOrphans: true}); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(listKeys(t, blobs, ""), orphanKeys[0]) {
		t.Fatalf("orphan %s deleted although spared", orphanKeys[0])
	}
	if _, err := s.GC(ctx, testCollection, segment.GCPlan{Keep: []string{v2Key}, OrphanGrace: 30 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	if got, want := listKeys(t, blobs, ""), sorted(blockKeys(v2), []string{v2Key}); !slices.Equal(got, want) {
		t.Fatalf("left %v, want only version 2: %v", got, want)
	}
}

// diff returns the keys of a (sorted) not in b.
func diff(a, b []string) []string {
	out := []string{}
	for _, k := range a {
		if !slices.Contains(b, k) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

func TestDeleteCollectionDeletesItsPrefixOnly(t *testing.T) {
	rng := rand.New(rand.NewPCG(24, 24))
	mem := segmenttest.NewMem(t)
	s := segment.NewStore(mem, segment.Config{MaxBlockRecords: 10}, nil)
	ctx := context.Background()
	commit(t, s, nil, upserts(records(rng, "k%04d", 50, 4)))
	w := s.NewWriter(testCollection+"x", nil) // a collection whose id extends this one's
	if _, _, err := w.WriteBlocks(ctx, upserts(records(rng, "k%04d", 5, 4)), 0, 0, nil); err != nil {
		t.Fatal(err)
	}
	keep := listKeys(t, mem, "collections/"+testCollection+"x/")
	if err := s.DeleteCollection(ctx, testCollection); err != nil {
		t.Fatal(err)
	}
	if got := listKeys(t, mem, ""); !slices.Equal(got, keep) {
		t.Errorf("left %v, want %v", got, keep)
	}
	for _, bad := range []string{"", "a/b", ".."} {
		if err := s.DeleteCollection(ctx, bad); err == nil {
			t.Errorf("DeleteCollection(%q) succeeded", bad)
		}
	}
}

func TestOpenBucketFileCreatesTheDirectoryAndMapsErrors(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data", "blobs")
	ctx := context.Background()
	b, closer, err := segment.OpenBucket(ctx, "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		t.Fatalf("directory not created: %v", err)
	}
	// Files are plain: no sidecar metadata next to them.
	if err := b.Put(ctx, "collections/c/blocks/x.parquet", []byte("x")); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(filepath.Join(dir, "collections", "c", "blocks"))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != "x.parquet" {
		t.Errorf("files %v, want x.parquet only", entries)
	}
}

func TestOpenBucketRejectsUnknownSchemes(t *testing.T) {
	if _, _, err := segment.OpenBucket(context.Background(), "nope://x"); err == nil {
		t.Error("opened nope://")
	}
}

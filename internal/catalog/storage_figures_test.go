package catalog_test

import (
	"testing"

	"github.com/compactorhq/compactor/internal/catalog"
)

func TestListStorageFiguresAreTheCurrentVersionsAndTheVersionsKept(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		c := e.open(t)
		a := mustCreate(t, c, "a", 4)
		b := mustCreate(t, c, "b", 4)
		mustCreate(t, c, "never-compacted", 4)
		mustAppend(t, c, a.ID, adds("a", 10, 4))
		for v, cm := range []catalog.Commit{
			{CompactionOffset: 5, RecordCount: 5, SegmentBytes: 1000, BlockCount: 1},
			{CompactionOffset: 10, RecordCount: 10, SegmentBytes: 3000, BlockCount: 3},
		} {
			cm.CollectionID, cm.BaseVersion, cm.NewVersion, cm.ManifestKey = a.ID, int64(v), int64(v+1), "m"
			if err := c.CommitCompaction(ctx, cm); err != nil {
				t.Fatal(err)
			}
		}
		mustAppend(t, c, b.ID, adds("b", 2, 4))
		if err := c.CommitCompaction(ctx, catalog.Commit{CollectionID: b.ID, NewVersion: 1, ManifestKey: "m", CompactionOffset: 2, RecordCount: 2, SegmentBytes: 70, BlockCount: 1}); err != nil {
			t.Fatal(err)
		}
		got, err := c.ListStorageFigures(ctx)
		if err != nil {
			t.Fatal(err)
		}
		equal(t, "storage figures", got, map[string]catalog.StorageFigures{
			a.ID: {SegmentBytes: 3000, BlockCount: 3, VersionsKept: 2},
			b.ID: {SegmentBytes: 70, BlockCount: 1, VersionsKept: 1},
		})
	})
}

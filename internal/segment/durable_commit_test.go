package segment_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/catalog/catalogtest"
	"github.com/compactorhq/compactor/internal/compaction"
	"github.com/compactorhq/compactor/internal/materialize"
	"github.com/compactorhq/compactor/internal/segment"
)

// TestCompactionCommitsOnlyDurableBlobs runs real compactions over a
// file:// store whose file system calls are recorded: at the moment the
// compactor commits in the catalog, every blob it has written (every block
// and the manifest of the version being committed) is durable, and the
// committed version names only blobs that were.
func TestCompactionCommitsOnlyDurableBlobs(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	blobs, closer, cfs := segment.OpenCrashBucket(t, root)
	defer closer.Close()
	cat := catalogtest.Open(t)
	comp, err := compaction.New(cat, segment.NewStore(blobs, segment.Config{MaxBlockRecords: 8, MinBlockRecords: 2}, nil), compaction.DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	coll, err := cat.CreateCollection(ctx, "durable", 2)
	if err != nil {
		t.Fatal(err)
	}
	for round := range 3 {
		ops := make([]materialize.OperationRecord, 30)
		for i := range ops {
			ops[i] = materialize.OperationRecord{Op: materialize.OpUpsert, ID: strings.Repeat("x", i%7+1) + string(rune('a'+(i+round*3)%26)), Embedding: []float32{float32(round), float32(i)}}
		}
		if _, _, err := cat.AppendLog(ctx, coll.ID, ops, catalog.AppendLimits{}); err != nil {
			t.Fatal(err)
		}
		durableAtCommit := map[string]bool{}
		_, err := comp.Compact(ctx, coll.ID, compaction.Options{CommitJob: func(compaction.Result) *catalog.Job {
			// Called right before the commit transaction.
			err := filepath.WalkDir(filepath.Join(root, "collections"), func(path string, d os.DirEntry, err error) error {
				if err != nil || d.IsDir() || strings.HasSuffix(path, ".tmp") {
					return err
				}
				rel, _ := filepath.Rel(root, path)
				key := filepath.ToSlash(rel)
				disk, err := os.ReadFile(path)
				if err != nil {
					return err
				}
				if got, ok := cfs.Durable(key); !ok || !bytes.Equal(got, disk) {
					t.Errorf("round %d: %s is not durable at the commit", round, key)
				}
				durableAtCommit[key] = true
				return nil
			})
			if err != nil {
				t.Error(err)
			}
			return nil
		}})
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		c, err := cat.GetCollection(ctx, coll.ID)
		if err != nil {
			t.Fatal(err)
		}
		m, err := segment.NewStore(blobs, segment.Config{}, nil).ReadManifest(ctx, c.ManifestKey)
		if err != nil {
			t.Fatal(err)
		}
		for _, key := range append(blockKeys(m), c.ManifestKey) {
			if !durableAtCommit[key] {
				t.Errorf("round %d: committed version %d names %s, which was not durable at the commit", round, c.SegmentVersion, key)
			}
		}
	}
}

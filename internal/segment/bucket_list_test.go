package segment_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/compactorhq/compactor/internal/segment"
)

// TestFileListingSurvivesConcurrentPuts lists a file:// prefix while another
// goroutine keeps putting blobs under it. fileblob's listing stats each
// entry it reads, so a Put's temporary file renamed between the two failed
// about one listing in a hundred here; List must never fail, and must list
// every blob that existed throughout.
func TestFileListingSurvivesConcurrentPuts(t *testing.T) {
	ctx := context.Background()
	blobs, closer, err := segment.OpenBucket(ctx, "file://"+t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	if err := blobs.Put(ctx, "collections/c/kept", []byte("x")); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if err := blobs.Put(ctx, fmt.Sprintf("collections/c/index/%d.vchunk", i%50), make([]byte, 4096)); err != nil {
				t.Error(err)
				return
			}
		}
	})
	defer func() { close(stop); wg.Wait() }()
	for i := range 1000 {
		got, err := blobs.List(ctx, "collections/c/")
		if err != nil {
			t.Fatalf("listing %d while puts run: %v", i, err)
		}
		if !slices.ContainsFunc(got, func(b segment.BlobInfo) bool { return b.Key == "collections/c/kept" }) {
			t.Fatalf("listing %d while puts run: the blob put before them is missing from %d listed", i, len(got))
		}
	}
}

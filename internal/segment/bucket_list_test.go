package segment_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/compactorhq/compactor/internal/segment"
)

// TestFileListingSurvivesConcurrentPuts lists a file:// prefix while another
// goroutine keeps putting blobs under it. The driver walks the directory
// and stats each entry, so a Put's temporary file renamed between the two
// fails a walk (about one walk in a hundred here without the retry); List
// lists again and must not fail.
func TestFileListingSurvivesConcurrentPuts(t *testing.T) {
	ctx := context.Background()
	blobs, closer, err := segment.OpenBucket(ctx, "file://"+t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
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
		if _, err := blobs.List(ctx, "collections/c/"); err != nil {
			t.Fatalf("listing %d while puts run: %v", i, err)
		}
	}
}

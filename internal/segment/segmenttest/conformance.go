package segmenttest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/compactorhq/compactor/internal/segment"
)

// Conformance checks the segment.Blobs contract the segment store relies
// on, on an empty store b: a missing blob is ErrNotExist naming the key and
// deleting it is not an error; Put replaces; a blob of several MiB (past
// S3's 5 MiB multipart part size) reads back byte for byte; List returns
// exactly the keys under a prefix (not those of a sibling prefix that
// shares its first characters), sorted, with sizes and modification times,
// across more than one list page; Delete removes; a cancelled context fails
// a call. Every backend the product opens by URL (file://, mem://, s3://)
// runs it.
func Conformance(t *testing.T, b segment.Blobs) {
	ctx := context.Background()
	t.Run("a missing blob is ErrNotExist and deleting it is not an error", func(t *testing.T) {
		_, err := b.Get(ctx, "a/missing")
		if !errors.Is(err, segment.ErrNotExist) || !strings.Contains(err.Error(), "a/missing") {
			t.Errorf("Get of a missing blob: %v, want ErrNotExist naming the key", err)
		}
		if err := b.Delete(ctx, "a/missing"); err != nil {
			t.Errorf("Delete of a missing blob: %v", err)
		}
	})
	t.Run("put replaces a blob", func(t *testing.T) {
		for _, v := range []string{"one", "two", ""} {
			if err := b.Put(ctx, "a/k", []byte(v)); err != nil {
				t.Fatal(err)
			}
			if got, err := b.Get(ctx, "a/k"); err != nil || string(got) != v {
				t.Fatalf("Get after Put(%q) = %q, %v", v, got, err)
			}
		}
		if err := b.Put(ctx, "a/k", []byte("two")); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("a large blob reads back byte for byte", func(t *testing.T) {
		data := make([]byte, 6<<20+1)
		rng := rand.New(rand.NewPCG(6, 6))
		for i := range data {
			data[i] = byte(rng.Uint32())
		}
		if err := b.Put(ctx, "large/blob.parquet", data); err != nil {
			t.Fatal(err)
		}
		got, err := b.Get(ctx, "large/blob.parquet")
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("Get of %d bytes: %d bytes, equal %v, %v", len(data), len(got), bytes.Equal(got, data), err)
		}
		if err := b.Delete(ctx, "large/blob.parquet"); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("list returns the keys under a prefix in order across pages", func(t *testing.T) {
		// More keys than one list page (1,000), written by a few
		// goroutines, beside a sibling prefix "pp/".
		const n = 1001
		before := time.Now()
		var wg sync.WaitGroup
		errs := make(chan error, n)
		keys := make(chan int)
		for range 8 {
			wg.Go(func() {
				for i := range keys {
					errs <- b.Put(ctx, fmt.Sprintf("p/%05d", i), []byte{byte(i)})
				}
			})
		}
		for i := range n {
			keys <- i
		}
		close(keys)
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		if err := b.Put(ctx, "pp/sibling", []byte("xy")); err != nil {
			t.Fatal(err)
		}
		after := time.Now()
		infos, err := b.List(ctx, "p/")
		if err != nil {
			t.Fatal(err)
		}
		if len(infos) != n {
			t.Fatalf("List(p/) gave %d blobs, want %d", len(infos), n)
		}
		for i, info := range infos {
			// Object stores keep modification times to the second.
			if info.Key != fmt.Sprintf("p/%05d", i) || info.Size != 1 ||
				info.ModTime.Before(before.Add(-2*time.Second)) || info.ModTime.After(after.Add(2*time.Second)) {
				t.Fatalf("List(p/)[%d] = %+v, want key p/%05d, size 1, a time in [%s, %s]", i, info, i, before, after)
			}
		}
		if infos, err := b.List(ctx, "pp/"); err != nil || len(infos) != 1 || infos[0].Key != "pp/sibling" || infos[0].Size != 2 {
			t.Errorf("List(pp/) = %+v, %v", infos, err)
		}
		if infos, err := b.List(ctx, "a/"); err != nil || len(infos) != 1 || infos[0].Key != "a/k" || infos[0].Size != 3 {
			t.Errorf("List(a/) = %+v, %v", infos, err)
		}
		if infos, err := b.List(ctx, "none/"); err != nil || len(infos) != 0 {
			t.Errorf("List(none/) = %+v, %v", infos, err)
		}
	})
	t.Run("delete removes a blob", func(t *testing.T) {
		if err := b.Delete(ctx, "a/k"); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Get(ctx, "a/k"); !errors.Is(err, segment.ErrNotExist) {
			t.Errorf("Get after Delete: %v", err)
		}
		if infos, err := b.List(ctx, "a/"); err != nil || len(infos) != 0 {
			t.Errorf("List(a/) after Delete = %+v, %v", infos, err)
		}
	})
	t.Run("a cancelled context fails a call", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if err := b.Put(cctx, "c/k", []byte("x")); err == nil {
			t.Error("Put with a cancelled context succeeded")
		}
		if _, err := b.List(cctx, "p/"); err == nil {
			t.Error("List with a cancelled context succeeded")
		}
	})
}

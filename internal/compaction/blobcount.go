package compaction

import (
	"context"
	"sync/atomic"

	"github.com/compactorhq/compactor/internal/segment"
)

// blobCounts counts the blob store calls of one compaction (the Gets and
// Puts made with a context that carries it), for the job's actual figures
// beside its prediction. Safe for concurrent use: the writer encodes and
// puts blocks in parallel.
type blobCounts struct {
	gets, puts, bytesRead, bytesWritten atomic.Int64
}

type blobCountsKey struct{}

// withBlobCounts returns ctx carrying n: the Blobs of CountBlobs count
// the calls made with it.
func withBlobCounts(ctx context.Context, n *blobCounts) context.Context {
	return context.WithValue(ctx, blobCountsKey{}, n)
}

// CountBlobs returns b counting, per compaction, the Gets (and bytes
// read) and Puts it serves (a Get of a missing blob counts as a call);
// calls outside a compaction are passed through uncounted. The binary
// wraps the segment store's blobs with it, so that a job's page shows its
// blob calls beside their prediction; without it they read 0.
func CountBlobs(b segment.Blobs) segment.Blobs { return countingBlobs{b} }

type countingBlobs struct{ segment.Blobs }

func (c countingBlobs) Get(ctx context.Context, key string) ([]byte, error) {
	data, err := c.Blobs.Get(ctx, key)
	c.countGet(ctx, data)
	return data, err
}

// GetBuffer implements segment.BufferGetter, passing buf to the store.
func (c countingBlobs) GetBuffer(ctx context.Context, key string, buf []byte) ([]byte, error) {
	data, err := segment.GetBuffer(ctx, c.Blobs, key, buf)
	c.countGet(ctx, data)
	return data, err
}

func (c countingBlobs) countGet(ctx context.Context, data []byte) {
	if n, ok := ctx.Value(blobCountsKey{}).(*blobCounts); ok {
		n.gets.Add(1)
		n.bytesRead.Add(int64(len(data)))
	}
}

func (c countingBlobs) Put(ctx context.Context, key string, data []byte) error {
	if n, ok := ctx.Value(blobCountsKey{}).(*blobCounts); ok {
		n.puts.Add(1)
		n.bytesWritten.Add(int64(len(data)))
	}
	return c.Blobs.Put(ctx, key, data)
}

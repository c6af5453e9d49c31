package segment_test

import (
	"context"
	"math/rand/v2"
	"sync/atomic"
	"testing"

	"github.com/compactorhq/compactor/internal/segment"
)

// discard is a Blobs that keeps nothing: the benchmark measures encoding.
type discard struct{ bytes atomic.Int64 }

func (d *discard) Put(_ context.Context, _ string, data []byte) error {
	d.bytes.Add(int64(len(data)))
	return nil
}
func (d *discard) Get(context.Context, string) ([]byte, error) { return nil, segment.ErrNotExist }
func (d *discard) Delete(context.Context, string) error        { return nil }
func (d *discard) List(context.Context, string) ([]segment.BlobInfo, error) {
	return nil, nil
}

// BenchmarkWriteBlocks writes 100,000 records of 128 dimensions into an
// empty collection (default block size) and reports records/s and the block
// bytes written per second.
func BenchmarkWriteBlocks(b *testing.B) {
	const n, dim = 100_000, 128
	rng := rand.New(rand.NewPCG(1, 2))
	changes := upserts(records(rng, "id-%07d", n, dim))
	d := &discard{}
	s := segment.NewStore(d, segment.Config{}, nil)
	var written int64
	for b.Loop() {
		_, stats, err := s.NewWriter(testCollection, nil).WriteBlocks(context.Background(), changes, 0, dim, nil)
		if err != nil {
			b.Fatal(err)
		}
		written += stats.BytesWritten
	}
	sec := b.Elapsed().Seconds()
	b.ReportMetric(float64(n*b.N)/sec, "records/s")
	b.ReportMetric(float64(written)/sec, "bytes/s")
	b.ReportMetric(float64(written)/float64(b.N)/n, "bytes/record")
}

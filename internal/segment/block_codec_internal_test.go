package segment

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
	"github.com/parquet-go/parquet-go/compress/zstd"
)

// The string columns' codec bounds the encoder's window to spare memory,
// not bytes: up to the window, it writes what parquet-go's own zstd codec
// writes at the same level, and every frame decodes to its page.
func TestWindowedZstdWritesParquetGosBytes(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	words := []string{"alpha ", "beta ", "gamma ", `{"section": "games", `, `"size": 12345} `, "r0001234 "}
	page := func(n int) []byte {
		var b bytes.Buffer
		for b.Len() < n {
			b.WriteString(words[r.IntN(len(words))])
			if r.IntN(8) == 0 {
				fmt.Fprintf(&b, "%d ", r.Uint64())
			}
		}
		return b.Bytes()[:n]
	}
	library := &zstd.Codec{Level: zstd.SpeedBetterCompression}
	for _, n := range []int{0, 1, 300, 70_000, blockPageBytes, blockPageBytes + 50_000, zstdWindowBytes} {
		src := page(n)
		got, err := stringCodec.Encode(nil, src)
		if err != nil {
			t.Fatal(err)
		}
		want, err := library.Encode(nil, src)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("page of %d bytes: %d bytes compressed, parquet-go's codec at the same level %d", n, len(got), len(want))
		}
		back, err := stringCodec.Decode(nil, got)
		if err != nil || !bytes.Equal(back, src) {
			t.Errorf("page of %d bytes does not decode to itself: %d bytes, %v", n, len(back), err)
		}
	}
}

// countingCodec counts the pages a codec compresses.
type countingCodec struct {
	compress.Codec
	pages int
}

func (c *countingCodec) Encode(dst, src []byte) ([]byte, error) {
	c.pages++
	return c.Codec.Encode(dst, src)
}

// A block's embedding column is compressed by embeddingCodec (set on the
// schema, as a tag can only name parquet-go's own codec), and the block's
// bytes are those parquet-go's zstd codec writes for that column: both
// encodings of the column (dictionary and BYTE_STREAM_SPLIT).
func TestBlockEmbeddingColumnTakesEmbeddingCodec(t *testing.T) {
	saved := embeddingCodec
	defer func() { embeddingCodec = saved }()
	for _, quantised := range []bool{true, false} {
		recs := syntheticRecords(3000, 64, quantised)
		want, err := encodeBlock(recs)
		if err != nil {
			t.Fatal(err)
		}
		counting := &countingCodec{Codec: saved}
		embeddingCodec = counting
		got, err := encodeBlock(recs)
		if err != nil {
			t.Fatal(err)
		}
		if counting.pages == 0 {
			t.Errorf("quantised %v: embeddingCodec compressed no page", quantised)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("quantised %v: the block differs when written through the same codec", quantised)
		}
		embeddingCodec = &parquet.Zstd
		library, err := encodeBlock(recs)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(library, want) {
			t.Errorf("quantised %v: %d bytes, %d with parquet-go's zstd codec on the embedding column", quantised, len(want), len(library))
		}
		embeddingCodec = saved
		back, err := decodeBlock(want, -1)
		if err != nil {
			t.Fatal(err)
		}
		checkRecords(t, back, recs)
	}
}

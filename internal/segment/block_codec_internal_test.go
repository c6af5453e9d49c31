package segment

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

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

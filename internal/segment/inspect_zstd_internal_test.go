package segment

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/klauspost/compress/zstd"
)

func TestZstdDeclaredSizeReadsTheFrameHeaders(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	data := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(r.IntN(4)) // compressible, not all RLE
		}
		return b
	}
	plain, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	crc, err := zstd.NewWriter(nil, zstd.WithEncoderCRC(true), zstd.WithEncoderLevel(zstd.SpeedBestCompression))
	if err != nil {
		t.Fatal(err)
	}
	defer crc.Close()
	// Sizes across every Frame_Content_Size width (1, 2, 4 bytes) and
	// several blocks. EncodeAll (klauspost/compress, as parquet-go's codec
	// calls it) declares the size of an empty frame and of frames of 256
	// bytes or more; smaller ones are decompressed to be checked.
	for _, n := range []int{0, 1, 255, 256, 300, 65791, 65792, 70_000, 1 << 20, 3 << 20} {
		src := data(n)
		for name, enc := range map[string]*zstd.Encoder{"default": plain, "crc, best": crc} {
			frame := enc.EncodeAll(src, nil)
			got, ok := zstdDeclaredSize(frame, n)
			if want := n == 0 || n >= 256; ok != want || (ok && got != n) {
				t.Errorf("%s, %d bytes: zstdDeclaredSize = %d, %v; want %d, %v", name, n, got, ok, n, want)
			}
			// The decoder parquet-go uses agrees.
			dec, _ := zstd.NewReader(nil)
			out, err := dec.DecodeAll(frame, nil)
			dec.Close()
			if err != nil || !bytes.Equal(out, src) {
				t.Fatalf("%s, %d bytes: DecodeAll: %v", name, n, err)
			}
		}
	}
	// Two frames and a skippable one between them add up.
	a, b := plain.EncodeAll(data(1000), nil), plain.EncodeAll(data(5000), nil)
	skip := binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(nil, zstdSkippableMagic|3), 5)
	skip = append(skip, 1, 2, 3, 4, 5)
	joined := append(append(append([]byte{}, a...), skip...), b...)
	if got, ok := zstdDeclaredSize(joined, 6000); !ok || got != 6000 {
		t.Errorf("two frames and a skippable one: %d, %v; want 6000, true", got, ok)
	}
	// Past the limit: declared, with a size that is not the claim.
	if got, ok := zstdDeclaredSize(joined, 1500); !ok || got <= 1500 {
		t.Errorf("past a limit of 1500: %d, %v; want more than 1500, true", got, ok)
	}

	// What cannot be sized from its headers is left to the decompressing
	// check.
	var stream bytes.Buffer
	w, err := zstd.NewWriter(&stream)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data(200_000)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	whole := plain.EncodeAll(data(70_000), nil)
	dict := bytes.Clone(whole)
	dict[4] |= 1 // a dictionary id follows
	reserved := bytes.Clone(whole)
	reserved[4] |= 1 << 3
	for name, src := range map[string][]byte{
		"a streamed frame (no content size)": stream.Bytes(),
		"truncated in a block":               whole[:len(whole)-10],
		"truncated in the header":            whole[:5],
		"trailing bytes":                     append(bytes.Clone(whole), 0, 0, 0),
		"not zstd":                           []byte("PAR1 and more text"),
		"a dictionary":                       dict,
		"the reserved bit":                   reserved,
	} {
		if got, ok := zstdDeclaredSize(src, 1<<30); ok {
			t.Errorf("%s: declared %d bytes, want it left to decompression", name, got)
		}
	}
}

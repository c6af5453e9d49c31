package rpc

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestAdaptiveGzipPicksItsLevelByMessageSize: every message round-trips
// through the standard library's gzip reader, one writer serving many
// messages; a small repetitive message is compressed with repeats found
// (BestSpeed), a large one is entropy-coded only (Huffman-only cannot code
// a repeat in fewer bits than its bytes' codes, so it stays near 1/8 of
// one-letter text and far above what BestSpeed makes of it).
func TestAdaptiveGzipPicksItsLevelByMessageSize(t *testing.T) {
	g := newAdaptiveGzip()
	gunzip := func(b []byte) string {
		t.Helper()
		r, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("gzip header: %v", err)
		}
		out, err := io.ReadAll(r)
		if err != nil {
			t.Fatalf("gunzip: %v", err)
		}
		return string(out)
	}
	compress := func(msg string) []byte {
		t.Helper()
		var dst bytes.Buffer
		g.Reset(&dst)
		if msg != "" {
			if _, err := g.Write([]byte(msg)); err != nil {
				t.Fatal(err)
			}
		}
		if err := g.Close(); err != nil {
			t.Fatal(err)
		}
		if got := gunzip(dst.Bytes()); got != msg {
			t.Fatalf("round trip of %d bytes gave %d bytes back", len(msg), len(got))
		}
		return dst.Bytes()
	}
	small := strings.Repeat(`{"id":"job-1","state":"SUCCEEDED"}`, 1000) // 34 KB
	large := strings.Repeat("a", huffmanOnlyBytes)
	for range 2 { // the same writer again, after other messages
		if n := len(compress(small)); n > len(small)/20 {
			t.Errorf("small repetitive message: %d → %d bytes, want BestSpeed's ≤ 1/20", len(small), n)
		}
		if n := len(compress(large)); n < len(large)/10 {
			t.Errorf("large message: %d → %d bytes, want Huffman-only's ≥ 1/10 (repeats not coded)", len(large), n)
		}
		compress("") // an empty message is an empty gzip stream
	}
	// A large message of near-random bytes (float32 embeddings) is stored:
	// its gzip stream is its bytes and a few framing bytes; one of text is
	// still coded.
	r := rand.New(rand.NewPCG(1, 2))
	floats := make([]byte, 0, huffmanOnlyBytes+4096)
	for len(floats) < huffmanOnlyBytes {
		floats = binary.LittleEndian.AppendUint32(floats, math.Float32bits(float32(r.IntN(2001)-1000)/1000))
	}
	if gain := huffmanGain(floats); gain >= minHuffmanGain {
		t.Fatalf("huffmanGain of random 3-decimal float32s = %.3f, want under %.2f", gain, minHuffmanGain)
	}
	if n := len(compress(string(floats))); n < len(floats) || n > len(floats)+len(floats)/1000+64 {
		t.Errorf("large message of floats: %d → %d bytes, want stored blocks (at most 0.1 %% more)", len(floats), n)
	}
	var text strings.Builder
	for text.Len() < huffmanOnlyBytes {
		fmt.Fprintf(&text, `{"id":"rec-%d","document":"package number %d of the section"},`, r.IntN(1e6), r.IntN(1e4))
	}
	if gain := huffmanGain([]byte(text.String())); gain < minHuffmanGain {
		t.Fatalf("huffmanGain of JSON text = %.3f, want at least %.2f", gain, minHuffmanGain)
	}
	if n := len(compress(text.String())); n > text.Len()*3/4 {
		t.Errorf("large message of JSON text: %d → %d bytes, want Huffman coding's ≤ 3/4", text.Len(), n)
	}
	if huffmanGain(nil) != 0 {
		t.Error("huffmanGain of nothing is not 0")
	}
}

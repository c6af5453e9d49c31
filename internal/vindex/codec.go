package vindex

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"runtime"
	"slices"
)

// ErrCorrupt is matched by every Decode error about the bytes: a bad
// magic, version, checksum, count, size or reference. The message names
// the blob and the field.
var ErrCorrupt = errors.New("corrupt vector index")

// The persisted format (version 1, little-endian, CRC-32C):
//
// A graph is stored as one graph blob, rewritten by every version, and a
// list of vector chunk blobs, append-only: a successor's chunks are its
// parent's, by reference, plus a chunk of the vectors inserted since (see
// Encode). A version adds at most one small chunk per compaction; a
// rebuild starts a new list of full-size chunks. The vectors are the bulk (Dim × 4 bytes a node against about
// 2M × 4 bytes of links), so a compaction that changes k of N records
// writes the graph blob and k vectors, never the N vectors again. The
// graph blob has to be rewritten: an insert changes the lists of its
// neighbours all over the graph (tens of pages per insert), so storing the
// links in chunks too would rewrite nearly all of them anyway.
//
// Graph blob:
//
//	header, 56 bytes:
//	  0  magic "VXGR"        4  version u16 = 1     6  distance u8
//	  7  kernel u8: the distance kernel that normalised the cosine vectors
//	     (1 pure Go, 2 AVX2 + FMA; 0: not said, written before it was kept;
//	     decoders that do not know it ignore it)
//	  8  dim u32            12  m u32              16  ef_construction u32
//	 20  ef_search u32      24  seed u64           32  slots u32
//	 36  entry i32 (-1: empty)                     40  max level u32
//	 44  chunks u32         48  zero u32           52  CRC-32C of bytes 0..51
//	four sections, each: length u64, payload, CRC-32C of the payload u32:
//	  nodes   per slot: state u8 (0 live, 1 tombstone, 2 dropped), level u8,
//	          id length uvarint, id bytes
//	  layer0  per slot not dropped: count u8 (≤ 2M), count × neighbour u32
//	  upper   per slot not dropped, per level 1..its level: count u8 (≤ M),
//	          count × neighbour u32
//	  chunks  per chunk: first slot u32, count u32, CRC-32C of its payload u32
//
// Vector chunk blob:
//
//	header, 24 bytes: magic "VXVC", version u16 = 1, zero u16, dim u32,
//	first slot u32, count u32, CRC-32C of bytes 0..19
//	payload: count × dim float32 (as stored: unit length for cosine)
//	CRC-32C of the payload u32
const (
	formatVersion   = 1
	graphHeaderSize = 56
	chunkHeaderSize = 24
	chunkMaxBytes   = 32 << 20 // a chunk's payload cap: big chunks for a full build, one small one per increment
)

var (
	graphMagic = [4]byte{'V', 'X', 'G', 'R'}
	chunkMagic = [4]byte{'V', 'X', 'V', 'C'}
)

func castagnoli() *crc32.Table { return crc32.MakeTable(crc32.Castagnoli) }

// ChunkRef describes one vector chunk blob of a graph: the node slots
// [First, First+Count) and the CRC-32C of its payload.
type ChunkRef struct {
	First, Count int
	CRC          uint32
}

// Chunks returns the graph's vector chunks in order, as the graph blob
// lists them after the last Encode. The caller keeps a blob key per chunk
// (a successor's list starts with its parent's).
func (g *Graph) Chunks() []ChunkRef { return append([]ChunkRef(nil), g.chunks...) }

// Encode hands put the vector chunk blobs of the node slots that no
// earlier Encode of this graph or its ancestors put in a chunk, one at a
// time and in order (each at most 32 MiB; none when nothing was
// inserted), appends their references to Chunks, and returns
// the graph blob, which references every chunk, old and new, by position
// and checksum. The chunk put gets is valid only until put returns:
// Encode reuses its buffer for the next chunk, so that encoding a large
// collection holds one chunk's bytes at a time and leaves no garbage of
// the vectors' size behind. When put fails, Encode returns its error and forgets the
// chunks of this call, so a retry writes them again. Encode changes the
// chunk list, so it needs the graph to itself as Insert does.
func (g *Graph) Encode(put func(ref ChunkRef, chunk []byte) error) ([]byte, error) {
	defer runtime.KeepAlive(g) // the chunks are read from g's (see arena.go)
	had := len(g.chunks)
	done := 0
	if had > 0 {
		last := g.chunks[had-1]
		done = last.First + last.Count
	}
	maxBytes := chunkMaxBytes
	if g.chunkBytes > 0 {
		maxBytes = g.chunkBytes
	}
	per := max(1, maxBytes/(4*g.p.Dim))
	var buf []byte
	for first := done; first < len(g.ids); first += per {
		count := min(per, len(g.ids)-first)
		var ref ChunkRef
		buf, ref = g.encodeChunk(buf[:0], first, count)
		if err := put(ref, buf); err != nil {
			g.chunks = g.chunks[:had]
			return nil, fmt.Errorf("write vector chunk %d (slots %d+%d): %w", len(g.chunks), first, count, err)
		}
		g.chunks = append(g.chunks, ref)
	}
	return g.encodeGraph(), nil
}

// encodeAll is Encode collecting the new chunks (tests and tools).
func (g *Graph) encodeAll() ([]byte, [][]byte) {
	var chunks [][]byte
	b, _ := g.Encode(func(_ ChunkRef, c []byte) error { chunks = append(chunks, slices.Clone(c)); return nil })
	return b, chunks
}

// encodeChunk appends to b (empty) the chunk blob of slots [first,
// first+count).
func (g *Graph) encodeChunk(b []byte, first, count int) ([]byte, ChunkRef) {
	t := castagnoli()
	b = slices.Grow(b, chunkHeaderSize+count*g.p.Dim*4+4)
	b = b[:chunkHeaderSize]
	copy(b, chunkMagic[:])
	le := binary.LittleEndian
	le.PutUint16(b[4:], formatVersion)
	le.PutUint32(b[8:], uint32(g.p.Dim))
	le.PutUint32(b[12:], uint32(first))
	le.PutUint32(b[16:], uint32(count))
	le.PutUint32(b[20:], crc32.Checksum(b[:20], t))
	for n := first; n < first+count; n++ {
		for _, x := range g.vec(int32(n)) {
			b = le.AppendUint32(b, math.Float32bits(x))
		}
	}
	sum := crc32.Checksum(b[chunkHeaderSize:], t)
	b = le.AppendUint32(b, sum)
	return b, ChunkRef{First: first, Count: count, CRC: sum}
}

func (g *Graph) encodeGraph() []byte {
	t := castagnoli()
	le := binary.LittleEndian
	// The exact size first, so that the blob is one allocation.
	size := graphHeaderSize + 4*12 + 12*len(g.chunks)
	for n, id := range g.ids {
		size += 2 + uvarintLen(uint64(len(id))) + len(id)
		if g.state[n] != stateDropped {
			for l := 0; l <= int(g.level[n]); l++ {
				size += 1 + 4*int(g.links(int32(n), l)[0])
			}
		}
	}
	b := make([]byte, graphHeaderSize, size)
	copy(b, graphMagic[:])
	le.PutUint16(b[4:], formatVersion)
	b[6] = byte(g.p.Distance)
	b[7] = g.normBy
	le.PutUint32(b[8:], uint32(g.p.Dim))
	le.PutUint32(b[12:], uint32(g.p.M))
	le.PutUint32(b[16:], uint32(g.p.EfConstruction))
	le.PutUint32(b[20:], uint32(g.p.EfSearch))
	le.PutUint64(b[24:], g.p.Seed)
	le.PutUint32(b[32:], uint32(len(g.ids)))
	le.PutUint32(b[36:], uint32(g.entry))
	le.PutUint32(b[40:], uint32(g.maxLevel))
	le.PutUint32(b[44:], uint32(len(g.chunks)))
	le.PutUint32(b[52:], crc32.Checksum(b[:52], t))
	section := func(fill func(b []byte) []byte) {
		at := len(b)
		b = append(b, make([]byte, 8)...)
		b = fill(b)
		le.PutUint64(b[at:], uint64(len(b)-at-8))
		b = le.AppendUint32(b, crc32.Checksum(b[at+8:], t))
	}
	section(func(b []byte) []byte {
		for n, id := range g.ids {
			b = append(b, g.state[n], g.level[n])
			b = binary.AppendUvarint(b, uint64(len(id)))
			b = append(b, id...)
		}
		return b
	})
	list := func(b []byte, ls []int32) []byte {
		b = append(b, byte(ls[0]))
		for _, m := range ls[1 : 1+ls[0]] {
			b = le.AppendUint32(b, uint32(m))
		}
		return b
	}
	section(func(b []byte) []byte {
		for n := range g.ids {
			if g.state[n] != stateDropped {
				b = list(b, g.links(int32(n), 0))
			}
		}
		return b
	})
	section(func(b []byte) []byte {
		for n := range g.ids {
			if g.state[n] != stateDropped {
				for l := 1; l <= int(g.level[n]); l++ {
					b = list(b, g.links(int32(n), l))
				}
			}
		}
		return b
	})
	section(func(b []byte) []byte {
		for _, c := range g.chunks {
			b = le.AppendUint32(b, uint32(c.First))
			b = le.AppendUint32(b, uint32(c.Count))
			b = le.AppendUint32(b, c.CRC)
		}
		return b
	})
	return b
}

func uvarintLen(x uint64) int {
	n := 1
	for ; x >= 0x80; x >>= 7 {
		n++
	}
	return n
}

// corrupt returns an error wrapping ErrCorrupt.
func corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
}

// reader reads a blob with every size checked against what is left.
type reader struct {
	b    []byte
	what string // the section, for messages
}

func (r *reader) u8(field string) (byte, error) {
	if len(r.b) < 1 {
		return 0, corrupt("%s: %s past the end", r.what, field)
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v, nil
}

func (r *reader) u32(field string) (uint32, error) {
	if len(r.b) < 4 {
		return 0, corrupt("%s: %s past the end", r.what, field)
	}
	v := binary.LittleEndian.Uint32(r.b)
	r.b = r.b[4:]
	return v, nil
}

func (r *reader) bytes(n uint64, field string) ([]byte, error) {
	if n > uint64(len(r.b)) {
		return nil, corrupt("%s: %s of %d bytes, only %d left", r.what, field, n, len(r.b))
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v, nil
}

// section reads one length-prefixed, checksummed section.
func (r *reader) section(name string) (*reader, error) {
	if len(r.b) < 8 {
		return nil, corrupt("graph: section %s: length past the end", name)
	}
	n := binary.LittleEndian.Uint64(r.b)
	r.b = r.b[8:]
	if n > uint64(len(r.b)) || uint64(len(r.b))-n < 4 {
		return nil, corrupt("graph: section %s: length %d, only %d bytes left", name, n, len(r.b))
	}
	payload := r.b[:n:n]
	sum := binary.LittleEndian.Uint32(r.b[n:])
	r.b = r.b[n+4:]
	if got := crc32.Checksum(payload, castagnoli()); got != sum {
		return nil, corrupt("graph: section %s: checksum %08x, want %08x", name, got, sum)
	}
	return &reader{b: payload, what: "graph: section " + name}, nil
}

// Decode reads a graph from its graph blob and its vector chunk blobs:
// chunk is called once per chunk, in order, with the chunk's position and
// the reference the graph blob holds, and returns that chunk's bytes
// (which Decode does not keep). Every count and size is checked against
// the bytes present before anything is allocated for it (the memory
// Decode allocates is bounded by a small multiple of the bytes it is
// given), so bad bytes give an error wrapping ErrCorrupt that names the
// blob and the field, never a panic. An error from chunk is returned
// wrapped as it is.
func Decode(graph []byte, chunk func(i int, ref ChunkRef) ([]byte, error)) (*Graph, error) {
	t := castagnoli()
	le := binary.LittleEndian
	if len(graph) < graphHeaderSize {
		return nil, corrupt("graph: %d bytes, shorter than the %d-byte header", len(graph), graphHeaderSize)
	}
	h := graph[:graphHeaderSize]
	if [4]byte(h[:4]) != graphMagic {
		return nil, corrupt("graph: magic %q", h[:4])
	}
	if got, want := crc32.Checksum(h[:52], t), le.Uint32(h[52:]); got != want {
		return nil, corrupt("graph: header checksum %08x, want %08x", got, want)
	}
	if v := le.Uint16(h[4:]); v != formatVersion {
		return nil, corrupt("graph: format version %d (this build reads %d)", v, formatVersion)
	}
	p := Params{
		Distance:       Distance(h[6]),
		Dim:            int(le.Uint32(h[8:])),
		M:              int(le.Uint32(h[12:])),
		EfConstruction: int(le.Uint32(h[16:])),
		EfSearch:       int(le.Uint32(h[20:])),
		Seed:           le.Uint64(h[24:]),
	}
	if p.Distance == DistanceUnspecified || p.M == 0 || p.EfConstruction == 0 || p.EfSearch == 0 {
		return nil, corrupt("graph: header: zero parameter")
	}
	p, err := p.withDefaults()
	if err != nil {
		return nil, corrupt("graph: header: %v", err)
	}
	slots := uint64(le.Uint32(h[32:]))
	entry := int64(int32(le.Uint32(h[36:])))
	top := uint64(le.Uint32(h[40:]))
	nchunks := uint64(le.Uint32(h[44:]))
	if top > maxLevel {
		return nil, corrupt("graph: header: max level %d (at most %d)", top, maxLevel)
	}
	r := &reader{b: graph[graphHeaderSize:], what: "graph"}
	nodes, err := r.section("nodes")
	if err != nil {
		return nil, err
	}
	layer0, err := r.section("layer0")
	if err != nil {
		return nil, err
	}
	upper, err := r.section("upper")
	if err != nil {
		return nil, err
	}
	chunksSec, err := r.section("chunks")
	if err != nil {
		return nil, err
	}
	if len(r.b) != 0 {
		return nil, corrupt("graph: %d bytes after the last section", len(r.b))
	}
	if slots > uint64(len(nodes.b))/3 {
		return nil, corrupt("graph: %d slots, the nodes section holds at most %d", slots, len(nodes.b)/3)
	}
	if nchunks*12 != uint64(len(chunksSec.b)) {
		return nil, corrupt("graph: %d chunks, the chunks section holds %d bytes", nchunks, len(chunksSec.b))
	}

	g := newGraph(p)
	g.normBy = h[7]
	if g.normBy != kernelPureGo && g.normBy != kernelAVX2 {
		g.normBy = kernelUnknown
	}
	n := int(slots)
	g.ids = make([]string, n)
	g.byID = idMap{tab: newIDTable(n)}
	g.state = make([]uint8, n)
	g.level = make([]uint8, n)
	g.upper = make([][]int32, n)
	// The ids are substrings of one copy of the section: one allocation
	// instead of one per id (a million at 1,000,000 vectors), which the
	// garbage collector would otherwise mark one by one on every cycle.
	text, size := string(nodes.b), len(nodes.b)
	live := 0
	for i := range n {
		st, err := nodes.u8("state")
		if err != nil {
			return nil, err
		}
		lv, err := nodes.u8("level")
		if err != nil {
			return nil, err
		}
		ln, k := binary.Uvarint(nodes.b)
		if k <= 0 {
			return nil, corrupt("%s: slot %d: id length", nodes.what, i)
		}
		nodes.b = nodes.b[k:]
		if ln > uint64(len(nodes.b)) { // checked here: no message built per slot
			return nil, corrupt("%s: slot %d id of %d bytes, only %d left", nodes.what, i, ln, len(nodes.b))
		}
		at := size - len(nodes.b)
		id := nodes.b[:ln:ln]
		nodes.b = nodes.b[ln:]
		if st > stateDropped {
			return nil, corrupt("%s: slot %d: state %d", nodes.what, i, st)
		}
		if uint64(lv) > top || (st == stateDropped && lv != 0) {
			return nil, corrupt("%s: slot %d: level %d (max level %d)", nodes.what, i, lv, top)
		}
		g.ids[i], g.state[i], g.level[i] = text[at:at+len(id)], st, lv
		switch st {
		case stateLive:
			if _, dup := g.byID.get(g.ids[i], g.ids); dup {
				return nil, corrupt("%s: slot %d: id %q live twice", nodes.what, i, id)
			}
			g.byID.set(g.ids[i], int32(i), g.ids)
			live++
		case stateDeleted:
			g.tombstones++
		case stateDropped:
			g.dropped++
		}
	}
	if len(nodes.b) != 0 {
		return nil, corrupt("%s: %d bytes after the last slot", nodes.what, len(nodes.b))
	}
	inGraph := n - g.dropped
	switch {
	case inGraph == 0 && entry != -1:
		return nil, corrupt("graph: header: entry %d in an empty graph", entry)
	case inGraph > 0 && (entry < 0 || entry >= int64(n) || g.state[entry] == stateDropped || uint64(g.level[entry]) != top):
		return nil, corrupt("graph: header: entry %d (max level %d) is not a node of the top level", entry, top)
	case inGraph == 0 && top != 0:
		return nil, corrupt("graph: header: max level %d in an empty graph", top)
	}
	g.entry, g.maxLevel = int32(entry), int(top)

	// Each slot in the graph has at least a count byte in layer0: that
	// bounds the pages allocated below by the bytes present.
	if uint64(inGraph) > uint64(len(layer0.b)) {
		return nil, corrupt("%s: %d bytes for %d nodes", layer0.what, len(layer0.b), inGraph)
	}
	if n > 0 {
		g.growPages((n-1)>>pageShift + 1)
	}
	readList := func(sec *reader, dst []int32, x, l, maxM int) error {
		c, err := sec.u8("count")
		if err != nil {
			return err
		}
		if int(c) > maxM {
			return corrupt("%s: slot %d level %d: %d neighbours (at most %d)", sec.what, x, l, c, maxM)
		}
		if uint64(c)*4 > uint64(len(sec.b)) {
			return corrupt("%s: slot %d level %d: %d neighbours past the end", sec.what, x, l, c)
		}
		dst[0] = int32(c)
		for j := range int(c) {
			m := le.Uint32(sec.b[4*j:])
			if uint64(m) >= slots || g.state[m] == stateDropped || int(g.level[m]) < l {
				return corrupt("%s: slot %d level %d: neighbour %d is not a node of that level", sec.what, x, l, m)
			}
			dst[1+j] = int32(m)
		}
		sec.b = sec.b[4*int(c):]
		return nil
	}
	for x := range n {
		if g.state[x] == stateDropped {
			continue
		}
		if err := readList(layer0, g.links(int32(x), 0), x, 0, g.m0); err != nil {
			return nil, err
		}
	}
	if len(layer0.b) != 0 {
		return nil, corrupt("%s: %d bytes after the last list", layer0.what, len(layer0.b))
	}
	for x := range n {
		lv := int(g.level[x])
		if g.state[x] == stateDropped || lv == 0 {
			continue
		}
		if uint64(lv) > uint64(len(upper.b)) {
			return nil, corrupt("%s: slot %d: %d levels past the end", upper.what, x, lv)
		}
		g.upper[x] = make([]int32, lv*(p.M+1))
		for l := 1; l <= lv; l++ {
			if err := readList(upper, g.links(int32(x), l), x, l, p.M); err != nil {
				return nil, err
			}
		}
	}
	if len(upper.b) != 0 {
		return nil, corrupt("%s: %d bytes after the last list", upper.what, len(upper.b))
	}

	next := 0
	g.chunks = make([]ChunkRef, nchunks)
	for i := range int(nchunks) {
		first, _ := chunksSec.u32("first")
		count, _ := chunksSec.u32("count")
		sum, _ := chunksSec.u32("crc")
		if int(first) != next || count == 0 || uint64(first)+uint64(count) > slots {
			return nil, corrupt("graph: chunk %d: slots %d+%d, want from %d within %d", i, first, count, next, slots)
		}
		ref := ChunkRef{First: int(first), Count: int(count), CRC: sum}
		g.chunks[i] = ref
		next += int(count)
	}
	if next != n {
		return nil, corrupt("graph: chunks hold %d slots, the graph %d", next, n)
	}
	for i, ref := range g.chunks {
		b, err := chunk(i, ref)
		if err != nil {
			return nil, fmt.Errorf("read vector chunk %d: %w", i, err)
		}
		if err := g.decodeChunk(i, ref, b); err != nil {
			return nil, err
		}
	}
	return g, nil
}

// decodeChunk checks chunk blob i against ref and appends its vectors.
func (g *Graph) decodeChunk(i int, ref ChunkRef, b []byte) error {
	t := castagnoli()
	le := binary.LittleEndian
	if len(b) < chunkHeaderSize+4 {
		return corrupt("vector chunk %d: %d bytes, shorter than its header", i, len(b))
	}
	if [4]byte(b[:4]) != chunkMagic {
		return corrupt("vector chunk %d: magic %q", i, b[:4])
	}
	if got, want := crc32.Checksum(b[:20], t), le.Uint32(b[20:]); got != want {
		return corrupt("vector chunk %d: header checksum %08x, want %08x", i, got, want)
	}
	if v := le.Uint16(b[4:]); v != formatVersion {
		return corrupt("vector chunk %d: format version %d", i, v)
	}
	dim, first, count := le.Uint32(b[8:]), le.Uint32(b[12:]), le.Uint32(b[16:])
	if int(dim) != g.p.Dim || int(first) != ref.First || int(count) != ref.Count {
		return corrupt("vector chunk %d: dim %d, slots %d+%d; the graph wants dim %d, slots %d+%d", i, dim, first, count, g.p.Dim, ref.First, ref.Count)
	}
	size := uint64(count) * uint64(dim) * 4
	if size+chunkHeaderSize+4 != uint64(len(b)) {
		return corrupt("vector chunk %d: %d bytes, want %d for %d vectors", i, len(b), size+chunkHeaderSize+4, count)
	}
	payload := b[chunkHeaderSize : chunkHeaderSize+size]
	sum := crc32.Checksum(payload, t)
	if sum != le.Uint32(b[chunkHeaderSize+size:]) || sum != ref.CRC {
		return corrupt("vector chunk %d: payload checksum %08x, want %08x", i, sum, ref.CRC)
	}
	for j := range int(count) * g.p.Dim {
		x := math.Float32frombits(le.Uint32(payload[4*j:]))
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return corrupt("vector chunk %d: slot %d: value %v", i, ref.First+j/g.p.Dim, x)
		}
	}
	for j := range int(count) {
		n := ref.First + j
		if n>>vecChunkShift >= len(g.vecs) {
			f, m := newChunk(min(vecChunk, len(g.ids)-n) * g.p.Dim)
			g.vecs, g.owner = append(g.vecs, f), append(g.owner, m)
		}
		c := len(g.vecs) - 1
		for k := range g.p.Dim {
			g.vecs[c] = append(g.vecs[c], math.Float32frombits(le.Uint32(payload[4*(j*g.p.Dim+k):])))
		}
	}
	return nil
}

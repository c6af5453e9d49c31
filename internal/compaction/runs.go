package compaction

import (
	"bufio"
	"bytes"
	"cmp"
	"container/heap"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/compactorhq/compactor/internal/materialize"
	"github.com/compactorhq/compactor/internal/segment"
)

// opEntry is one operation record of a run, still encoded (the log row's
// bytes): its log offset and the position of its record id in rec.
type opEntry struct {
	off        int64
	rec        []byte
	idLo, idHi uint32
}

func (e *opEntry) id() []byte { return e.rec[e.idLo:e.idHi] }

// entryBytes is what an entry costs in memory beyond its record bytes.
const entryBytes = 48

func compareEntries(a, b opEntry) int {
	if c := bytes.Compare(a.id(), b.id()); c != 0 {
		return c
	}
	return cmp.Compare(a.off, b.off)
}

// newEntry copies record into arena memory and locates its id.
func newEntry(a *arena, off int64, record []byte) (opEntry, error) {
	lo, hi, err := materialize.IDSpan(record)
	if err != nil {
		return opEntry{}, fmt.Errorf("decode log record at offset %d: %w", off, err)
	}
	return opEntry{off: off, rec: a.copy(record), idLo: uint32(lo), idHi: uint32(hi)}, nil
}

// arena hands out copies of byte slices from large chunks: one allocation
// per chunk instead of one per record, and nothing for the GC to scan.
type arena struct{ chunk []byte }

const arenaChunk = 1 << 20

func (a *arena) copy(b []byte) []byte {
	if len(b) > arenaChunk/4 {
		return bytes.Clone(b)
	}
	if cap(a.chunk)-len(a.chunk) < len(b) {
		a.chunk = make([]byte, 0, arenaChunk)
	}
	n := len(a.chunk)
	a.chunk = append(a.chunk, b...)
	return a.chunk[n:len(a.chunk):len(a.chunk)]
}

// runSet groups the operation records of a log slice by record id: sorted
// runs, held in memory up to a budget and spilled to temporary files past
// it, merged at the end in (id, offset) order.
type runSet struct {
	dir    string
	budget int64 // bytes of runs held in memory
	held   int64
	mem    [][]opEntry
	files  []*os.File
	// Spilled counts the runs written to disk, SpilledBytes their size.
	spilled      int
	spilledBytes int64
}

// add sorts run and keeps it, or spills it when keeping it would pass the
// budget.
func (s *runSet) add(run []opEntry, size int64) error {
	slices.SortFunc(run, compareEntries)
	if s.held+size <= s.budget {
		s.mem = append(s.mem, run)
		s.held += size
		return nil
	}
	f, err := os.CreateTemp(s.dir, "compaction-run-*")
	if err != nil {
		return fmt.Errorf("spill a sorted run of %d operation records: %w", len(run), err)
	}
	s.files = append(s.files, f)
	// Unlinked at once: the open file is all that is needed, and nothing is
	// left behind by a crash.
	_ = os.Remove(f.Name())
	w := bufio.NewWriterSize(f, 1<<20)
	var hdr [2 * binary.MaxVarintLen64]byte
	for i := range run {
		n := binary.PutUvarint(hdr[:], uint64(len(run[i].rec)))
		n += binary.PutVarint(hdr[n:], run[i].off)
		w.Write(hdr[:n])
		w.Write(run[i].rec)
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("spill a sorted run of %d operation records to %s: %w", len(run), f.Name(), err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("spill a sorted run: %w", err)
	}
	s.spilled++
	s.spilledBytes += size
	return nil
}

// close closes the spill files and lets go of the runs held in memory.
func (s *runSet) close() {
	for _, f := range s.files {
		f.Close()
	}
	s.files = nil
	s.mem, s.held = nil, 0
}

// cursor reads one sorted run.
type cursor struct {
	cur  opEntry
	mem  []opEntry // a run in memory
	r    *bufio.Reader
	a    arena
	name string
}

func (c *cursor) next() (bool, error) {
	if c.r == nil {
		if len(c.mem) == 0 {
			return false, nil
		}
		c.cur, c.mem = c.mem[0], c.mem[1:]
		return true, nil
	}
	n, err := binary.ReadUvarint(c.r)
	if errors.Is(err, io.EOF) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read spilled run %s: %w", c.name, err)
	}
	off, err := binary.ReadVarint(c.r)
	if err != nil {
		return false, fmt.Errorf("read spilled run %s: %w", c.name, err)
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(c.r, buf); err != nil {
		return false, fmt.Errorf("read spilled run %s: %w", c.name, err)
	}
	lo, hi, err := materialize.IDSpan(buf)
	if err != nil {
		return false, fmt.Errorf("read spilled run %s: %w", c.name, err)
	}
	c.cur = opEntry{off: off, rec: buf, idLo: uint32(lo), idHi: uint32(hi)}
	return true, nil
}

type cursorHeap []*cursor

func (h cursorHeap) Len() int           { return len(h) }
func (h cursorHeap) Less(i, j int) bool { return compareEntries(h[i].cur, h[j].cur) < 0 }
func (h cursorHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *cursorHeap) Push(x any)        { *h = append(*h, x.(*cursor)) }
func (h *cursorHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// changes merges the runs (k-way, by id then offset) and yields one change
// per record id, with its operation records decoded in offset order.
func (s *runSet) changes(yield func(segment.Change, error) bool) {
	var h cursorHeap
	add := func(c *cursor) bool {
		ok, err := c.next()
		if err != nil {
			yield(segment.Change{}, err)
			return false
		}
		if ok {
			h = append(h, c)
		}
		return true
	}
	for _, run := range s.mem {
		if !add(&cursor{mem: run}) {
			return
		}
	}
	for _, f := range s.files {
		if !add(&cursor{r: bufio.NewReaderSize(f, 256<<10), name: f.Name()}) {
			return
		}
	}
	heap.Init(&h)
	var (
		id  []byte
		ops []materialize.OperationRecord
	)
	flush := func() bool {
		if len(ops) == 0 {
			return true
		}
		c := segment.Change{ID: ops[0].ID, Ops: ops}
		ops = nil
		return yield(c, nil)
	}
	for h.Len() > 0 {
		c := h[0]
		e := c.cur
		if !bytes.Equal(e.id(), id) {
			if !flush() {
				return
			}
			id = e.id()
		}
		var op materialize.OperationRecord
		if err := op.UnmarshalBinary(e.rec); err != nil {
			yield(segment.Change{}, fmt.Errorf("decode log record at offset %d: %w", e.off, err))
			return
		}
		op.Offset = e.off
		ops = append(ops, op)
		ok, err := c.next()
		if err != nil {
			yield(segment.Change{}, err)
			return
		}
		if ok {
			heap.Fix(&h, 0)
		} else {
			heap.Pop(&h)
		}
	}
	flush()
}

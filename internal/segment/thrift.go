package segment

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Thrift compact protocol types (the wire types of the Parquet footer and
// page headers).
const (
	tBoolTrue  = 1
	tBoolFalse = 2
	tByte      = 3
	tI16       = 4
	tI32       = 5
	tI64       = 6
	tDouble    = 7
	tBinary    = 8
	tList      = 9
	tSet       = 10
	tMap       = 11
	tStruct    = 12
)

// maxThriftDepth bounds the nesting of structs, lists and maps: parquet-go
// decodes them recursively, and a footer nested a million levels deep would
// grow the goroutine stack without bound.
const maxThriftDepth = 24

var errThriftShort = errors.New("thrift: truncated")

// thriftWalker checks one thrift compact-protocol struct before parquet-go
// decodes it. parquet-go allocates every list and map at the size its header
// claims, before it reads a single element (up to 2^31-1 elements of up to
// 560 bytes each in a footer): the walker rejects a size larger than the
// bytes left (every element takes at least one byte on the wire) and, for the
// lists of large structs, larger than limit says. Binary fields are checked
// against the bytes left too. It allocates nothing but its path.
type thriftWalker struct {
	b   []byte
	off int
	// path holds the field ids of the enclosing struct fields, outermost
	// first: a list at path {4, 1} of a FileMetaData is row_groups[*].columns.
	path []int16
	// limit returns the most elements a list or map at path may hold, or 0
	// for no limit other than the bytes left.
	limit func(path []int16) int
}

// walkThriftStruct checks the struct at the start of b and returns its
// length in bytes.
func walkThriftStruct(b []byte, limit func(path []int16) int) (int, error) {
	w := thriftWalker{b: b, limit: limit}
	if err := w.structure(0); err != nil {
		return 0, fmt.Errorf("%w at byte %d", err, w.off)
	}
	return w.off, nil
}

func (w *thriftWalker) left() int { return len(w.b) - w.off }

func (w *thriftWalker) byte() (byte, error) {
	if w.off >= len(w.b) {
		return 0, errThriftShort
	}
	c := w.b[w.off]
	w.off++
	return c, nil
}

func (w *thriftWalker) uvarint() (uint64, error) {
	v, n := binary.Uvarint(w.b[w.off:])
	if n <= 0 {
		return 0, errors.New("thrift: bad varint")
	}
	w.off += n
	return v, nil
}

func (w *thriftWalker) skip(n uint64) error {
	if n > uint64(w.left()) {
		return fmt.Errorf("thrift: %d bytes claimed, %d left", n, w.left())
	}
	w.off += int(n)
	return nil
}

// count checks an element count against the bytes left and the limit.
func (w *thriftWalker) count(n uint64, what string) (int, error) {
	if n > uint64(w.left()) {
		return 0, fmt.Errorf("thrift: %s of %d elements in %d bytes", what, n, w.left())
	}
	if w.limit != nil {
		if max := w.limit(w.path); max > 0 && n > uint64(max) {
			return 0, fmt.Errorf("thrift: %s of %d elements at field path %v, at most %d allowed", what, n, w.path, max)
		}
	}
	return int(n), nil
}

func (w *thriftWalker) structure(depth int) error {
	if depth > maxThriftDepth {
		return errors.New("thrift: nested too deeply")
	}
	var last int16
	for {
		h, err := w.byte()
		if err != nil {
			return err
		}
		if h == 0 { // STOP
			return nil
		}
		typ, delta := h&0x0f, int16(h>>4)
		id := last + delta
		if delta == 0 {
			v, err := w.uvarint()
			if err != nil {
				return err
			}
			id = int16(int64(v>>1) ^ -int64(v&1)) // zigzag
		}
		last = id
		w.path = append(w.path, id)
		if err := w.value(typ, depth, true); err != nil {
			return err
		}
		w.path = w.path[:len(w.path)-1]
	}
}

// value skips one value of type typ; inField: a struct field (whose booleans
// live in the field header), not a list element.
func (w *thriftWalker) value(typ byte, depth int, inField bool) error {
	switch typ {
	case tBoolTrue, tBoolFalse:
		if inField {
			return nil
		}
		_, err := w.byte()
		return err
	case tByte:
		_, err := w.byte()
		return err
	case tI16, tI32, tI64:
		_, err := w.uvarint()
		return err
	case tDouble:
		return w.skip(8)
	case tBinary:
		n, err := w.uvarint()
		if err != nil {
			return err
		}
		return w.skip(n)
	case tList, tSet:
		h, err := w.byte()
		if err != nil {
			return err
		}
		size := uint64(h >> 4)
		if size == 15 {
			if size, err = w.uvarint(); err != nil {
				return err
			}
		}
		n, err := w.count(size, "list")
		if err != nil {
			return err
		}
		elem := h & 0x0f
		for range n {
			if err := w.value(elem, depth+1, false); err != nil {
				return err
			}
		}
		return nil
	case tMap:
		size, err := w.uvarint()
		if err != nil {
			return err
		}
		if size == 0 {
			return nil
		}
		kv, err := w.byte()
		if err != nil {
			return err
		}
		n, err := w.count(size, "map")
		if err != nil {
			return err
		}
		for range n {
			if err := w.value(kv>>4, depth+1, false); err != nil {
				return err
			}
			if err := w.value(kv&0x0f, depth+1, false); err != nil {
				return err
			}
		}
		return nil
	case tStruct:
		return w.structure(depth + 1)
	}
	return fmt.Errorf("thrift: unknown type %d", typ)
}

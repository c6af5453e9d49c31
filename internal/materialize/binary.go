package materialize

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
)

// Binary encoding of an operation record, the form a log row stores. JSON of
// 128 floats costs several microseconds to decode; this costs a copy.
//
//	version  byte (1)
//	op       byte
//	id       uvarint length, bytes
//	embedding uvarint n+1 (0: absent), n × float32 little-endian
//	document byte 0 (absent) | 1, then uvarint length, bytes
//	metadata uvarint n+1 (0: absent), n × (key: uvarint length, bytes;
//	         tag byte 0 null | 1 string (uvarint length, bytes) |
//	         2 number (float64 little-endian) | 3 true | 4 false), keys sorted
const binaryVersion = 1

// Metadata value tags of the binary encoding.
const (
	tagNull = iota
	tagString
	tagNumber
	tagTrue
	tagFalse
)

// ErrCorruptRecord is matched by every error of UnmarshalBinary: the bytes
// are not an encoding MarshalBinary writes (truncated, a length prefix
// longer than the bytes left, an unknown op or tag, keys out of order,
// trailing bytes). A stored log row that fails so is damaged; retrying does
// not mend it.
var ErrCorruptRecord = errors.New("corrupt operation record")

// errShort is returned for a truncated encoding.
var errShort = fmt.Errorf("%w: truncated", ErrCorruptRecord)

// MarshalBinary encodes o (without its offset). It fails for a metadata
// value that is not a string, float64, bool or nil: Validate rejects those
// first.
func (o OperationRecord) MarshalBinary() ([]byte, error) {
	n := 2 + binary.MaxVarintLen64*4 + len(o.ID) + 4*len(o.Embedding) + 1
	if o.Document != nil {
		n += len(*o.Document)
	}
	b := make([]byte, 0, n+32*len(o.Metadata))
	b = append(b, binaryVersion, byte(o.Op))
	b = binary.AppendUvarint(b, uint64(len(o.ID)))
	b = append(b, o.ID...)
	if o.Embedding == nil {
		b = binary.AppendUvarint(b, 0)
	} else {
		b = binary.AppendUvarint(b, uint64(len(o.Embedding))+1)
		for _, f := range o.Embedding {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(f))
		}
	}
	if o.Document == nil {
		b = append(b, 0)
	} else {
		b = append(b, 1)
		b = binary.AppendUvarint(b, uint64(len(*o.Document)))
		b = append(b, *o.Document...)
	}
	if o.Metadata == nil {
		return binary.AppendUvarint(b, 0), nil
	}
	b = binary.AppendUvarint(b, uint64(len(o.Metadata))+1)
	keys := make([]string, 0, len(o.Metadata))
	for k := range o.Metadata {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		b = binary.AppendUvarint(b, uint64(len(k)))
		b = append(b, k...)
		switch v := o.Metadata[k].(type) {
		case nil:
			b = append(b, tagNull)
		case string:
			b = append(b, tagString)
			b = binary.AppendUvarint(b, uint64(len(v)))
			b = append(b, v...)
		case float64:
			b = append(b, tagNumber)
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
		case bool:
			if v {
				b = append(b, tagTrue)
			} else {
				b = append(b, tagFalse)
			}
		default:
			return nil, fmt.Errorf("metadata.%s: cannot encode a value of type %T", k, v)
		}
	}
	return b, nil
}

// UnmarshalBinary decodes what MarshalBinary wrote, and only that: every
// length prefix is checked against the bytes left before anything is
// allocated from it (an embedding of n values needs 4n bytes, a metadata map
// of n entries 2n), varints must be minimal, the op one of the four,
// metadata keys strictly increasing, so that a decoded record encodes back
// to the same bytes. Errors match ErrCorruptRecord. The result shares no
// memory with b.
func (o *OperationRecord) UnmarshalBinary(b []byte) error {
	d := decoder{b: b}
	if v := d.byte(); v != binaryVersion {
		if d.err != nil {
			return d.err
		}
		return fmt.Errorf("%w: encoding version %d, want %d", ErrCorruptRecord, v, binaryVersion)
	}
	r := OperationRecord{Op: Op(d.byte())}
	if d.err == nil && (r.Op < OpAdd || r.Op > OpDelete) {
		return fmt.Errorf("%w: unknown op %d", ErrCorruptRecord, r.Op)
	}
	r.ID = d.string()
	if n := d.uvarint(); n > 0 {
		n--
		if n > uint64(len(d.b))/4 {
			return fmt.Errorf("%w: embedding of %d values in %d bytes", ErrCorruptRecord, n, len(d.b))
		}
		r.Embedding = make([]float32, n)
		for i := range r.Embedding {
			r.Embedding[i] = math.Float32frombits(binary.LittleEndian.Uint32(d.next(4)))
		}
	}
	switch doc := d.byte(); doc {
	case 0:
	case 1:
		s := d.string()
		r.Document = &s
	default:
		if d.err == nil {
			return fmt.Errorf("%w: document flag %d", ErrCorruptRecord, doc)
		}
	}
	if n := d.uvarint(); n > 0 {
		n--
		if n > uint64(len(d.b))/2 {
			return fmt.Errorf("%w: metadata of %d entries in %d bytes", ErrCorruptRecord, n, len(d.b))
		}
		r.Metadata = make(Metadata, n)
		prev := ""
		for i := range n {
			k := d.string()
			if d.err == nil && i > 0 && k <= prev {
				d.err = fmt.Errorf("%w: metadata key %q after %q", ErrCorruptRecord, clipKey(k), clipKey(prev))
			}
			prev = k
			switch tag := d.byte(); tag {
			case tagNull:
				r.Metadata[k] = nil
			case tagString:
				r.Metadata[k] = d.string()
			case tagNumber:
				r.Metadata[k] = math.Float64frombits(binary.LittleEndian.Uint64(d.next(8)))
			case tagTrue:
				r.Metadata[k] = true
			case tagFalse:
				r.Metadata[k] = false
			default:
				if d.err == nil {
					d.err = fmt.Errorf("%w: metadata.%s: unknown value tag %d", ErrCorruptRecord, clipKey(k), tag)
				}
			}
			if d.err != nil {
				break
			}
		}
	}
	if d.err != nil {
		return d.err
	}
	if len(d.b) != 0 {
		return fmt.Errorf("%w: %d trailing bytes", ErrCorruptRecord, len(d.b))
	}
	*o = r
	return nil
}

// clipKey shortens a metadata key quoted in an error.
func clipKey(k string) string {
	if len(k) > 64 {
		return strings.ToValidUTF8(k[:64], "") + "…"
	}
	return k
}

// decoder reads the binary encoding; after the first error every read
// returns zero values and err stays set.
type decoder struct {
	b   []byte
	err error
}

var zeros [8]byte

func (d *decoder) next(n int) []byte {
	if d.err != nil || len(d.b) < n {
		d.err = errShort
		return zeros[:n]
	}
	p := d.b[:n]
	d.b = d.b[n:]
	return p
}

func (d *decoder) byte() byte { return d.next(1)[0] }

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	switch {
	case n == 0:
		d.err = errShort
		return 0
	case n < 0 || n > 1 && d.b[n-1] == 0: // overflow, or a non-minimal encoding
		d.err = fmt.Errorf("%w: malformed varint", ErrCorruptRecord)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) string() string {
	n := d.uvarint()
	if d.err != nil || n > uint64(len(d.b)) {
		d.err = errShort
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

// IDSpan returns where the record id lies in b, an encoding MarshalBinary
// wrote: b[lo:hi] is the id. It reads only the header (version, op, id
// length), so that log rows can be grouped by id before they are decoded;
// UnmarshalBinary checks the rest. Errors match ErrCorruptRecord.
func IDSpan(b []byte) (lo, hi int, err error) {
	d := decoder{b: b}
	if v := d.byte(); d.err == nil && v != binaryVersion {
		return 0, 0, fmt.Errorf("%w: encoding version %d, want %d", ErrCorruptRecord, v, binaryVersion)
	}
	d.byte()
	n := d.uvarint()
	if d.err != nil {
		return 0, 0, d.err
	}
	if n > uint64(len(d.b)) {
		return 0, 0, errShort
	}
	lo = len(b) - len(d.b)
	return lo, lo + int(n), nil
}

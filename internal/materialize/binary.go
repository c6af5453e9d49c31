package materialize

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
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

// errShort is returned for a truncated encoding.
var errShort = errors.New("truncated operation record")

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

// UnmarshalBinary decodes what MarshalBinary wrote. The result shares no
// memory with b.
func (o *OperationRecord) UnmarshalBinary(b []byte) error {
	d := decoder{b: b}
	if v := d.byte(); v != binaryVersion {
		if d.err != nil {
			return d.err
		}
		return fmt.Errorf("operation record encoding version %d, want %d", v, binaryVersion)
	}
	r := OperationRecord{Op: Op(d.byte()), ID: d.string()}
	if n := d.uvarint(); n > 0 {
		n--
		if n > uint64(len(d.b))/4 {
			return errShort
		}
		r.Embedding = make([]float32, n)
		for i := range r.Embedding {
			r.Embedding[i] = math.Float32frombits(binary.LittleEndian.Uint32(d.next(4)))
		}
	}
	if d.byte() == 1 {
		s := d.string()
		r.Document = &s
	}
	if n := d.uvarint(); n > 0 {
		n--
		if n > uint64(len(d.b)) {
			return errShort
		}
		r.Metadata = make(Metadata, n)
		for range n {
			k := d.string()
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
					d.err = fmt.Errorf("metadata.%s: unknown value tag %d", k, tag)
				}
			}
		}
	}
	if d.err != nil {
		return d.err
	}
	if len(d.b) != 0 {
		return fmt.Errorf("operation record has %d trailing bytes", len(d.b))
	}
	*o = r
	return nil
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
	if n <= 0 {
		d.err = errShort
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

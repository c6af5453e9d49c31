package segment

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"sync"

	"github.com/compactorhq/compactor/internal/materialize"
)

// Digest is an order-independent digest of a set of records: the sum, mod
// 2^128, of each record's RecordHash read as a 128-bit big-endian unsigned
// integer. Sums add and subtract (Add, Sub), so the digest of a version is
// the sum of its blocks' digests, and a compaction's new digest is the base's
// minus the hashes of the records it replaced or deleted plus those of the
// records it wrote. The zero Digest is that of no record. docs/storage.md
// ("Digests") specifies the encoding so that other implementations can
// recompute it.
type Digest struct{ Hi, Lo uint64 }

// DigestSize is the length of a Digest's text form: 32 lowercase hex digits.
const DigestSize = 32

// recordHashDomain prefixes every record's canonical encoding in
// RecordHash: the hash is SHA-256 keyed by it (a fixed, public key: the
// digest detects damage and bugs, it does not authenticate).
const recordHashDomain = "compactor record digest v1\x00"

// String returns d as 32 lowercase hex digits (Hi then Lo, big-endian).
func (d Digest) String() string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], d.Hi)
	binary.BigEndian.PutUint64(b[8:], d.Lo)
	return hex.EncodeToString(b[:])
}

// ParseDigest parses the text form of a Digest (32 hex digits).
func ParseDigest(s string) (Digest, error) {
	if len(s) != DigestSize {
		return Digest{}, fmt.Errorf("digest %.40q: %d characters, want %d hex digits", s, len(s), DigestSize)
	}
	b, err := hex.DecodeString(s)
	if err != nil {
		return Digest{}, fmt.Errorf("digest %.40q: not hex", s)
	}
	return Digest{Hi: binary.BigEndian.Uint64(b[:8]), Lo: binary.BigEndian.Uint64(b[8:])}, nil
}

// Add returns d + e mod 2^128.
func (d Digest) Add(e Digest) Digest {
	lo, carry := bits.Add64(d.Lo, e.Lo, 0)
	hi, _ := bits.Add64(d.Hi, e.Hi, carry)
	return Digest{Hi: hi, Lo: lo}
}

// Sub returns d - e mod 2^128.
func (d Digest) Sub(e Digest) Digest {
	lo, borrow := bits.Sub64(d.Lo, e.Lo, 0)
	hi, _ := bits.Sub64(d.Hi, e.Hi, borrow)
	return Digest{Hi: hi, Lo: lo}
}

// digestBufs pools the buffers of RecordHash's encodings.
var digestBufs = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// RecordHash returns the hash of one record as a Digest: the first 16 bytes
// of SHA-256(recordHashDomain || canonical encoding of r), see
// appendCanonical. Safe for concurrent use.
func RecordHash(r *materialize.Record) Digest {
	bp := digestBufs.Get().(*[]byte)
	buf := appendCanonical(append((*bp)[:0], recordHashDomain...), r)
	sum := sha256.Sum256(buf)
	if cap(buf) <= 1<<20 { // a huge record's buffer is not kept
		*bp = buf[:0]
		digestBufs.Put(bp)
	}
	return Digest{Hi: binary.BigEndian.Uint64(sum[:8]), Lo: binary.BigEndian.Uint64(sum[8:16])}
}

// DigestOf returns the digest of recs.
func DigestOf(recs []materialize.Record) Digest {
	var d Digest
	for i := range recs {
		d = d.Add(RecordHash(&recs[i]))
	}
	return d
}

// tombstoneHash is the hash of a delta's tombstone of id: RecordHash of a
// record with that id and nothing else.
func tombstoneHash(id string) Digest {
	return RecordHash(&materialize.Record{ID: id})
}

// Metadata value tags of the canonical encoding.
const (
	tagString = 's'
	tagNumber = 'n'
	tagBool   = 'b'
)

// appendCanonical appends the canonical encoding of r to buf (integers
// little-endian):
//
//	u32 len(id), id bytes
//	u32 n, n × float32 embedding values (IEEE 754 bits as stored; n = 0 for none)
//	u8 0 (no document) | u8 1, u32 len(document), document bytes
//	u32 k, then per metadata key in ascending byte order:
//	    u32 len(key), key bytes, then the value:
//	    's' u32 len, bytes | 'n' float64 (IEEE 754 bits) | 'b' u8 0 or 1
//
// No metadata and empty metadata encode alike (k = 0), as do no embedding
// and an empty one: a read does not tell them apart either.
func appendCanonical(buf []byte, r *materialize.Record) []byte {
	buf = appendString(buf, r.ID)
	buf = appendCanonicalEmbedding(buf, r.Embedding)
	if r.Document == nil {
		buf = append(buf, 0)
	} else {
		buf = appendString(append(buf, 1), *r.Document)
	}
	return appendCanonicalMetadata(buf, r.Metadata)
}

// appendCanonicalEmbedding appends the embedding part of the canonical
// encoding (u32 n, then n float32 bit patterns).
func appendCanonicalEmbedding(buf []byte, e []float32) []byte {
	buf = binary.LittleEndian.AppendUint32(buf, uint32(len(e)))
	n := len(buf)
	buf = slices.Grow(buf, 4*len(e))[:n+4*len(e)]
	for i, v := range e {
		binary.LittleEndian.PutUint32(buf[n+4*i:], math.Float32bits(v))
	}
	return buf
}

// appendCanonicalMetadata appends the metadata part of the canonical
// encoding (u32 k, then the keys in ascending byte order with their
// values).
func appendCanonicalMetadata(buf []byte, m materialize.Metadata) []byte {
	buf = binary.LittleEndian.AppendUint32(buf, uint32(len(m)))
	if len(m) == 0 {
		return buf
	}
	var keysBuf [16]string
	keys := keysBuf[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		buf = appendString(buf, k)
		switch v := m[k].(type) {
		case string:
			buf = appendString(append(buf, tagString), v)
		case float64:
			buf = binary.LittleEndian.AppendUint64(append(buf, tagNumber), math.Float64bits(v))
		case bool:
			b := byte(0)
			if v {
				b = 1
			}
			buf = append(buf, tagBool, b)
		default:
			// Not storable (checkMetadata refuses it before a write): its
			// type name keeps the hash defined.
			buf = appendString(append(buf, '?'), fmt.Sprintf("%T", v))
		}
	}
	return buf
}

func appendString(buf []byte, s string) []byte {
	buf = binary.LittleEndian.AppendUint32(buf, uint32(len(s)))
	return append(buf, s...)
}

// appendBytes is appendString of a string's bytes.
func appendBytes(buf, b []byte) []byte {
	buf = binary.LittleEndian.AppendUint32(buf, uint32(len(b)))
	return append(buf, b...)
}

// Checksum returns the text form of the SHA-256 of a blob's bytes, as a
// manifest records it (BlockRef.Checksum and the like): 64 lowercase hex
// digits.
func Checksum(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

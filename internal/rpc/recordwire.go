package rpc

import (
	"encoding/binary"
	"math"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/structpb"

	compactorv1 "github.com/compactorhq/compactor/gen/compactor/v1"
)

// The protobuf binary encoding of GetRecordsResponse, written directly.
//
// A page of 1,000 records of 128 dimensions with a few metadata values is
// about 700 KB; protobuf-go's generic marshal sizes every message, then
// walks it again through its field tables, and each record's metadata is
// a google.protobuf.Struct, a map of Value messages that it ranges by
// reflection. That was a quarter of the server's CPU in a paged read of
// 600,237 records. appendGetRecordsResponse writes the same bytes the
// generic marshal writes, in one pass after a size pass, knowing the four
// message types it meets.

// appendGetRecordsResponse appends the protobuf binary encoding of m to
// dst: the bytes proto.MarshalOptions{}.MarshalAppend appends (fields in
// number order, zero scalars omitted, the embedding packed, each map entry
// with its key and value, map entries in the map's iteration order; with
// one entry per map, byte for byte what a deterministic marshal gives). ok
// false, with dst as it was, when m holds what it does not write: a nil
// record, unknown fields on the response or a record (the Structs and
// Values are read by their fields alone; structpb builds them without
// unknown fields), or a string field of the response or a record that is
// not valid UTF-8 (which protobuf-go refuses to marshal, naming it).
// Struct keys and string values are not checked: structpb.NewStruct
// refuses invalid UTF-8.
func appendGetRecordsResponse(dst []byte, m *compactorv1.GetRecordsResponse) (_ []byte, ok bool) {
	if len(m.ProtoReflect().GetUnknown()) > 0 || !utf8.ValidString(m.GetNextPageToken()) {
		return dst, false
	}
	for _, r := range m.GetRecords() {
		if r == nil || len(r.ProtoReflect().GetUnknown()) > 0 || !utf8.ValidString(r.GetId()) || !utf8.ValidString(r.GetDocument()) {
			return dst, false
		}
	}
	for _, r := range m.GetRecords() {
		dst = protowire.AppendTag(dst, 1, protowire.BytesType)
		dst = protowire.AppendVarint(dst, uint64(sizeRecord(r)))
		dst = appendRecord(dst, r)
	}
	if s := m.GetNextPageToken(); s != "" {
		dst = protowire.AppendTag(dst, 2, protowire.BytesType)
		dst = protowire.AppendString(dst, s)
	}
	if v := m.GetSegmentVersion(); v != 0 {
		dst = protowire.AppendTag(dst, 3, protowire.VarintType)
		dst = protowire.AppendVarint(dst, uint64(v))
	}
	if v := m.GetLogPosition(); v != 0 {
		dst = protowire.AppendTag(dst, 4, protowire.VarintType)
		dst = protowire.AppendVarint(dst, uint64(v))
	}
	return dst, true
}

// Every field number below is under 16: its tag is one byte.

func sizeRecord(r *compactorv1.Record) int {
	n := 0
	if id := r.GetId(); id != "" {
		n += 1 + protowire.SizeBytes(len(id))
	}
	if e := r.GetEmbedding(); len(e) > 0 {
		n += 1 + protowire.SizeBytes(4*len(e))
	}
	if r.Document != nil {
		n += 1 + protowire.SizeBytes(len(*r.Document))
	}
	if r.Metadata != nil {
		n += 1 + protowire.SizeBytes(sizeStruct(r.Metadata))
	}
	return n
}

func appendRecord(dst []byte, r *compactorv1.Record) []byte {
	if id := r.GetId(); id != "" {
		dst = protowire.AppendTag(dst, 1, protowire.BytesType)
		dst = protowire.AppendString(dst, id)
	}
	if e := r.GetEmbedding(); len(e) > 0 {
		dst = protowire.AppendTag(dst, 2, protowire.BytesType)
		dst = protowire.AppendVarint(dst, uint64(4*len(e)))
		for _, f := range e {
			dst = binary.LittleEndian.AppendUint32(dst, math.Float32bits(f))
		}
	}
	if r.Document != nil {
		dst = protowire.AppendTag(dst, 3, protowire.BytesType)
		dst = protowire.AppendString(dst, *r.Document)
	}
	if r.Metadata != nil {
		dst = protowire.AppendTag(dst, 4, protowire.BytesType)
		dst = protowire.AppendVarint(dst, uint64(sizeStruct(r.Metadata)))
		dst = appendStruct(dst, r.Metadata)
	}
	return dst
}

// sizeStruct is the encoded size of s (0 for nil: an empty message).
func sizeStruct(s *structpb.Struct) int {
	n := 0
	for k, v := range s.GetFields() {
		n += 1 + protowire.SizeBytes(sizeEntry(k, v))
	}
	return n
}

// sizeEntry is the size of one map entry of Struct.fields: its key (field
// 1) and its value (field 2), both written even when empty.
func sizeEntry(k string, v *structpb.Value) int {
	return 1 + protowire.SizeBytes(len(k)) + 1 + protowire.SizeBytes(sizeValue(v))
}

func appendStruct(dst []byte, s *structpb.Struct) []byte {
	for k, v := range s.GetFields() {
		dst = protowire.AppendTag(dst, 1, protowire.BytesType)
		dst = protowire.AppendVarint(dst, uint64(sizeEntry(k, v)))
		dst = protowire.AppendTag(dst, 1, protowire.BytesType)
		dst = protowire.AppendString(dst, k)
		dst = protowire.AppendTag(dst, 2, protowire.BytesType)
		dst = protowire.AppendVarint(dst, uint64(sizeValue(v)))
		dst = appendValue(dst, v)
	}
	return dst
}

// sizeValue is the encoded size of v: its one set kind, written even when
// zero (a oneof member is present when set); 0 for nil or no kind.
func sizeValue(v *structpb.Value) int {
	switch k := v.GetKind().(type) {
	case *structpb.Value_NullValue:
		return 1 + protowire.SizeVarint(uint64(k.NullValue))
	case *structpb.Value_NumberValue:
		return 1 + 8
	case *structpb.Value_StringValue:
		return 1 + protowire.SizeBytes(len(k.StringValue))
	case *structpb.Value_BoolValue:
		return 1 + 1
	case *structpb.Value_StructValue:
		return 1 + protowire.SizeBytes(sizeStruct(k.StructValue))
	case *structpb.Value_ListValue:
		return 1 + protowire.SizeBytes(sizeList(k.ListValue))
	}
	return 0
}

func appendValue(dst []byte, v *structpb.Value) []byte {
	switch k := v.GetKind().(type) {
	case *structpb.Value_NullValue:
		dst = protowire.AppendTag(dst, 1, protowire.VarintType)
		dst = protowire.AppendVarint(dst, uint64(k.NullValue))
	case *structpb.Value_NumberValue:
		dst = protowire.AppendTag(dst, 2, protowire.Fixed64Type)
		dst = protowire.AppendFixed64(dst, math.Float64bits(k.NumberValue))
	case *structpb.Value_StringValue:
		dst = protowire.AppendTag(dst, 3, protowire.BytesType)
		dst = protowire.AppendString(dst, k.StringValue)
	case *structpb.Value_BoolValue:
		dst = protowire.AppendTag(dst, 4, protowire.VarintType)
		dst = protowire.AppendVarint(dst, protowire.EncodeBool(k.BoolValue))
	case *structpb.Value_StructValue:
		dst = protowire.AppendTag(dst, 5, protowire.BytesType)
		dst = protowire.AppendVarint(dst, uint64(sizeStruct(k.StructValue)))
		dst = appendStruct(dst, k.StructValue)
	case *structpb.Value_ListValue:
		dst = protowire.AppendTag(dst, 6, protowire.BytesType)
		dst = protowire.AppendVarint(dst, uint64(sizeList(k.ListValue)))
		dst = appendList(dst, k.ListValue)
	}
	return dst
}

func sizeList(l *structpb.ListValue) int {
	n := 0
	for _, v := range l.GetValues() {
		n += 1 + protowire.SizeBytes(sizeValue(v))
	}
	return n
}

func appendList(dst []byte, l *structpb.ListValue) []byte {
	for _, v := range l.GetValues() {
		dst = protowire.AppendTag(dst, 1, protowire.BytesType)
		dst = protowire.AppendVarint(dst, uint64(sizeValue(v)))
		dst = appendValue(dst, v)
	}
	return dst
}

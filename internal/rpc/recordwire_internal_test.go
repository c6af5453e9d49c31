package rpc

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	compactorv1 "github.com/compactorhq/compactor/gen/compactor/v1"
)

// randomValue is a Value of any kind, nested up to depth levels.
func randomValue(r *rand.Rand, depth int) *structpb.Value {
	switch k := r.IntN(8); {
	case k == 0:
		return structpb.NewNullValue()
	case k == 1:
		return structpb.NewBoolValue(r.IntN(2) == 0)
	case k == 2:
		return structpb.NewNumberValue([]float64{0, math.Copysign(0, -1), math.NaN(), math.Inf(-1), 1e300, -3.25}[r.IntN(6)])
	case k == 3:
		return structpb.NewStringValue([]string{"", "é", "a\x00b", string(make([]byte, 200))}[r.IntN(4)])
	case k == 4 && depth > 0:
		return structpb.NewStructValue(randomStruct(r, depth-1, 3))
	case k == 5 && depth > 0:
		l := &structpb.ListValue{}
		for range r.IntN(4) {
			l.Values = append(l.Values, randomValue(r, depth-1))
		}
		return structpb.NewListValue(l)
	case k == 6:
		return &structpb.Value{} // no kind set
	}
	return structpb.NewNumberValue(r.Float64() * 1e6)
}

func randomStruct(r *rand.Rand, depth, maxFields int) *structpb.Struct {
	s := &structpb.Struct{Fields: map[string]*structpb.Value{}}
	for i := range r.IntN(maxFields + 1) {
		s.Fields[fmt.Sprintf("k%d", i)[:r.IntN(3)]+fmt.Sprint(i)] = randomValue(r, depth)
	}
	if maxFields > 1 && r.IntN(8) == 0 {
		s.Fields[""] = randomValue(r, depth) // an empty key
	}
	return s
}

// randomResponse is a GetRecordsResponse of every shape a record can
// take: empty and long ids, no, empty-list and 128-dim embeddings with
// special floats, absent and empty documents, absent, empty and nested
// metadata (with one entry at most in every Struct when flat).
func randomResponse(r *rand.Rand, flat bool) *compactorv1.GetRecordsResponse {
	m := &compactorv1.GetRecordsResponse{}
	if r.IntN(2) == 0 {
		m.NextPageToken = "cmVjb3JkczppZC0x"
	}
	m.SegmentVersion, m.LogPosition = int64(r.IntN(3))*int64(r.Uint32()), int64(r.IntN(3))*int64(r.Uint64()>>1)
	for i := range r.IntN(40) {
		rec := &compactorv1.Record{Id: fmt.Sprintf("id-%d", i)[:r.IntN(5)]}
		switch r.IntN(3) {
		case 1:
			rec.Embedding = make([]float32, 128)
			for j := range rec.Embedding {
				rec.Embedding[j] = float32(r.NormFloat64())
			}
			rec.Embedding[0] = float32(math.NaN())
			rec.Embedding[1] = float32(math.Copysign(0, -1))
		case 2:
			rec.Embedding = []float32{}
		}
		if r.IntN(3) > 0 {
			d := string(bytes.Repeat([]byte("doc "), r.IntN(50)))
			rec.Document = &d
		}
		switch {
		case r.IntN(3) == 0:
		case flat:
			rec.Metadata = randomStruct(r, 0, 1)
		default:
			rec.Metadata = randomStruct(r, 2, 6)
		}
		m.Records = append(m.Records, rec)
	}
	return m
}

// appendGetRecordsResponse writes what protobuf-go's marshal writes: byte
// for byte when every Struct has at most one entry (no map order to
// differ), else the same length and a message that decodes equal; after
// a prefix in dst, which it keeps.
func TestAppendGetRecordsResponseIsTheProtobufEncoding(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := range 2000 {
		flat := i%2 == 0
		m := randomResponse(r, flat)
		want, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		prefix := []byte("prefix")
		got, ok := appendGetRecordsResponse(prefix, m)
		if !ok {
			t.Fatalf("response %d: not written", i)
		}
		if !bytes.HasPrefix(got, prefix) {
			t.Fatalf("response %d: the prefix in dst was not kept", i)
		}
		got = got[len(prefix):]
		if flat && !bytes.Equal(got, want) {
			k := 0
			for k < len(got) && got[k] == want[k] {
				k++
			}
			t.Fatalf("response %d: %d bytes differ from protobuf-go's %d at %d: %x vs %x", i, len(got), len(want), k, got[max(0, k-8):k+8], want[max(0, k-8):k+8])
		}
		if len(got) != len(want) {
			t.Fatalf("response %d: %d bytes, protobuf-go writes %d", i, len(got), len(want))
		}
		back := &compactorv1.GetRecordsResponse{}
		if err := proto.Unmarshal(got, back); err != nil {
			t.Fatalf("response %d: %v", i, err)
		}
		// NaN != NaN under proto.Equal: compare the re-encodings.
		again, err := proto.MarshalOptions{Deterministic: true}.Marshal(back)
		if err != nil || !bytes.Equal(again, want) {
			t.Fatalf("response %d decodes to another message (%v)", i, err)
		}
	}
}

// What appendGetRecordsResponse does not write goes to protobuf-go: a nil
// record, unknown fields, strings of invalid UTF-8 (which protobuf-go
// refuses).
func TestAppendGetRecordsResponseLeavesTheRest(t *testing.T) {
	withNil := &compactorv1.GetRecordsResponse{Records: []*compactorv1.Record{{Id: "a"}, nil}}
	unknownTop := &compactorv1.GetRecordsResponse{Records: []*compactorv1.Record{{Id: "a"}}}
	unknownTop.ProtoReflect().SetUnknown([]byte{0xf8, 0x01, 0x01}) // field 31, varint 1
	unknownRec := &compactorv1.GetRecordsResponse{Records: []*compactorv1.Record{{Id: "a"}}}
	unknownRec.Records[0].ProtoReflect().SetUnknown([]byte{0xf8, 0x01, 0x01})
	bad := "\xff"
	badID := &compactorv1.GetRecordsResponse{Records: []*compactorv1.Record{{Id: bad}}}
	badDoc := &compactorv1.GetRecordsResponse{Records: []*compactorv1.Record{{Id: "a", Document: &bad}}}
	badToken := &compactorv1.GetRecordsResponse{NextPageToken: bad}
	for name, m := range map[string]*compactorv1.GetRecordsResponse{"nil record": withNil, "unknown fields": unknownTop, "a record's unknown fields": unknownRec,
		"an id of invalid UTF-8": badID, "a document of invalid UTF-8": badDoc, "a page token of invalid UTF-8": badToken} {
		if out, ok := appendGetRecordsResponse([]byte("x"), m); ok || string(out) != "x" {
			t.Errorf("%s: written (%v) or dst changed (%q)", name, ok, out)
		}
	}
	c0 := &codec{name: "proto"}
	if _, err := c0.Marshal(badDoc); err == nil || !strings.Contains(err.Error(), "UTF-8") {
		t.Fatalf("the codec's encoding of a document of invalid UTF-8: %v, want protobuf-go's error", err)
	}
	// Through the codec, they are protobuf-go's encoding.
	c := &codec{name: "proto"}
	got, err := c.Marshal(unknownRec)
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := proto.Marshal(unknownRec); !bytes.Equal(got, want) {
		t.Fatal("the codec's encoding of a record with unknown fields is not protobuf-go's")
	}
}

// BenchmarkMarshalGetRecordsResponse: one page of 1,000 records of 128
// dimensions, a 200-byte document and three metadata values, by
// appendGetRecordsResponse ("direct") and by protobuf-go ("proto"), side
// by side in one run.
func BenchmarkMarshalGetRecordsResponse(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	m := &compactorv1.GetRecordsResponse{NextPageToken: "cmVjb3JkczppZC0x", SegmentVersion: 3, LogPosition: 1_000_000}
	for i := range 1000 {
		emb := make([]float32, 128)
		for j := range emb {
			emb[j] = float32(r.NormFloat64())
		}
		doc := string(bytes.Repeat([]byte("d"), 200))
		md, err := structpb.NewStruct(map[string]any{"section": "games", "size": float64(i), "essential": i%2 == 0})
		if err != nil {
			b.Fatal(err)
		}
		m.Records = append(m.Records, &compactorv1.Record{Id: fmt.Sprintf("id-%07d", i), Embedding: emb, Document: &doc, Metadata: md})
	}
	var buf []byte
	b.Run("direct", func(b *testing.B) {
		for b.Loop() {
			buf, _ = appendGetRecordsResponse(buf[:0], m)
		}
		b.SetBytes(int64(len(buf)))
	})
	b.Run("proto", func(b *testing.B) {
		for b.Loop() {
			buf, _ = proto.MarshalOptions{}.MarshalAppend(buf[:0], m)
		}
		b.SetBytes(int64(len(buf)))
	})
}

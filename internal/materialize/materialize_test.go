package materialize

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
)

func str(s string) *string { return &s }

func rec(id string, emb float32, doc string, md Metadata) *Record {
	r := &Record{ID: id, Embedding: []float32{emb, emb}, Metadata: md}
	if doc != "" {
		r.Document = str(doc)
	}
	return r
}

func op(o Op, id string, emb float32, doc string, md Metadata) OperationRecord {
	r := OperationRecord{Op: o, ID: id, Metadata: md}
	if emb != 0 {
		r.Embedding = []float32{emb, emb}
	}
	if doc != "" {
		r.Document = str(doc)
	}
	return r
}

// TestRules has one case per cell of the table in DESIGN.md §6. Columns:
// the id is in the segment; was deleted earlier in this batch; was added
// earlier in this batch; is unknown.
func TestRules(t *testing.T) {
	seg := rec("x", 1, "old", Metadata{"k": "v", "keep": true})
	tests := []struct {
		name string
		base *Record
		ops  []OperationRecord
		want *Record
	}{
		// ADD
		{"ADD of an id in the segment is ignored", seg,
			[]OperationRecord{op(OpAdd, "x", 2, "new", Metadata{"k": "w"})}, seg},
		{"ADD of an id deleted earlier in the batch replaces it with the ADD's content only", seg,
			[]OperationRecord{op(OpDelete, "x", 0, "", nil), op(OpAdd, "x", 2, "", Metadata{"n": 1.0})},
			&Record{ID: "x", Embedding: []float32{2, 2}, Metadata: Metadata{"n": 1.0}}},
		{"ADD of an id added earlier in the batch is ignored: first add wins", nil,
			[]OperationRecord{op(OpAdd, "x", 2, "first", nil), op(OpAdd, "x", 3, "second", Metadata{"k": "v"})},
			rec("x", 2, "first", nil)},
		{"ADD of an unknown id inserts it", nil,
			[]OperationRecord{op(OpAdd, "x", 2, "doc", Metadata{"k": "v"})}, rec("x", 2, "doc", Metadata{"k": "v"})},
		// UPDATE
		{"UPDATE of an id in the segment merges", seg,
			[]OperationRecord{op(OpUpdate, "x", 0, "new", Metadata{"k": nil, "n": 2.0})},
			rec("x", 1, "new", Metadata{"keep": true, "n": 2.0})},
		{"UPDATE of an id deleted earlier in the batch is ignored", seg,
			[]OperationRecord{op(OpDelete, "x", 0, "", nil), op(OpUpdate, "x", 2, "new", nil)}, nil},
		{"UPDATE of an id added earlier in the batch merges", nil,
			[]OperationRecord{op(OpAdd, "x", 2, "doc", Metadata{"a": "1"}), op(OpUpdate, "x", 3, "", Metadata{"b": "2"})},
			rec("x", 3, "doc", Metadata{"a": "1", "b": "2"})},
		{"UPDATE of an unknown id is ignored", nil,
			[]OperationRecord{op(OpUpdate, "x", 2, "doc", nil)}, nil},
		// UPSERT
		{"UPSERT of an id in the segment merges", seg,
			[]OperationRecord{op(OpUpsert, "x", 2, "", Metadata{"k": "w"})},
			rec("x", 2, "old", Metadata{"k": "w", "keep": true})},
		{"UPSERT of an id deleted earlier in the batch replaces it", seg,
			[]OperationRecord{op(OpDelete, "x", 0, "", nil), op(OpUpsert, "x", 2, "", Metadata{"z": false, "gone": nil})},
			&Record{ID: "x", Embedding: []float32{2, 2}, Metadata: Metadata{"z": false}}},
		{"UPSERT of an id added earlier in the batch merges", nil,
			[]OperationRecord{op(OpAdd, "x", 2, "doc", Metadata{"a": "1"}), op(OpUpsert, "x", 3, "doc2", Metadata{"a": nil})},
			rec("x", 3, "doc2", nil)},
		{"UPSERT of an unknown id inserts it", nil,
			[]OperationRecord{op(OpUpsert, "x", 2, "doc", Metadata{"k": "v", "null": nil})}, rec("x", 2, "doc", Metadata{"k": "v"})},
		// DELETE
		{"DELETE of an id in the segment deletes it", seg,
			[]OperationRecord{op(OpDelete, "x", 0, "", nil)}, nil},
		{"DELETE of an id deleted earlier in the batch: it stays deleted", seg,
			[]OperationRecord{op(OpDelete, "x", 0, "", nil), op(OpDelete, "x", 0, "", nil)}, nil},
		{"DELETE of an id added earlier in the batch: the pair cancels out", nil,
			[]OperationRecord{op(OpAdd, "x", 2, "doc", nil), op(OpDelete, "x", 0, "", nil)}, nil},
		{"DELETE of an unknown id is ignored", nil,
			[]OperationRecord{op(OpDelete, "x", 0, "", nil)}, nil},
		// Merge details.
		{"a metadata key set to null disappears, an omitted key stays", seg,
			[]OperationRecord{op(OpUpdate, "x", 0, "", Metadata{"k": nil})}, rec("x", 1, "old", Metadata{"keep": true})},
		{"absent document and embedding keep the old values", seg,
			[]OperationRecord{op(OpUpdate, "x", 0, "", Metadata{"k": "v"})}, seg},
		{"nulling every metadata key leaves no metadata", rec("x", 1, "", Metadata{"a": "1"}),
			[]OperationRecord{op(OpUpdate, "x", 0, "", Metadata{"a": nil})}, rec("x", 1, "", nil)},
		{"no operations return the base", seg, nil, seg},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var before *Record
			if tt.base != nil {
				c := tt.base.Clone()
				before = &c
			}
			got := Apply(tt.base, tt.ops)
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Apply = %s, want %s", show(got), show(tt.want))
			}
			if !reflect.DeepEqual(tt.base, before) {
				t.Fatalf("Apply modified its base: %s, was %s", show(tt.base), show(before))
			}
			if got != nil && tt.base != nil && len(got.Embedding) > 0 && &got.Embedding[0] == &tt.base.Embedding[0] {
				t.Fatal("result shares its embedding with the base")
			}
		})
	}
}

func show(r *Record) string {
	if r == nil {
		return "<absent>"
	}
	b, _ := json.Marshal(r)
	return string(b)
}

func TestAddCompactDeleteAddKeepsOnlyTheSecondAdd(t *testing.T) {
	// The first batch is compacted into the segment; the second batch is the
	// delete and the second add.
	seg := Apply(nil, []OperationRecord{op(OpAdd, "x", 1, "first", Metadata{"a": "1"})})
	got := Apply(seg, []OperationRecord{op(OpDelete, "x", 0, "", nil), op(OpAdd, "x", 2, "second", nil)})
	if want := rec("x", 2, "second", nil); !reflect.DeepEqual(got, want) {
		t.Fatalf("got %s, want %s", show(got), show(want))
	}
}

func TestValidate(t *testing.T) {
	emb := []float32{1, 2, 3}
	tests := []struct {
		name      string
		ops       []OperationRecord
		dim       int
		wantField string
		wantIndex int
	}{
		{"empty id", []OperationRecord{{Op: OpAdd, Embedding: emb}}, 0, "id", 0},
		{"missing embedding on ADD", []OperationRecord{{Op: OpAdd, ID: "a"}}, 0, "embedding", 0},
		{"missing embedding on UPSERT", []OperationRecord{{Op: OpAdd, ID: "a", Embedding: emb}, {Op: OpUpsert, ID: "b"}}, 0, "embedding", 1},
		{"wrong dimension against the collection", []OperationRecord{{Op: OpAdd, ID: "a", Embedding: emb}}, 4, "embedding", 0},
		{"wrong dimension inside the batch", []OperationRecord{{Op: OpAdd, ID: "a", Embedding: emb}, {Op: OpUpdate, ID: "a", Embedding: []float32{1}}}, 0, "embedding", 1},
		{"NaN in the embedding", []OperationRecord{{Op: OpAdd, ID: "a", Embedding: []float32{1, float32(math.NaN()), 3}}}, 0, "embedding", 0},
		{"infinity in the embedding", []OperationRecord{{Op: OpAdd, ID: "a", Embedding: []float32{float32(math.Inf(1)), 1, 3}}}, 0, "embedding", 0},
		{"non-scalar metadata", []OperationRecord{{Op: OpAdd, ID: "a", Embedding: emb, Metadata: Metadata{"m": map[string]any{}}}}, 0, "metadata.m", 0},
		{"list metadata", []OperationRecord{{Op: OpUpdate, ID: "a", Metadata: Metadata{"l": []any{1.0}}}}, 0, "metadata.l", 0},
		{"NaN metadata", []OperationRecord{{Op: OpUpdate, ID: "a", Metadata: Metadata{"f": math.NaN()}}}, 0, "metadata.f", 0},
		{"unknown op", []OperationRecord{{Op: 9, ID: "a"}}, 0, "op", 0},
		{"empty embedding", []OperationRecord{{Op: OpAdd, ID: "a", Embedding: []float32{}}}, 0, "embedding", 0},
		{"a metadata key of 1 MiB", []OperationRecord{{Op: OpUpdate, ID: "a", Metadata: Metadata{strings.Repeat("k", 1<<20): "v"}}}, 0, "metadata", 0},
		{"a metadata key one byte over the limit", []OperationRecord{{Op: OpUpdate, ID: "a", Metadata: Metadata{strings.Repeat("k", DefaultMaxMetadataKeyBytes+1): "v"}}}, 0, "metadata", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Validate(tt.ops, Limits{Dimension: tt.dim})
			var ie *InvalidRecordError
			if !errors.As(err, &ie) || !errors.Is(err, ErrInvalidRecord) {
				t.Fatalf("Validate = %v, want an *InvalidRecordError", err)
			}
			if ie.Field != tt.wantField || ie.Index != tt.wantIndex {
				t.Fatalf("error names record %d field %q (%v), want record %d field %q", ie.Index, ie.Field, err, tt.wantIndex, tt.wantField)
			}
		})
	}
	dim, err := Validate([]OperationRecord{
		{Op: OpDelete, ID: "a"},
		{Op: OpUpdate, ID: "b", Metadata: Metadata{"k": nil, "s": "x", "n": 1.5, "b": true}},
		{Op: OpAdd, ID: "c", Embedding: emb},
		{Op: OpUpdate, ID: "d", Metadata: Metadata{strings.Repeat("k", DefaultMaxMetadataKeyBytes): 1.0}},
	}, Limits{})
	if err != nil || dim != 3 {
		t.Fatalf("valid batch: dimension %d, %v; want 3, nil", dim, err)
	}
}

func TestJSONRoundTrip(t *testing.T) {
	in := `{"op":"upsert","id":"pkg","embedding":[0.5,-1],"document":"d","metadata":{"a":"x","n":3,"b":true,"z":null}}`
	var o OperationRecord
	if err := json.Unmarshal([]byte(in), &o); err != nil {
		t.Fatal(err)
	}
	want := OperationRecord{Op: OpUpsert, ID: "pkg", Embedding: []float32{0.5, -1}, Document: str("d"),
		Metadata: Metadata{"a": "x", "n": 3.0, "b": true, "z": nil}}
	if !reflect.DeepEqual(o, want) {
		t.Fatalf("decoded %+v, want %+v", o, want)
	}
	out, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	var back OperationRecord
	if err := json.Unmarshal(out, &back); err != nil || !reflect.DeepEqual(back, want) {
		t.Fatalf("round trip %s -> %+v, %v", out, back, err)
	}
	if err := json.Unmarshal([]byte(`{"op":"merge","id":"a"}`), &o); err == nil {
		t.Fatal("unknown op accepted")
	}
}

func TestOpNamesRoundTripAndUnknownValuesAreNamed(t *testing.T) {
	for o, want := range map[Op]string{OpAdd: "add", OpUpdate: "update", OpUpsert: "upsert", OpDelete: "delete"} {
		if got := o.String(); got != want {
			t.Errorf("Op(%d).String() = %q, want %q", int8(o), got, want)
		}
		for _, s := range []string{want, strings.ToUpper(want), " " + want + "\t"} {
			if got, err := ParseOp(s); err != nil || got != o {
				t.Errorf("ParseOp(%q) = %v, %v; want %v", s, got, err, o)
			}
		}
	}
	for _, o := range []Op{0, OpDelete + 1, -1} {
		if got, want := o.String(), fmt.Sprintf("op(%d)", int8(o)); got != want {
			t.Errorf("Op(%d).String() = %q, want %q", int8(o), got, want)
		}
	}
	for _, s := range []string{"", "op(1)", "insert", "adds"} {
		if _, err := ParseOp(s); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%q", s)) {
			t.Errorf("ParseOp(%q) error = %v, want one naming the text", s, err)
		}
	}
}

package materialize

import (
	"encoding/json"
	"fmt"
)

// jsonOp is the JSON shape of an operation record: one line of JSON Lines
// input (DESIGN.md §9) and the form a log row is stored in.
type jsonOp struct {
	Op        string         `json:"op,omitempty"`
	ID        string         `json:"id"`
	Embedding []float32      `json:"embedding,omitempty"`
	Document  *string        `json:"document,omitempty"`
	Metadata  map[string]any `json:"metadata,omitempty"`
}

// MarshalJSON encodes o as {"op","id","embedding","document","metadata"};
// the offset is not part of the encoding. Null metadata values are kept.
func (o OperationRecord) MarshalJSON() ([]byte, error) {
	return json.Marshal(jsonOp{Op: o.Op.String(), ID: o.ID, Embedding: o.Embedding, Document: o.Document, Metadata: o.Metadata})
}

// UnmarshalJSON decodes the shape MarshalJSON writes. A missing "op" leaves
// o.Op zero (the caller may apply a default); an unknown one is an error.
// Metadata values are decoded as JSON gives them (string, float64, bool, nil,
// or a map or slice, which Validate rejects).
func (o *OperationRecord) UnmarshalJSON(b []byte) error {
	var j jsonOp
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*o = OperationRecord{ID: j.ID, Embedding: j.Embedding, Document: j.Document, Metadata: j.Metadata}
	if j.Op != "" {
		op, err := ParseOp(j.Op)
		if err != nil {
			return fmt.Errorf("field op: %w", err)
		}
		o.Op = op
	}
	return nil
}

// MarshalJSON encodes r as {"id","embedding","document","metadata"}.
func (r Record) MarshalJSON() ([]byte, error) {
	return json.Marshal(jsonOp{ID: r.ID, Embedding: r.Embedding, Document: r.Document, Metadata: r.Metadata})
}

// UnmarshalJSON decodes the shape MarshalJSON writes.
func (r *Record) UnmarshalJSON(b []byte) error {
	var j jsonOp
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*r = Record{ID: j.ID, Embedding: j.Embedding, Document: j.Document, Metadata: j.Metadata}
	return nil
}

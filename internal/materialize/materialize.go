// Package materialize holds the materialization rules of the compactor: how a
// sequence of operation records (ADD, UPDATE, UPSERT, DELETE) read from a
// collection's write-ahead log is applied to the records of a segment.
//
// The rules are the seed system's (DESIGN.md §6). Per record id, the operations
// since the last compaction are applied in log offset order to the segment's
// value:
//
//	op     | id in segment | deleted earlier in batch | added earlier in batch | id unknown
//	ADD    | ignored       | replaces it (ADD only)   | ignored (first wins)   | inserted
//	UPDATE | merged        | ignored                  | merged                 | ignored
//	UPSERT | merged        | replaces it              | merged                 | inserted
//	DELETE | deleted       | stays deleted            | the pair cancels out   | ignored
//
// "In segment" and "added earlier" both mean the record is present; "deleted
// earlier" and "unknown" both mean it is absent. The table is therefore a fold
// over a present/absent state, which is what Apply implements.
//
// Merge: a metadata key set to null is deleted, keys not mentioned are kept;
// document and embedding: the last non-null value wins, absent keeps the old.
//
// The package is pure: no I/O, no clock, nothing of the rest of the project.
// Reads and compactions both call it, so a read returns the same records before
// and after any compaction.
package materialize

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
)

// Op is the kind of an operation record.
type Op int8

// The four operations of the write-ahead log.
const (
	OpAdd Op = iota + 1
	OpUpdate
	OpUpsert
	OpDelete
)

// opNames are the lower-case names of the operations, used in JSON Lines
// input; index: the Op.
var opNames = [...]string{OpAdd: "add", OpUpdate: "update", OpUpsert: "upsert", OpDelete: "delete"}

// String returns the lower-case name used in JSON Lines input ("add", ...).
func (o Op) String() string {
	if o >= OpAdd && o <= OpDelete {
		return opNames[o]
	}
	return fmt.Sprintf("op(%d)", int8(o))
}

// ParseOp parses "add", "update", "upsert" or "delete" (any case).
// It returns an error naming the text for anything else.
func ParseOp(s string) (Op, error) {
	name := strings.ToLower(strings.TrimSpace(s))
	for o := OpAdd; o <= OpDelete; o++ {
		if name == opNames[o] {
			return o, nil
		}
	}
	return 0, fmt.Errorf("unknown operation %q (want add, update, upsert or delete)", s)
}

// Metadata maps keys to scalar values: string, float64 or bool. In an
// operation record a nil value means "delete this key"; a stored Record never
// holds nil values. Numbers are float64 (JSON numbers), so integers above 2^53
// lose precision.
type Metadata map[string]any

// OperationRecord is one entry of a collection's write-ahead log.
type OperationRecord struct {
	// Offset is the log offset assigned at append time (1-based, dense per
	// collection). Zero before the record is appended.
	Offset int64
	Op     Op
	ID     string
	// Embedding is nil when absent. Required (non-nil) on ADD and UPSERT.
	Embedding []float32
	// Document is nil when absent.
	Document *string
	// Metadata is nil when absent; a nil value deletes that key on merge.
	Metadata Metadata
}

// Record is a materialized record: what a segment stores and a read returns.
type Record struct {
	ID        string
	Embedding []float32
	Document  *string // nil when the record has no document
	Metadata  Metadata
}

// Clone returns a deep copy of r.
func (r Record) Clone() Record {
	c := Record{ID: r.ID, Embedding: slices.Clone(r.Embedding), Metadata: maps.Clone(r.Metadata)}
	if r.Document != nil {
		d := *r.Document
		c.Document = &d
	}
	return c
}

// Apply folds the operations ops (all for one record id, in log offset
// order) onto base, the record's current value (nil when the id is absent:
// unknown to the segment or deleted). It returns the resulting value, nil when
// the record ends absent. base is not modified; the result shares no mutable
// state with base or ops.
func Apply(base *Record, ops []OperationRecord) *Record {
	return apply(base, ops, false)
}

// ApplyOwning is Apply for operation records the caller gives away (freshly
// decoded ones, as a compaction has): the result may share their
// embeddings, documents and metadata maps instead of copying them, and ops
// must not be used afterwards. base is copied as by Apply and not modified.
func ApplyOwning(base *Record, ops []OperationRecord) *Record {
	return apply(base, ops, true)
}

func apply(base *Record, ops []OperationRecord, own bool) *Record {
	var cur *Record
	if base != nil {
		c := base.Clone()
		cur = &c
	}
	for i := range ops {
		cur = step(cur, &ops[i], own)
	}
	return cur
}

// step applies one operation to the present (cur != nil) or absent state.
// own: op's contents may be taken instead of copied.
func step(cur *Record, op *OperationRecord, own bool) *Record {
	switch op.Op {
	case OpAdd:
		if cur != nil {
			return cur // ADD of a present id is ignored: first add wins.
		}
		return insert(op, own)
	case OpUpsert:
		if cur == nil {
			return insert(op, own)
		}
		merge(cur, op, own)
		return cur
	case OpUpdate:
		if cur == nil {
			return nil // UPDATE of an absent id is ignored.
		}
		merge(cur, op, own)
		return cur
	case OpDelete:
		return nil
	}
	return cur
}

// insert builds a new record from the content of op alone. Null metadata
// values are dropped: there is no previous key for them to delete.
func insert(op *OperationRecord, own bool) *Record {
	if own {
		r := &Record{ID: op.ID, Embedding: op.Embedding, Document: op.Document}
		if len(op.Metadata) > 0 && !hasNull(op.Metadata) {
			r.Metadata = op.Metadata
			return r
		}
		r.Metadata = withoutNulls(op.Metadata)
		return r
	}
	r := &Record{ID: op.ID, Embedding: slices.Clone(op.Embedding)}
	if op.Document != nil {
		d := *op.Document
		r.Document = &d
	}
	r.Metadata = withoutNulls(op.Metadata)
	return r
}

func hasNull(m Metadata) bool {
	for _, v := range m {
		if v == nil {
			return true
		}
	}
	return false
}

// withoutNulls returns a new map of m's non-null entries (nil when none).
func withoutNulls(m Metadata) Metadata {
	var out Metadata
	for k, v := range m {
		if v == nil {
			continue
		}
		if out == nil {
			out = make(Metadata, len(m))
		}
		out[k] = v
	}
	return out
}

// merge applies op's content onto cur in place. own: op's embedding and
// document are taken, not copied.
func merge(cur *Record, op *OperationRecord, own bool) {
	if op.Embedding != nil {
		if own {
			cur.Embedding = op.Embedding
		} else {
			cur.Embedding = slices.Clone(op.Embedding)
		}
	}
	if op.Document != nil {
		if own {
			cur.Document = op.Document
		} else {
			d := *op.Document
			cur.Document = &d
		}
	}
	for k, v := range op.Metadata {
		if v == nil {
			delete(cur.Metadata, k)
			continue
		}
		if cur.Metadata == nil {
			cur.Metadata = make(Metadata, len(op.Metadata))
		}
		cur.Metadata[k] = v
	}
	if len(cur.Metadata) == 0 {
		cur.Metadata = nil
	}
}

// Limits bound what Validate accepts.
type Limits struct {
	// Dimension is the collection's embedding dimension; 0 when not fixed yet
	// (the first record with an embedding fixes it for the rest of the batch).
	Dimension int
	// MaxIDBytes bounds the length of a record id, in bytes (0: 1024).
	MaxIDBytes int
	// MaxDocumentBytes bounds a document, in bytes (0: 1 MiB).
	MaxDocumentBytes int
	// MaxMetadataKeys bounds the number of metadata keys (0: 256).
	MaxMetadataKeys int
	// MaxMetadataKeyBytes bounds the length of one metadata key, in bytes
	// (0: DefaultMaxMetadataKeyBytes).
	MaxMetadataKeyBytes int
}

// DefaultMaxMetadataKeyBytes is the longest metadata key Validate accepts
// when Limits.MaxMetadataKeyBytes is 0, in bytes.
const DefaultMaxMetadataKeyBytes = 256

// ErrInvalidRecord is the sentinel every *InvalidRecordError matches with
// errors.Is.
var ErrInvalidRecord = errors.New("invalid operation record")

// InvalidRecordError names the record (by its index in the batch, and its id
// when it has one) and the reason it was rejected.
type InvalidRecordError struct {
	Index  int    // position in the batch, 0-based
	ID     string // the record id, possibly empty
	Field  string // "id", "embedding", "document", "metadata.KEY", "op"
	Reason string
}

func (e *InvalidRecordError) Error() string {
	if e.ID == "" {
		return fmt.Sprintf("record %d: %s: %s", e.Index, e.Field, e.Reason)
	}
	return fmt.Sprintf("record %d (id %q): %s: %s", e.Index, e.ID, e.Field, e.Reason)
}

// Is reports whether target is ErrInvalidRecord.
func (e *InvalidRecordError) Is(target error) bool { return target == ErrInvalidRecord }

// Validate checks a batch of operation records before they are appended to
// the log, so that compaction never fails on bad input (DESIGN.md §4). It
// returns the dimension the batch fixes (lim.Dimension when already fixed, or
// the first embedding's length, or 0 when the batch has no embedding), and
// an *InvalidRecordError for the first invalid record: an empty or oversized
// id, an unknown op, a missing embedding on ADD or UPSERT, an empty embedding,
// an embedding whose length differs from the dimension, a NaN or infinite
// float, a non-scalar metadata value, an empty or oversized metadata key, or
// an oversized document.
func Validate(ops []OperationRecord, lim Limits) (int, error) {
	maxID := cmpOr(lim.MaxIDBytes, 1024)
	maxDoc := cmpOr(lim.MaxDocumentBytes, 1<<20)
	maxKeys := cmpOr(lim.MaxMetadataKeys, 256)
	maxKey := cmpOr(lim.MaxMetadataKeyBytes, DefaultMaxMetadataKeyBytes)
	dim := lim.Dimension
	for i := range ops {
		op := &ops[i]
		bad := func(field, format string, args ...any) error {
			return &InvalidRecordError{Index: i, ID: op.ID, Field: field, Reason: fmt.Sprintf(format, args...)}
		}
		switch {
		case op.ID == "":
			return 0, bad("id", "must not be empty")
		case len(op.ID) > maxID:
			return 0, bad("id", "is %d bytes, longer than the limit of %d", len(op.ID), maxID)
		case strings.ContainsRune(op.ID, 0):
			return 0, bad("id", "must not contain NUL bytes")
		}
		switch op.Op {
		case OpAdd, OpUpsert:
			if op.Embedding == nil {
				return 0, bad("embedding", "is required on %s", strings.ToUpper(op.Op.String()))
			}
		case OpUpdate, OpDelete:
		default:
			return 0, bad("op", "unknown operation %d", op.Op)
		}
		if op.Embedding != nil {
			if len(op.Embedding) == 0 {
				return 0, bad("embedding", "must not be empty")
			}
			if dim == 0 {
				dim = len(op.Embedding)
			} else if len(op.Embedding) != dim {
				return 0, bad("embedding", "has dimension %d, the collection's is %d", len(op.Embedding), dim)
			}
			for j, f := range op.Embedding {
				if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
					return 0, bad("embedding", "value %d is %v; NaN and infinite values are not allowed", j, f)
				}
			}
		}
		if op.Document != nil && len(*op.Document) > maxDoc {
			return 0, bad("document", "is %d bytes, longer than the limit of %d", len(*op.Document), maxDoc)
		}
		if len(op.Metadata) > maxKeys {
			return 0, bad("metadata", "has %d keys, more than the limit of %d", len(op.Metadata), maxKeys)
		}
		for k, v := range op.Metadata {
			if k == "" {
				return 0, bad("metadata", "keys must not be empty")
			}
			if len(k) > maxKey {
				// The key itself is not repeated: it is what is too long.
				return 0, bad("metadata", "has a key of %d bytes, longer than the limit of %d", len(k), maxKey)
			}
			switch x := v.(type) {
			case nil, string, bool:
			case float64:
				if math.IsNaN(x) || math.IsInf(x, 0) {
					return 0, bad("metadata."+k, "is %v; NaN and infinite values are not allowed", x)
				}
			case map[string]any:
				return 0, bad("metadata."+k, "is an object; values must be a string, number, boolean or null")
			case []any:
				return 0, bad("metadata."+k, "is a list; values must be a string, number, boolean or null")
			default:
				return 0, bad("metadata."+k, "has type %T; values must be a string, number, boolean or null", v)
			}
		}
	}
	return dim, nil
}

func cmpOr(v, def int) int {
	if v > 0 {
		return v
	}
	return def
}

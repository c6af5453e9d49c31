// Package sampletest decodes the bundled real sample (Debian package records
// with 64-dim embeddings, embedded in the root package; see testdata/README.md)
// for the tests of other packages.
package sampletest

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/compactorhq/compactor"
	compactorv1 "github.com/compactorhq/compactor/gen/compactor/v1"
	"github.com/compactorhq/compactor/internal/materialize"
)

// Base returns the 5,000 ADD operation records of debian-base.jsonl.gz, in
// file order.
func Base(t testing.TB) []materialize.OperationRecord {
	t.Helper()
	return decode(t, "debian-base.jsonl.gz", compactor.SampleBase)
}

// Updates returns the 217 UPSERT operation records of
// debian-updates.jsonl.gz (216 ids), in file order.
func Updates(t testing.TB) []materialize.OperationRecord {
	t.Helper()
	return decode(t, "debian-updates.jsonl.gz", compactor.SampleUpdates)
}

func decode(t testing.TB, name, gz string) []materialize.OperationRecord {
	t.Helper()
	zr, err := gzip.NewReader(strings.NewReader(gz))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var ops []materialize.OperationRecord
	sc := bufio.NewScanner(zr)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for line := 1; sc.Scan(); line++ {
		var op materialize.OperationRecord
		if err := json.Unmarshal(sc.Bytes(), &op); err != nil {
			t.Fatalf("%s:%d: %v", name, line, err)
		}
		ops = append(ops, op)
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return ops
}

var toProto = map[materialize.Op]compactorv1.Operation{
	materialize.OpAdd:    compactorv1.Operation_OPERATION_ADD,
	materialize.OpUpdate: compactorv1.Operation_OPERATION_UPDATE,
	materialize.OpUpsert: compactorv1.Operation_OPERATION_UPSERT,
	materialize.OpDelete: compactorv1.Operation_OPERATION_DELETE,
}

// Proto converts operation records to the API's messages, as a client
// would push them.
func Proto(t testing.TB, ops []materialize.OperationRecord) []*compactorv1.OperationRecord {
	t.Helper()
	out := make([]*compactorv1.OperationRecord, len(ops))
	for i, op := range ops {
		p := &compactorv1.OperationRecord{Op: toProto[op.Op], Id: op.ID, Embedding: op.Embedding, Document: op.Document}
		if op.Metadata != nil {
			md, err := structpb.NewStruct(op.Metadata)
			if err != nil {
				t.Fatalf("record %d (%s): metadata: %v", i, op.ID, err)
			}
			p.Metadata = md
		}
		out[i] = p
	}
	return out
}

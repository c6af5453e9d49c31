package rpc_test

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"os"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"

	compactorv1 "github.com/compactorhq/compactor/gen/compactor/v1"
)

// The Debian sample (DESIGN.md §9): 5,000 ADDs, then 217 UPSERTs of 216
// packages.
const (
	debianBase    = "../../testdata/debian-base.jsonl.gz"
	debianUpdates = "../../testdata/debian-updates.jsonl.gz"
)

type debianLine struct {
	Op        string         `json:"op"`
	ID        string         `json:"id"`
	Document  *string        `json:"document"`
	Metadata  map[string]any `json:"metadata"`
	Embedding []float32      `json:"embedding"`
}

// loadDebian reads a sample file as operation records, and the decoded
// lines.
func loadDebian(t *testing.T, path string) ([]*compactorv1.OperationRecord, []debianLine) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	ops := map[string]compactorv1.Operation{
		"add": compactorv1.Operation_OPERATION_ADD, "update": compactorv1.Operation_OPERATION_UPDATE,
		"upsert": compactorv1.Operation_OPERATION_UPSERT, "delete": compactorv1.Operation_OPERATION_DELETE,
	}
	var recs []*compactorv1.OperationRecord
	var lines []debianLine
	sc := bufio.NewScanner(zr)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		var l debianLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("%s:%d: %v", path, n, err)
		}
		op, ok := ops[l.Op]
		if !ok {
			t.Fatalf("%s:%d: op %q", path, n, l.Op)
		}
		md, err := structpb.NewStruct(l.Metadata)
		if err != nil {
			t.Fatalf("%s:%d: metadata: %v", path, n, err)
		}
		recs = append(recs, &compactorv1.OperationRecord{Op: op, Id: l.ID, Embedding: l.Embedding, Document: l.Document, Metadata: md})
		lines = append(lines, l)
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return recs, lines
}

package segment_test

import (
	"context"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/compactorhq/compactor/internal/materialize"
	"github.com/compactorhq/compactor/internal/segment"
)

// duckdbQuery returns the command that runs one SQL statement through
// DuckDB and prints its rows as JSON lines (tools/duckdb/query.mjs, or
// $COMPACTOR_DUCKDB_QUERY), skipping the test when DuckDB is not installed
// there.
func duckdbQuery(t *testing.T) string {
	t.Helper()
	if q := os.Getenv("COMPACTOR_DUCKDB_QUERY"); q != "" {
		return q
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "tools/duckdb/node_modules")); err != nil {
		t.Skip("DuckDB not installed: cd tools/duckdb && npm ci")
	}
	return filepath.Join(root, "tools/duckdb/query.mjs")
}

// readmeDeltaQuery returns the SQL block of docs/storage.md that follows the
// delta-query marker.
func readmeDeltaQuery(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("../../docs/storage.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(data), "<!-- delta-query")
	if !ok {
		t.Fatal("docs/storage.md has no delta-query marker")
	}
	_, rest, ok = strings.Cut(rest, "```sql\n")
	if !ok {
		t.Fatal("docs/storage.md: no sql block after the delta-query marker")
	}
	sql, _, ok := strings.Cut(rest, "```")
	if !ok {
		t.Fatal("docs/storage.md: unterminated sql block")
	}
	return sql
}

// TestDuckDBReadsAVersionWithDeltas runs docs/storage.md's query for one version
// with deltas through DuckDB and compares its rows with Store.Scan.
func TestDuckDBReadsAVersionWithDeltas(t *testing.T) {
	query := duckdbQuery(t)
	ctx := context.Background()
	dir := t.TempDir()
	blobs, closer, err := segment.OpenBucket(ctx, "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	s := segment.NewStore(blobs, segment.Config{MaxBlockRecords: 10}, nil)
	rng := rand.New(rand.NewPCG(44, 44))
	m, _, _ := commit(t, s, nil, upserts(records(rng, "k%03d0", 60, 4)))
	// Two deltas: updates, inserts, tombstones, a tombstone of a delta
	// record and a record over a tombstone; then a version that keeps a
	// stale block key in the blocks directory (the first version's).
	rec := func(id string) *materialize.Record { r := newRecord(rng, id, 4); return &r }
	m, _, _ = writeDelta(t, s, m, []segment.Change{{ID: "a", Record: rec("a")}, {ID: "k0050", Record: rec("k0050")},
		{ID: "k0100"}, {ID: "k0105", Record: rec("k0105")}, {ID: "k0200"}})
	m, _, key := writeDelta(t, s, m, []segment.Change{{ID: "k0100", Record: rec("k0100")}, {ID: "k0105"},
		{ID: "k0300", Record: rec("k0300")}, {ID: "z"}})
	if len(m.Deltas) != 2 {
		t.Fatalf("%d deltas, want 2", len(m.Deltas))
	}
	var want []materialize.Record
	if err := s.Scan(ctx, m, "", func(r materialize.Record) bool { want = append(want, r); return true }); err != nil {
		t.Fatal(err)
	}

	sql := readmeDeltaQuery(t)
	sql = strings.ReplaceAll(sql, "data/blobs", dir)
	sql = strings.ReplaceAll(sql, "<id>", testCollection)
	sql = strings.ReplaceAll(sql, "collections/"+testCollection+"/manifests/<manifest>.json", key)
	out, err := exec.CommandContext(ctx, "node", query, sql).Output()
	if err != nil {
		t.Fatalf("duckdb: %v\n%s", err, out)
	}
	var got []materialize.Record
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var row struct {
			ID        string
			Embedding []float64
			Document  *string
			Metadata  *string
		}
		dec := json.NewDecoder(strings.NewReader(line))
		if err := dec.Decode(&row); err != nil {
			t.Fatalf("row %q: %v", line, err)
		}
		r := materialize.Record{ID: row.ID, Document: row.Document}
		for _, v := range row.Embedding {
			r.Embedding = append(r.Embedding, float32(v))
		}
		if row.Metadata != nil {
			if err := json.Unmarshal([]byte(*row.Metadata), &r.Metadata); err != nil {
				t.Fatal(err)
			}
		}
		got = append(got, r)
	}
	if len(got) != len(want) {
		t.Fatalf("DuckDB returned %d rows, Scan %d", len(got), len(want))
	}
	for i := range want {
		if !sameEmbedding(got[i].Embedding, want[i].Embedding) || got[i].ID != want[i].ID ||
			!reflect.DeepEqual(got[i].Document, want[i].Document) || !reflect.DeepEqual(got[i].Metadata, want[i].Metadata) {
			t.Errorf("row %d: DuckDB %+v, Scan %+v", i, got[i], want[i])
		}
	}
}

// sameEmbedding compares float32 vectors that went through JSON.
func sameEmbedding(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Abs(float64(a[i]-b[i])) > 1e-6 {
			return false
		}
	}
	return true
}

package segment

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/compactorhq/compactor/internal/materialize"
)

// readerBlocks returns blocks of both format versions with the records they
// hold: the version 1 fixture, and version 2 blocks of each data set (one
// dictionary-encoded, one BYTE_STREAM_SPLIT at least).
func readerBlocks(t *testing.T) map[string]struct {
	data []byte
	recs []materialize.Record
} {
	t.Helper()
	out := map[string]struct {
		data []byte
		recs []materialize.Record
	}{}
	v1, err := os.ReadFile("testdata/format/block-v1.parquet")
	if err != nil {
		t.Fatal(err)
	}
	out["v1 fixture"] = struct {
		data []byte
		recs []materialize.Record
	}{v1, formatFixtureRecords(t)}
	for name, recs := range map[string][]materialize.Record{
		"v2 fixture":   formatFixtureRecords(t),
		"v2 debian64":  benchRecords(t, "debian64")[:500],
		"v2 anchor128": benchRecords(t, "anchor128")[:500],
		"v2 random128": benchRecords(t, "random128")[:500],
	} {
		data, err := encodeBlock(recs)
		if err != nil {
			t.Fatal(err)
		}
		out[name] = struct {
			data []byte
			recs []materialize.Record
		}{data, recs}
	}
	return out
}

// An independent Parquet reader (Apache Arrow's Go implementation) reads
// every value of blocks of both format versions as written.
func TestBlocksReadWithArrow(t *testing.T) {
	for name, b := range readerBlocks(t) {
		pf, err := file.NewParquetReader(bytes.NewReader(b.data))
		if err != nil {
			t.Fatalf("%s: open: %v", name, err)
		}
		fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		tbl, err := fr.ReadTable(context.Background())
		if err != nil {
			t.Fatalf("%s: read: %v", name, err)
		}
		rr := array.NewTableReader(tbl, -1)
		row := 0
		for rr.Next() {
			rec := rr.RecordBatch()
			ids := rec.Column(0).(*array.String)
			embs := rec.Column(1).(*array.List)
			elems := embs.ListValues().(*array.Float32)
			docs := rec.Column(2).(*array.String)
			metas := rec.Column(3).(*array.String)
			for i := 0; i < int(rec.NumRows()); i, row = i+1, row+1 {
				want := b.recs[row]
				if ids.Value(i) != want.ID {
					t.Fatalf("%s: row %d: id %q, want %q", name, row, ids.Value(i), want.ID)
				}
				if embs.IsNull(i) != (want.Embedding == nil) {
					t.Fatalf("%s: %s: embedding null %v, want %v", name, want.ID, embs.IsNull(i), want.Embedding == nil)
				}
				start, end := embs.ValueOffsets(i)
				if int(end-start) != len(want.Embedding) {
					t.Fatalf("%s: %s: %d floats, want %d", name, want.ID, end-start, len(want.Embedding))
				}
				for j, f := range want.Embedding {
					if math.Float32bits(elems.Value(int(start)+j)) != math.Float32bits(f) {
						t.Fatalf("%s: %s: float %d is %v, want %v", name, want.ID, j, elems.Value(int(start)+j), f)
					}
				}
				if docs.IsNull(i) != (want.Document == nil) || (want.Document != nil && docs.Value(i) != *want.Document) {
					t.Fatalf("%s: %s: document differs", name, want.ID)
				}
				if metas.IsNull(i) != (want.Metadata == nil) {
					t.Fatalf("%s: %s: metadata null %v", name, want.ID, metas.IsNull(i))
				}
				if want.Metadata != nil {
					var m map[string]any
					if err := json.Unmarshal([]byte(metas.Value(i)), &m); err != nil || !sameRecord(materialize.Record{Metadata: m}, materialize.Record{Metadata: want.Metadata}) {
						t.Fatalf("%s: %s: metadata %s, want %v (%v)", name, want.ID, metas.Value(i), want.Metadata, err)
					}
				}
			}
		}
		if err := rr.Err(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		rr.Release()
		tbl.Release()
		if row != len(b.recs) {
			t.Fatalf("%s: %d rows, want %d", name, row, len(b.recs))
		}
		if tbl.Schema().Field(1).Type.ID() != arrow.LIST {
			t.Errorf("%s: embedding is %s, want a list", name, tbl.Schema().Field(1).Type)
		}
	}
}

// DuckDB (tools/duckdb, from npm) reads every value of blocks of both format
// versions as written. Skipped when tools/duckdb/node_modules is absent
// (npm ci --prefix tools/duckdb installs it).
func TestBlocksReadWithDuckDB(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "tools/duckdb/node_modules")); err != nil {
		t.Skip("DuckDB not installed: run npm ci --prefix tools/duckdb to read blocks with DuckDB")
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node not installed: DuckDB's check needs it")
	}
	dir := t.TempDir()
	for name, b := range readerBlocks(t) {
		path := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".parquet")
		if err := os.WriteFile(path, b.data, 0o666); err != nil {
			t.Fatal(err)
		}
		// Every column as text, so that the check depends on nothing but
		// DuckDB's own float formatting (shortest round trip, inf, -0.0).
		sql := "SELECT id, CAST([CAST(x AS VARCHAR) for x in embedding] AS VARCHAR) AS embedding, document, metadata " +
			"FROM read_parquet('" + path + "') ORDER BY id"
		cmd := exec.Command("node", "tools/duckdb/query.mjs", sql)
		cmd.Dir = root
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: duckdb: %v: %s", name, err, stderr.String())
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if len(lines) != len(b.recs) {
			t.Fatalf("%s: DuckDB read %d rows, want %d", name, len(lines), len(b.recs))
		}
		for i, line := range lines {
			var row struct {
				ID        string  `json:"id"`
				Embedding *string `json:"embedding"`
				Document  *string `json:"document"`
				Metadata  *string `json:"metadata"`
			}
			if err := json.Unmarshal([]byte(line), &row); err != nil {
				t.Fatalf("%s: row %d: %v: %s", name, i, err, line)
			}
			want := b.recs[i]
			got := materialize.Record{ID: row.ID, Document: row.Document}
			if row.Embedding != nil {
				got.Embedding = []float32{}
				if s := strings.Trim(*row.Embedding, "[]"); s != "" {
					for f := range strings.SplitSeq(s, ", ") {
						v, err := strconv.ParseFloat(f, 32)
						if err != nil {
							t.Fatalf("%s: %s: float %q: %v", name, row.ID, f, err)
						}
						got.Embedding = append(got.Embedding, float32(v))
					}
				}
			}
			if row.Metadata != nil {
				if err := json.Unmarshal([]byte(*row.Metadata), &got.Metadata); err != nil {
					t.Fatalf("%s: %s: metadata %q: %v", name, row.ID, *row.Metadata, err)
				}
			}
			if !sameRecord(got, want) || (got.Embedding == nil) != (want.Embedding == nil) ||
				(got.Document == nil) != (want.Document == nil) || (got.Metadata == nil) != (want.Metadata == nil) {
				t.Fatalf("%s: row %d read by DuckDB:\n got %#v\nwant %#v", name, i, got, want)
			}
		}
	}
}

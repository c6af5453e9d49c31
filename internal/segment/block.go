package segment

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/parquet-go/parquet-go"

	"github.com/compactorhq/compactor/internal/materialize"
)

// blockFormatKey is a key of the Parquet key/value metadata of every block;
// its value is blockFormatVersion.
const (
	blockFormatKey     = "compactor.block_format"
	blockFormatVersion = "1"
)

// blockRow is one row of a block file. The column names and types are the
// public format (see the package documentation): do not change them without
// a new format version.
type blockRow struct {
	ID        string    `parquet:"id,zstd"`
	Embedding []float32 `parquet:"embedding,optional,list,zstd"`
	Document  *string   `parquet:"document,optional,zstd"`
	Metadata  *string   `parquet:"metadata,optional,zstd"` // a JSON object
}

// encodeBlock encodes recs (sorted by id, unique, non-empty) as one Parquet
// file.
func encodeBlock(recs []materialize.Record) ([]byte, error) {
	rows := make([]blockRow, len(recs))
	var meta bytes.Buffer
	enc := json.NewEncoder(&meta)
	enc.SetEscapeHTML(false)
	for i := range recs {
		r := &recs[i]
		if i > 0 && recs[i-1].ID >= r.ID {
			return nil, fmt.Errorf("records not sorted by unique id at %q", r.ID)
		}
		row := blockRow{ID: r.ID, Embedding: r.Embedding, Document: r.Document}
		if r.Metadata != nil {
			if err := checkMetadata(r.Metadata); err != nil {
				return nil, fmt.Errorf("record %q: %w", r.ID, err)
			}
			meta.Reset()
			if err := enc.Encode(map[string]any(r.Metadata)); err != nil {
				return nil, fmt.Errorf("record %q: metadata: %w", r.ID, err)
			}
			s := string(bytes.TrimSuffix(meta.Bytes(), []byte("\n")))
			row.Metadata = &s
		}
		rows[i] = row
	}

	var buf bytes.Buffer
	w := parquet.NewGenericWriter[blockRow](&buf,
		parquet.KeyValueMetadata(blockFormatKey, blockFormatVersion),
		// One row group per block: a block holds at most MaxBlockRecords rows.
		parquet.MaxRowsPerRowGroup(int64(max(len(rows), 1))),
	)
	if _, err := w.Write(rows); err != nil {
		return nil, fmt.Errorf("write parquet: %w", err)
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("write parquet: %w", err)
	}
	return buf.Bytes(), nil
}

// checkMetadata rejects values that would not decode to what they are:
// anything but strings, bools and finite float64s.
func checkMetadata(m materialize.Metadata) error {
	for k, v := range m {
		switch v := v.(type) {
		case string, bool:
		case float64:
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return fmt.Errorf("metadata key %q: %v cannot be stored", k, v)
			}
		default:
			return fmt.Errorf("metadata key %q: value of type %T is not a string, float64 or bool", k, v)
		}
	}
	return nil
}

// decodeBlock decodes a block file written by encodeBlock. It checks the
// schema, and that ids are sorted and unique.
func decodeBlock(data []byte) (recs []materialize.Record, err error) {
	// parquet-go panics on some malformed inputs; a corrupt block must be an
	// error, not a crash.
	defer func() {
		if p := recover(); p != nil {
			recs, err = nil, fmt.Errorf("read parquet: %v", p)
		}
	}()
	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, fmt.Errorf("open parquet: %w", err)
	}
	schema := f.Schema()
	for _, path := range [][]string{{"id"}, {"embedding", "list", "element"}, {"document"}, {"metadata"}} {
		if _, ok := schema.Lookup(path...); !ok {
			return nil, fmt.Errorf("parquet schema lacks column %q", path)
		}
	}
	r := parquet.NewGenericReader[blockRow](f)
	defer r.Close()
	rows := make([]blockRow, r.NumRows())
	for n := 0; n < len(rows); {
		m, err := r.Read(rows[n:])
		n += m
		if err != nil {
			if errors.Is(err, io.EOF) && n == len(rows) {
				break
			}
			if errors.Is(err, io.EOF) {
				return nil, fmt.Errorf("read parquet: %d of %d rows", n, len(rows))
			}
			return nil, fmt.Errorf("read parquet: %w", err)
		}
		if m == 0 {
			return nil, fmt.Errorf("read parquet: no progress at row %d of %d", n, len(rows))
		}
	}

	recs = make([]materialize.Record, len(rows))
	for i := range rows {
		row := &rows[i]
		if i > 0 && rows[i-1].ID >= row.ID {
			return nil, fmt.Errorf("ids not sorted and unique at row %d (%q)", i, row.ID)
		}
		rec := materialize.Record{ID: row.ID, Embedding: row.Embedding, Document: row.Document}
		if row.Metadata != nil {
			var m map[string]any
			if err := json.Unmarshal([]byte(*row.Metadata), &m); err != nil {
				return nil, fmt.Errorf("record %q: metadata: %w", row.ID, err)
			}
			rec.Metadata = m // nil for the JSON literal null
		}
		recs[i] = rec
	}
	return recs, nil
}

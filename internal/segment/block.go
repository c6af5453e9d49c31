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
// file. It refuses a block that decodeBlock would refuse: one whose decode
// needs more than MaxBlockDecodeBytes.
func encodeBlock(recs []materialize.Record) ([]byte, error) {
	return encodeBlockWithin(recs, MaxBlockDecodeBytes)
}

// encodeBlockWithin is encodeBlock with limit in place of
// MaxBlockDecodeBytes.
func encodeBlockWithin(recs []materialize.Record, limit int64) ([]byte, error) {
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
	// Never write a block that decodeBlock would refuse.
	if _, err := inspectBlock(buf.Bytes(), int64(len(recs)), limit); err != nil {
		return nil, fmt.Errorf("%w: %d records (lower --max-block-records if records are this large): %w", ErrBlockTooLarge, len(recs), err)
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
// file's structure and every size it claims before parquet-go allocates from
// them (see inspectBlock), the schema, and that ids are sorted and unique.
// wantRows is the record count the manifest gives for the block (< 0:
// unknown, only the file's own consistency and MaxBlockDecodeBytes bound the
// decode).
func decodeBlock(data []byte, wantRows int64) (recs []materialize.Record, err error) {
	// parquet-go panics on some malformed inputs; a corrupt block must be an
	// error, not a crash.
	defer func() {
		if p := recover(); p != nil {
			recs, err = nil, fmt.Errorf("read parquet: %v", p)
		}
	}()
	info, err := inspectBlock(data, wantRows, MaxBlockDecodeBytes)
	if err != nil {
		return nil, err
	}
	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)),
		parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true))
	if err != nil {
		return nil, fmt.Errorf("open parquet: %w", err)
	}
	schema := f.Schema()
	for _, path := range blockColumns {
		if _, ok := schema.Lookup(path...); !ok {
			return nil, fmt.Errorf("parquet schema lacks column %q", path)
		}
	}
	r := parquet.NewGenericReader[blockRow](f)
	defer r.Close()
	// Rows are read in batches, so that memory grows with the rows that
	// actually decode rather than with what the footer claims.
	const batch = 256
	buf := make([]blockRow, min(info.rows, batch))
	recs = make([]materialize.Record, 0, min(info.rows, batch))
	for int64(len(recs)) < info.rows {
		want := min(info.rows-int64(len(recs)), int64(len(buf)))
		m, err := r.Read(buf[:want])
		for i := range buf[:m] {
			rec, rerr := recordOf(&buf[i])
			if rerr != nil {
				return nil, rerr
			}
			if n := len(recs); n > 0 && recs[n-1].ID >= rec.ID {
				return nil, fmt.Errorf("ids not sorted and unique at row %d (%q)", n, rec.ID)
			}
			recs = append(recs, rec)
		}
		clear(buf[:m])
		if err != nil {
			if errors.Is(err, io.EOF) && int64(len(recs)) == info.rows {
				break
			}
			if errors.Is(err, io.EOF) {
				return nil, fmt.Errorf("read parquet: %d of %d rows", len(recs), info.rows)
			}
			return nil, fmt.Errorf("read parquet: %w", err)
		}
		if m == 0 {
			return nil, fmt.Errorf("read parquet: no progress at row %d of %d", len(recs), info.rows)
		}
	}
	return recs, nil
}

// decodeBlockOf decodes the block ref names from its data and checks it
// against ref: size, record count and id range. Errors are *CorruptError.
func decodeBlockOf(ref BlockRef, data []byte) ([]materialize.Record, error) {
	if ref.Bytes > 0 && int64(len(data)) != ref.Bytes {
		return nil, corrupt(KindBlock, ref.Key, fmt.Errorf("%d bytes, manifest says %d", len(data), ref.Bytes))
	}
	recs, err := decodeBlock(data, ref.Records)
	if err != nil {
		return nil, corrupt(KindBlock, ref.Key, err)
	}
	if int64(len(recs)) != ref.Records {
		return nil, corrupt(KindBlock, ref.Key, fmt.Errorf("%d records, manifest says %d", len(recs), ref.Records))
	}
	if len(recs) > 0 && (recs[0].ID != ref.MinID || recs[len(recs)-1].ID != ref.MaxID) {
		return nil, corrupt(KindBlock, ref.Key, fmt.Errorf("ids [%q, %q], manifest says [%q, %q]",
			recs[0].ID, recs[len(recs)-1].ID, ref.MinID, ref.MaxID))
	}
	return recs, nil
}

// recordOf converts one decoded row.
func recordOf(row *blockRow) (materialize.Record, error) {
	rec := materialize.Record{ID: row.ID, Embedding: row.Embedding, Document: row.Document}
	if row.Metadata != nil {
		var m map[string]any
		if err := json.Unmarshal([]byte(*row.Metadata), &m); err != nil {
			return materialize.Record{}, fmt.Errorf("record %q: metadata: %w", row.ID, err)
		}
		rec.Metadata = m // nil for the JSON literal null
	}
	return rec, nil
}

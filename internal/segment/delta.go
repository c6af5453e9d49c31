package segment

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/parquet-go/parquet-go"
)

// KindDelta is the CorruptError.Kind of a delta file.
const KindDelta = "delta"

// deltaFormatKey is a key of the Parquet key/value metadata of every delta;
// its value is deltaFormatVersion.
const (
	deltaFormatKey     = "compactor.delta_format"
	deltaFormatVersion = "1"
)

// deltaRow is one row of a delta file: the columns of a block, and deleted
// (true: a tombstone, the id is absent from the version; its other columns
// are null). The column names and types are the public format (see the
// package documentation).
//
// The block columns are spelled out (an embedded blockRow decodes a null
// after a non-null value of an optional column wrongly in parquet-go
// v0.32): keep them as blockRow's.
type deltaRow struct {
	ID        string    `parquet:"id,zstd"`
	Embedding []float32 `parquet:"embedding,optional,list,zstd"`
	Document  *string   `parquet:"document,optional,zstd"`
	Metadata  *string   `parquet:"metadata,optional,zstd"` // a JSON object
	Deleted   bool      `parquet:"deleted,zstd"`
}

// deltaColumns are the leaf columns of a delta, by path: the block's and
// deleted.
var deltaColumns = append(slices.Clip(blockColumns), []string{"deleted"})

// ReadDelta reads all rows of a delta, in id order, as changes (a nil Record
// is a tombstone). Errors wrap ErrNotExist when missing; a delta that cannot
// be decoded, claims more than its file can hold or MaxBlockDecodeBytes
// allows, or contradicts ref (size, record and tombstone counts, id range)
// is a *CorruptError of KindDelta naming the key and the collection.
func (s *Store) ReadDelta(ctx context.Context, ref DeltaRef) ([]Change, error) {
	data, err := s.getBlob(ctx, KindDelta, ref.Key)
	if err != nil {
		return nil, fmt.Errorf("read delta %s: %w", ref.Key, err)
	}
	return decodeDeltaOf(ref, data)
}

// checkDeltas checks the deltas of m: keys of the collection (each once),
// rows a read can hold, non-empty ranges, and a record count that the
// blocks (blockRecords) and the delta records can make.
func checkDeltas(m *Manifest, blockRecords int64) error {
	prefix := deltasPrefix(m.CollectionID)
	keys := make(map[string]bool, len(m.Deltas))
	var records int64
	for i, d := range m.Deltas {
		if err := checkRef("delta", i, d.Key, prefix, keys, d.Bytes, d.MinID, d.MaxID); err != nil {
			return err
		}
		if d.Records < 0 || d.Tombstones < 0 || d.Records > maxBlockRecords || d.Tombstones > maxBlockRecords-d.Records || d.Records+d.Tombstones < 1 {
			return fmt.Errorf("delta %s: %d records and %d tombstones, rows outside 1..%d", d.Key, d.Records, d.Tombstones, maxBlockRecords)
		}
		records += d.Records
	}
	if m.RecordCount < 0 || m.RecordCount > blockRecords+records {
		return fmt.Errorf("record count %d outside 0..%d (blocks hold %d, deltas %d records)", m.RecordCount, blockRecords+records, blockRecords, records)
	}
	return nil
}

// encodeDelta encodes changes (sorted by unique id, non-empty) as one
// Parquet file of deltaRows. It refuses a delta that decodeDelta would
// refuse (ErrBlockTooLarge).
func encodeDelta(changes []Change) ([]byte, error) {
	return encodeDeltaWithin(changes, MaxBlockDecodeBytes)
}

// encodeDeltaWithin is encodeDelta with limit in place of
// MaxBlockDecodeBytes.
func encodeDeltaWithin(changes []Change, limit int64) ([]byte, error) {
	rows := make([]deltaRow, len(changes))
	var meta bytes.Buffer
	enc := json.NewEncoder(&meta)
	enc.SetEscapeHTML(false)
	for i, c := range changes {
		if i > 0 && changes[i-1].ID >= c.ID {
			return nil, fmt.Errorf("changes not sorted by unique id at %q", c.ID)
		}
		rows[i].ID = c.ID
		if c.Record == nil {
			rows[i].Deleted = true
			continue
		}
		r := c.Record
		rows[i].Embedding, rows[i].Document = r.Embedding, r.Document
		if r.Metadata != nil {
			if err := checkMetadata(r.Metadata); err != nil {
				return nil, fmt.Errorf("record %q: %w", r.ID, err)
			}
			meta.Reset()
			if err := enc.Encode(map[string]any(r.Metadata)); err != nil {
				return nil, fmt.Errorf("record %q: metadata: %w", r.ID, err)
			}
			s := string(bytes.TrimSuffix(meta.Bytes(), []byte("\n")))
			rows[i].Metadata = &s
		}
	}
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[deltaRow](&buf,
		parquet.KeyValueMetadata(deltaFormatKey, deltaFormatVersion),
		parquet.MaxRowsPerRowGroup(int64(max(len(rows), 1))),
	)
	if _, err := w.Write(rows); err != nil {
		return nil, fmt.Errorf("write parquet: %w", err)
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("write parquet: %w", err)
	}
	if _, err := inspectDelta(buf.Bytes(), int64(len(rows)), limit); err != nil {
		return nil, fmt.Errorf("%w: delta of %d rows: %w", ErrBlockTooLarge, len(rows), err)
	}
	return buf.Bytes(), nil
}

// decodeDeltaOf decodes the delta ref names from its data and checks it
// against ref: size, record and tombstone counts, id range. Errors are
// *CorruptError of KindDelta.
func decodeDeltaOf(ref DeltaRef, data []byte) ([]Change, error) {
	if ref.Bytes > 0 && int64(len(data)) != ref.Bytes {
		return nil, corrupt(KindDelta, ref.Key, fmt.Errorf("%d bytes, manifest says %d", len(data), ref.Bytes))
	}
	cs, err := decodeDelta(data, ref.Records+ref.Tombstones)
	if err != nil {
		return nil, corrupt(KindDelta, ref.Key, err)
	}
	var tombstones int64
	for _, c := range cs {
		if c.Record == nil {
			tombstones++
		}
	}
	if tombstones != ref.Tombstones || int64(len(cs))-tombstones != ref.Records {
		return nil, corrupt(KindDelta, ref.Key, fmt.Errorf("%d records and %d tombstones, manifest says %d and %d",
			int64(len(cs))-tombstones, tombstones, ref.Records, ref.Tombstones))
	}
	if len(cs) > 0 && (cs[0].ID != ref.MinID || cs[len(cs)-1].ID != ref.MaxID) {
		return nil, corrupt(KindDelta, ref.Key, fmt.Errorf("ids [%q, %q], manifest says [%q, %q]",
			cs[0].ID, cs[len(cs)-1].ID, ref.MinID, ref.MaxID))
	}
	return cs, nil
}

// decodeDelta decodes a delta file written by encodeDelta, with the checks
// of decodeBlock (inspectDelta before parquet-go allocates from the file's
// claims; schema; ids sorted and unique). wantRows < 0: unknown.
func decodeDelta(data []byte, wantRows int64) (cs []Change, err error) {
	defer func() {
		if p := recover(); p != nil {
			cs, err = nil, fmt.Errorf("read parquet: %v", p)
		}
	}()
	info, err := inspectDelta(data, wantRows, MaxBlockDecodeBytes)
	if err != nil {
		return nil, err
	}
	f, err := openParquet(data, deltaColumns)
	if err != nil {
		return nil, err
	}
	r := parquet.NewGenericReader[deltaRow](f)
	defer r.Close()
	return readRows(r, info.rows, func(row *deltaRow) (Change, string, error) {
		if row.Deleted {
			return Change{ID: row.ID}, row.ID, nil
		}
		rec, err := recordOf(&blockRow{ID: row.ID, Embedding: row.Embedding, Document: row.Document, Metadata: row.Metadata})
		if err != nil {
			return Change{}, row.ID, err
		}
		return Change{ID: row.ID, Record: &rec}, row.ID, nil
	})
}

// inspectDelta is inspectBlock for a delta file: the same checks of the
// footer, every column chunk and every page, with the delta's columns.
func inspectDelta(data []byte, wantRows, limit int64) (blockInfo, error) {
	return inspectParquet(data, wantRows, limit, deltaColumns, -1)
}

package segment

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
)

// DamageColumnPages returns a copy of the block file data whose column
// chunk named column (its first path element) has the second half of its
// bytes inverted: the footer and the file's size stay as they were, the
// column's pages no longer decode. It exists in test builds only.
func DamageColumnPages(t testing.TB, data []byte, column string) []byte {
	t.Helper()
	size := len(data)
	footerLen := int(binary.LittleEndian.Uint32(data[size-8:]))
	var meta format.FileMetaData
	if err := thrift.Unmarshal(new(thrift.CompactProtocol), data[size-8-footerLen:size-8], &meta); err != nil {
		t.Fatal(err)
	}
	out := bytes.Clone(data)
	damaged := false
	for _, rg := range meta.RowGroups {
		for _, cc := range rg.Columns {
			if cc.MetaData.PathInSchema[0] != column {
				continue
			}
			start := cc.MetaData.DataPageOffset
			if d := cc.MetaData.DictionaryPageOffset; d > 0 {
				start = min(start, d)
			}
			end := start + cc.MetaData.TotalCompressedSize
			for i := start + (end-start)/2; i < end; i++ {
				out[i] ^= 0xff
			}
			damaged = true
		}
	}
	if !damaged {
		t.Fatalf("no column %s in the block", column)
	}
	return out
}

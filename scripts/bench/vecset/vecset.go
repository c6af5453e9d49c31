// Package vecset is the format of the vector data sets of the index
// benchmark, which scripts/bench/vecgen writes and scripts/bench/vindex
// reads. A data set of kind KIND is three files in one directory:
// KIND.base.f32 (Meta.N rows of Meta.Dim little-endian float32, row after
// row), KIND.query.f32 (Meta.Queries rows) and KIND.json (Meta).
package vecset

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
)

// Meta describes a data set (KIND.json).
type Meta struct {
	Kind     string `json:"kind"`
	N        int    `json:"n"`       // base vectors
	Queries  int    `json:"queries"` // query vectors
	Dim      int    `json:"dim"`
	Distance string `json:"distance"` // l2, cosine or ip
	Seed     uint64 `json:"seed"`     // of the generator; 0 for a data set read from files
}

// BasePath, QueryPath and MetaPath are the files of kind in dir.
func BasePath(dir, kind string) string  { return filepath.Join(dir, kind+".base.f32") }
func QueryPath(dir, kind string) string { return filepath.Join(dir, kind+".query.f32") }
func MetaPath(dir, kind string) string  { return filepath.Join(dir, kind+".json") }

// WriteMeta writes m as MetaPath(dir, m.Kind).
func WriteMeta(dir string, m Meta) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return os.WriteFile(MetaPath(dir, m.Kind), append(b, '\n'), 0o644)
}

// ReadMeta reads MetaPath(dir, kind).
func ReadMeta(dir, kind string) (Meta, error) {
	var m Meta
	b, err := os.ReadFile(MetaPath(dir, kind))
	if err != nil {
		return m, err
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("%s.json: %w", kind, err)
	}
	return m, nil
}

// WriteF32 writes vs (each of dim values) to path as rows of little-endian
// float32.
func WriteF32(path string, vs [][]float32, dim int) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	buf := make([]byte, 4*dim)
	for _, v := range vs {
		for j, x := range v {
			binary.LittleEndian.PutUint32(buf[4*j:], math.Float32bits(x))
		}
		if _, err := w.Write(buf); err != nil {
			f.Close()
			return err
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// ReadF32 reads a file of rows of dim little-endian float32 values; a file
// whose size is not a whole number of rows is an error naming it.
func ReadF32(path string, dim int) ([][]float32, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size()%int64(4*dim) != 0 {
		return nil, fmt.Errorf("%s: %d bytes, not rows of %d float32", path, st.Size(), dim)
	}
	rows := int(st.Size() / int64(4*dim))
	flat := make([]float32, rows*dim)
	if err := binary.Read(bufio.NewReaderSize(f, 1<<20), binary.LittleEndian, flat); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	out := make([][]float32, rows)
	for i := range out {
		out[i] = flat[i*dim : (i+1)*dim : (i+1)*dim]
	}
	return out, nil
}

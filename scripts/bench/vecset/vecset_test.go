package vecset

import (
	"os"
	"reflect"
	"testing"
)

func TestWriteThenReadGivesTheSameDataSet(t *testing.T) {
	dir := t.TempDir()
	vs := [][]float32{{1, -2.5, 3}, {0, 1e-7, -1e9}}
	m := Meta{Kind: "tiny", N: 2, Queries: 0, Dim: 3, Distance: "l2", Seed: 7}
	if err := WriteF32(BasePath(dir, m.Kind), vs, m.Dim); err != nil {
		t.Fatal(err)
	}
	if err := WriteMeta(dir, m); err != nil {
		t.Fatal(err)
	}
	gotM, err := ReadMeta(dir, "tiny")
	if err != nil || gotM != m {
		t.Fatalf("ReadMeta = %+v, %v; want %+v", gotM, err, m)
	}
	got, err := ReadF32(BasePath(dir, "tiny"), 3)
	if err != nil || !reflect.DeepEqual(got, vs) {
		t.Fatalf("ReadF32 = %v, %v; want %v", got, err, vs)
	}
	if _, err := ReadF32(BasePath(dir, "tiny"), 4); err == nil {
		t.Error("ReadF32 of rows of 3 as rows of 4 succeeded")
	}
	if err := os.WriteFile(MetaPath(dir, "bad"), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadMeta(dir, "bad"); err == nil {
		t.Error("ReadMeta of a truncated file succeeded")
	}
}

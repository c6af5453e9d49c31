package segment

import (
	"bytes"
	"math/rand/v2"
	"reflect"
	"testing"
)

// TestBlockRowsReadTheWantedRowsAsAWholeDecodeDoes: the rows of a sparse
// read (the id column, then only the wanted rows of the others) are those
// of a whole decode, for id sets at the ends, at random and dense, over
// blocks whose embedding column spans one page (debian64) or several
// (random128, 4 pages), of plain floats or of indexes into a dictionary
// (anchor128: quantised floats); the records refer to none of the file's
// bytes (a pooled buffer holds them).
func TestBlockRowsReadTheWantedRowsAsAWholeDecodeDoes(t *testing.T) {
	for _, set := range []string{"debian64", "random128", "anchor128"} {
		t.Run(set, func(t *testing.T) {
			recs := benchRecords(t, set)
			recs = recs[:min(len(recs), 4096)]
			data, err := encodeBlock(recs)
			if err != nil {
				t.Fatal(err)
			}
			ref := BlockRef{Key: "k", MinID: recs[0].ID, MaxID: recs[len(recs)-1].ID, Records: int64(len(recs)), Bytes: int64(len(data))}
			whole, err := decodeBlockOf(ref, data)
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(20, 24))
			picks := [][]int{{0}, {len(recs) - 1}, {0, 1, len(recs) - 2, len(recs) - 1}}
			for _, n := range []int{3, 60, 500} {
				p := rng.Perm(len(recs))[:n]
				picks = append(picks, p)
			}
			for _, p := range picks {
				ids := make([]string, 0, len(p)+1)
				for _, i := range p {
					ids = append(ids, recs[i].ID)
				}
				ids = append(ids, recs[0].ID+"~absent")
				// The read's file bytes are overwritten once it returns, as
				// a pooled buffer is by the next read (readBlockRows): no
				// record may refer to them.
				file := bytes.Clone(data)
				got, err := blockRows(ref, file, ids)
				if err != nil {
					t.Fatalf("%d ids: %v", len(ids), err)
				}
				for i := range file {
					file[i] = 0xff
				}
				if len(got) != len(p) {
					t.Fatalf("%d ids: %d records, want %d", len(ids), len(got), len(p))
				}
				for _, i := range p {
					if r := got[recs[i].ID]; !reflect.DeepEqual(r, whole[i]) {
						t.Fatalf("%d ids: row %d (%s) = %+v, want %+v", len(ids), i, recs[i].ID, r, whole[i])
					}
				}
			}
		})
	}
}

// TestBlockDecodersKeepNoFileBytes: what a whole decode (ReadBlock) and a
// decode without embeddings (the row cache's) return refers to none of the
// file's bytes, which a pooled buffer holds and the next read overwrites
// (getBlobBuffer).
func TestBlockDecodersKeepNoFileBytes(t *testing.T) {
	recs := benchRecords(t, "debian64")[:2048]
	data, err := encodeBlock(recs)
	if err != nil {
		t.Fatal(err)
	}
	ref := BlockRef{Key: "k", MinID: recs[0].ID, MaxID: recs[len(recs)-1].ID, Records: int64(len(recs)), Bytes: int64(len(data))}
	scribbled := func(decode func([]byte) (any, error)) any {
		t.Helper()
		file := bytes.Clone(data)
		v, err := decode(file)
		if err != nil {
			t.Fatal(err)
		}
		for i := range file {
			file[i] = 0xff
		}
		return v
	}
	for name, decode := range map[string]func([]byte) (any, error){
		"whole":         func(b []byte) (any, error) { return decodeBlockOf(ref, b) },
		"no embeddings": func(b []byte) (any, error) { return lightBlockOf(ref, b) },
	} {
		want, err := decode(data)
		if err != nil {
			t.Fatal(err)
		}
		if got := scribbled(decode); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: the decode changed when its file's bytes were overwritten", name)
		}
	}
}

package vindex

import (
	"encoding/binary"
	"hash/crc32"
	"math/rand/v2"
	"slices"
	"testing"
)

// checkBetween asserts that every hit of g for queries is at, bit for
// bit, Between of the query and the vector model holds for it.
func checkBetween(t *testing.T, what string, g *Graph, model map[string][]float32, queries [][]float32) {
	t.Helper()
	if !g.BetweenDistances() {
		t.Fatalf("%s: BetweenDistances is false", what)
	}
	d := g.Params().Distance
	for _, q := range queries {
		hits, err := g.Search(q, 10, 50, nil)
		if err != nil {
			t.Fatal(err)
		}
		exact, err := g.Scan(q, 10, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range slices.Concat(hits, exact) {
			if want := d.Between(q, model[h.ID]); h.Distance != want {
				t.Fatalf("%s: %s at %v, Between says %v", what, h.ID, h.Distance, want)
			}
		}
	}
}

// A graph's distances are Between's to the bit for every distance: built,
// decoded from its blob, after a successor's inserts and deletes, after a
// repair and after a rebuild; a cosine graph whose vectors another kernel
// (or an older writer) normalised says they are not.
func TestSearchDistancesAreBetweensBitForBit(t *testing.T) {
	for _, d := range []Distance{DistanceL2, DistanceCosine, DistanceIP} {
		t.Run(d.String(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(40, uint64(d)))
			const n, dim = 600, 24
			vecs := gaussianMixture(rng, n, dim, 20)
			p := Params{Dim: dim, Distance: d, M: 8, EfConstruction: 50, Seed: 4}
			g := build(t, p, vecs, 1)
			model := map[string][]float32{}
			for i, v := range vecs {
				model[idOf(i)] = v
			}
			queries := gaussianMixture(rng, 20, dim, 20)
			queries = append(queries, vecs[3]) // distance 0 to a record
			checkBetween(t, "built", g, model, queries)

			blob, chunks := g.encodeAll()
			dec, err := Decode(blob, chunksOf(chunks))
			if err != nil {
				t.Fatal(err)
			}
			checkBetween(t, "decoded", dec, model, queries)

			s := dec.Successor()
			var ids []string
			var up [][]float32
			for i := range 80 {
				ids, up = append(ids, idOf(rng.IntN(n+40))), append(up, gaussianMixture(rng, 1, dim, 20)[0])
				model[ids[i]] = up[i]
			}
			if err := s.InsertBatch(ids, up, 1); err != nil {
				t.Fatal(err)
			}
			for range 90 {
				id := idOf(rng.IntN(n))
				s.Delete(id)
				delete(model, id)
			}
			checkBetween(t, "successor", s, model, queries)
			s.Repair(1)
			checkBetween(t, "repaired", s, model, queries)
			r, err := s.Rebuild(p, 2)
			if err != nil {
				t.Fatal(err)
			}
			checkBetween(t, "rebuilt", r, model, queries)

			// The header says which kernel normalised the vectors.
			other := kernelPureGo
			if kernelID() == kernelPureGo {
				other = kernelAVX2
			}
			for _, k := range []uint8{kernelUnknown, other} {
				h := retagKernel(t, blob, k)
				g2, err := Decode(h, chunksOf(chunks))
				if err != nil {
					t.Fatal(err)
				}
				if want := d != DistanceCosine; g2.BetweenDistances() != want {
					t.Errorf("kernel code %d: BetweenDistances = %v, want %v", k, g2.BetweenDistances(), want)
				}
				if want := d != DistanceCosine; g2.Successor().BetweenDistances() != want {
					t.Errorf("kernel code %d: the successor's BetweenDistances = %v, want %v", k, !want, want)
				}
			}
		})
	}
}

// retagKernel returns a copy of graph blob b with header byte 7 (the
// normalising kernel) set to k and the header checksum redone.
func retagKernel(t *testing.T, b []byte, k uint8) []byte {
	t.Helper()
	out := slices.Clone(b)
	out[7] = k
	binary.LittleEndian.PutUint32(out[52:], crc32.Checksum(out[:52], castagnoli()))
	return out
}

package vindex

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
)

// A successor's id map shares its parent's as its base (no entry copied),
// and a chain of successors with random sets and deletes always answers as
// a plain map would, folding its overlay into a new base once it grows
// past a quarter of the base.
func TestIDMapSuccessorsShareTheirBase(t *testing.T) {
	rng := rand.New(rand.NewPCG(47, 48))
	m := newIDMap()
	want := map[string]int32{}
	for i := range 1000 {
		id := fmt.Sprintf("id%d", i)
		m.set(id, int32(i))
		want[id] = int32(i)
	}
	folds := 0
	slot := int32(1000)
	for round := range 40 {
		base := m.own
		if m.base != nil {
			base = m.base
		}
		s := m.successor()
		switch {
		case reflect.ValueOf(s.base).UnsafePointer() == reflect.ValueOf(base).UnsafePointer():
		case m.base != nil && len(m.own) > len(m.base)/4:
			folds++
		default:
			t.Fatalf("round %d: the successor's base is a copy, not its parent's", round)
		}
		m = s
		for range 60 {
			id := fmt.Sprintf("id%d", rng.IntN(1500))
			if rng.IntN(3) == 0 {
				_, live := want[id]
				if got := m.del(id); got != live {
					t.Fatalf("round %d: del(%s) = %v, want %v", round, id, got, live)
				}
				delete(want, id)
			} else {
				m.set(id, slot)
				want[id] = slot
				slot++
			}
		}
		if m.len() != len(want) {
			t.Fatalf("round %d: %d live ids, want %d", round, m.len(), len(want))
		}
		for i := range 1500 {
			id := fmt.Sprintf("id%d", i)
			n, ok := m.get(id)
			if w, live := want[id]; ok != live || (ok && n != w) {
				t.Fatalf("round %d: get(%s) = %d, %v; want %d, %v", round, id, n, ok, w, live)
			}
		}
	}
	if folds == 0 {
		t.Fatal("the overlay never folded into a new base")
	}
	if got := m.successor(); got.len() != len(want) {
		t.Fatalf("last successor: %d live ids, want %d", got.len(), len(want))
	}
}

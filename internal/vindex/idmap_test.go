package vindex

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// A successor's id map shares its parent's table as its base (no entry
// copied), and a chain of successors with random sets and deletes always
// answers as a plain map would, folding its overlay into a new table once
// it grows past a quarter of the base. The graph's slots are append-only
// (ids[slot] never changes), as here.
func TestIDMapSuccessorsShareTheirBase(t *testing.T) {
	rng := rand.New(rand.NewPCG(47, 48))
	m := newIDMap()
	want := map[string]int32{}
	var ids []string
	set := func(id string) {
		ids = append(ids, id)
		m.set(id, int32(len(ids)-1), ids)
		want[id] = int32(len(ids) - 1)
	}
	for i := range 1000 {
		set(fmt.Sprintf("id%d", i))
	}
	folds := 0
	for round := range 40 {
		s := m.successor(ids)
		switch {
		case s.tab == m.tab:
			if !s.shared {
				t.Fatalf("round %d: the successor writes its parent's table", round)
			}
		case m.shared && len(m.own) > m.tab.used/4:
			folds++
		default:
			t.Fatalf("round %d: the successor's base is a copy, not its parent's", round)
		}
		m = s
		for range 60 {
			id := fmt.Sprintf("id%d", rng.IntN(1500))
			if rng.IntN(3) == 0 {
				_, live := want[id]
				if got := m.del(id, ids); got != live {
					t.Fatalf("round %d: del(%s) = %v, want %v", round, id, got, live)
				}
				delete(want, id)
			} else {
				set(id)
			}
		}
		checkIDMap(t, fmt.Sprintf("round %d", round), &m, ids, want)
	}
	if folds == 0 {
		t.Fatal("the overlay never folded into a new base")
	}
	if got := m.successor(ids); got.len() != len(want) {
		t.Fatalf("last successor: %d live ids, want %d", got.len(), len(want))
	}
}

// An owned table takes sets, replacements and deletes in any mix, grows
// through them and drops its deletion marks when it grows, and answers
// as a plain map would.
func TestIDTableAnswersAsAMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(49, 50))
	m := newIDMap()
	want := map[string]int32{}
	var ids []string
	for step := range 20_000 {
		id := fmt.Sprintf("r%d", rng.IntN(3000))
		if rng.IntN(3) == 0 {
			_, live := want[id]
			if got := m.del(id, ids); got != live {
				t.Fatalf("step %d: del(%s) = %v, want %v", step, id, got, live)
			}
			delete(want, id)
			continue
		}
		ids = append(ids, id)
		m.set(id, int32(len(ids)-1), ids)
		want[id] = int32(len(ids) - 1)
		if 2*(m.tab.used+m.tab.marks) > len(m.tab.slots) {
			t.Fatalf("step %d: table of %d positions holds %d entries and %d marks", step, len(m.tab.slots), m.tab.used, m.tab.marks)
		}
	}
	checkIDMap(t, "end", &m, ids, want)
	if m.tab.used != len(want) {
		t.Fatalf("table holds %d entries, want %d", m.tab.used, len(want))
	}
}

func checkIDMap(t *testing.T, at string, m *idMap, ids []string, want map[string]int32) {
	t.Helper()
	if m.len() != len(want) {
		t.Fatalf("%s: %d live ids, want %d", at, m.len(), len(want))
	}
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] {
			continue
		}
		seen[id] = true
		n, ok := m.get(id, ids)
		if w, live := want[id]; ok != live || (ok && n != w) {
			t.Fatalf("%s: get(%s) = %d, %v; want %d, %v", at, id, n, ok, w, live)
		}
	}
	if _, ok := m.get("never", ids); ok {
		t.Fatalf("%s: an id never set is live", at)
	}
}

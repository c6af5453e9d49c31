package vindex

import (
	"hash/maphash"
	"maps"
)

// idMap maps each live id to its slot. The slots of the live ids are kept
// in an open-addressing hash table of slot numbers (idTable), which holds
// no pointer: the id of a slot is the graph's ids[slot], so at 1,000,000
// vectors the table is 8 MiB that the garbage collector never scans,
// where a map[string]int32 was about 60 MiB of string headers it scanned
// at every cycle.
//
// A successor shares its parent's table as a read-only base and keeps its
// own changes in an overlay map (a slot, or -1 for an id deleted), so that
// taking a successor copies no entry per vector. An overlay past a quarter
// of its base is folded into a new table when the next successor is
// taken, which keeps lookups to one map and one table and the copying in
// proportion to the changes. Every method that looks an id up takes the
// graph's ids (slot → id), which must hold every slot the map names.
type idMap struct {
	tab    *idTable         // the slots of the live ids (with own: of the base)
	shared bool             // tab is a parent's: read only, own holds the changes
	own    map[string]int32 // with shared: the changes over tab (slot, or -1 deleted)
	n      int              // live ids
}

func newIDMap() idMap { return idMap{tab: newIDTable(0)} }

// get returns id's live slot.
func (m *idMap) get(id string, ids []string) (int32, bool) {
	if m.shared {
		if n, ok := m.own[id]; ok {
			return n, n >= 0
		}
	}
	return m.tab.get(id, ids)
}

// set makes slot n id's live slot (ids[n] is id).
func (m *idMap) set(id string, n int32, ids []string) {
	if !m.shared {
		if m.tab.set(id, n, ids) {
			m.n++
		}
		return
	}
	if _, live := m.get(id, ids); !live {
		m.n++
	}
	m.own[id] = n
}

// del removes id and reports whether it was live.
func (m *idMap) del(id string, ids []string) bool {
	if !m.shared {
		if m.tab.del(id, ids) {
			m.n--
			return true
		}
		return false
	}
	if _, live := m.get(id, ids); !live {
		return false
	}
	m.n--
	if _, inBase := m.tab.get(id, ids); inBase {
		m.own[id] = -1
	} else {
		delete(m.own, id)
	}
	return true
}

func (m *idMap) len() int { return m.n }

// successor returns the map of a successor whose ids begin with ids. m
// must not change afterwards (its table may become the successor's base).
func (m *idMap) successor(ids []string) idMap {
	switch {
	case !m.shared:
		return idMap{tab: m.tab, shared: true, own: map[string]int32{}, n: m.n}
	case len(m.own) <= m.tab.used/4:
		return idMap{tab: m.tab, shared: true, own: maps.Clone(m.own), n: m.n}
	}
	flat := newIDTable(m.n)
	m.tab.each(func(n int32) {
		if _, changed := m.own[ids[n]]; !changed {
			flat.set(ids[n], n, ids)
		}
	})
	for id, n := range m.own {
		if n >= 0 {
			flat.set(id, n, ids)
		}
	}
	return idMap{tab: flat, n: m.n}
}

// idTable is a set of slots keyed by their ids (ids[slot]): linear probing
// over a power-of-two array, at most half full counting the marks of
// deleted entries, which a growth drops.
type idTable struct {
	seed  maphash.Seed
	slots []int32 // a slot number; tabEmpty; or tabDeleted
	used  int     // entries (slot numbers) held
	marks int     // tabDeleted entries
}

const (
	tabEmpty   int32 = -1
	tabDeleted int32 = -2
)

// newIDTable returns a table with room for n entries before it grows.
func newIDTable(n int) *idTable {
	size := 16
	for size < 2*n {
		size *= 2
	}
	t := &idTable{seed: maphash.MakeSeed(), slots: make([]int32, size)}
	for i := range t.slots {
		t.slots[i] = tabEmpty
	}
	return t
}

// find returns the position of id's entry, or -1 and the position where
// an insert of id goes (the first deleted mark on its probe, else the
// empty position that ended it).
func (t *idTable) find(id string, ids []string) (at, free int) {
	mask := uint64(len(t.slots) - 1)
	free = -1
	for i := maphash.String(t.seed, id) & mask; ; i = (i + 1) & mask {
		switch s := t.slots[i]; {
		case s == tabEmpty:
			if free < 0 {
				free = int(i)
			}
			return -1, free
		case s == tabDeleted:
			if free < 0 {
				free = int(i)
			}
		case ids[s] == id:
			return int(i), -1
		}
	}
}

func (t *idTable) get(id string, ids []string) (int32, bool) {
	at, _ := t.find(id, ids)
	if at < 0 {
		return 0, false
	}
	return t.slots[at], true
}

// set makes n id's slot and reports whether id was new to the table.
func (t *idTable) set(id string, n int32, ids []string) bool {
	at, free := t.find(id, ids)
	if at >= 0 {
		t.slots[at] = n
		return false
	}
	if t.slots[free] == tabDeleted {
		t.marks--
	}
	t.slots[free] = n
	t.used++
	if 2*(t.used+t.marks) > len(t.slots) {
		t.grow(ids)
	}
	return true
}

// del removes id's entry and reports whether there was one.
func (t *idTable) del(id string, ids []string) bool {
	at, _ := t.find(id, ids)
	if at < 0 {
		return false
	}
	t.slots[at] = tabDeleted
	t.used--
	t.marks++
	return true
}

// each calls fn with every slot the table holds.
func (t *idTable) each(fn func(n int32)) {
	for _, s := range t.slots {
		if s >= 0 {
			fn(s)
		}
	}
}

// grow rehashes the entries into a table with room for twice as many.
func (t *idTable) grow(ids []string) {
	g := newIDTable(2 * t.used)
	t.each(func(n int32) { g.set(ids[n], n, ids) })
	*t = *g
}

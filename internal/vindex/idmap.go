package vindex

import "maps"

// idMap maps each live id to its slot. A successor shares its parent's
// map as a read-only base and keeps its own changes in an overlay (a slot,
// or -1 for an id deleted), so that taking a successor copies no entry per
// vector: at 1M vectors the map is about 66 MiB, which a copy would keep
// live beside the base's for the whole incremental build. An overlay past
// a quarter of its base is folded into a new base when the next successor
// is taken, which keeps lookups to at most two maps and the copying in
// proportion to the changes.
type idMap struct {
	base map[string]int32 // shared, read only; nil: none
	own  map[string]int32 // with base: the changes over it (slot, or -1 deleted); else every live id
	n    int              // live ids
}

func newIDMap() idMap { return idMap{own: map[string]int32{}} }

// get returns id's live slot.
func (m *idMap) get(id string) (int32, bool) {
	if n, ok := m.own[id]; ok || m.base == nil {
		return n, ok && n >= 0
	}
	n, ok := m.base[id]
	return n, ok
}

// set makes slot n id's live slot.
func (m *idMap) set(id string, n int32) {
	if _, live := m.get(id); !live {
		m.n++
	}
	m.own[id] = n
}

// del removes id and reports whether it was live.
func (m *idMap) del(id string) bool {
	if _, live := m.get(id); !live {
		return false
	}
	m.n--
	if _, inBase := m.base[id]; inBase {
		m.own[id] = -1
	} else {
		delete(m.own, id)
	}
	return true
}

func (m *idMap) len() int { return m.n }

// successor returns the map of a successor. m must not change afterwards
// (its own map may become the successor's base).
func (m *idMap) successor() idMap {
	switch {
	case m.base == nil:
		return idMap{base: m.own, own: map[string]int32{}, n: m.n}
	case len(m.own) <= len(m.base)/4:
		return idMap{base: m.base, own: maps.Clone(m.own), n: m.n}
	}
	flat := make(map[string]int32, m.n)
	for id, n := range m.base {
		if _, changed := m.own[id]; !changed {
			flat[id] = n
		}
	}
	for id, n := range m.own {
		if n >= 0 {
			flat[id] = n
		}
	}
	return idMap{base: flat, own: map[string]int32{}, n: m.n}
}

package segment

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/compactorhq/compactor/internal/materialize"
)

// readOverlay reads the deltas of m (all, or those want accepts) and
// merges them, oldest first, so that the newest change of each id wins:
// the result is sorted by unique id; a change with a nil Record is a
// tombstone. cached reads the deltas through the decoded block cache (the
// read path's: the changes are then shared and must not be modified).
func (s *Store) readOverlay(ctx context.Context, deltas []DeltaRef, want func(DeltaRef) bool, cached bool) ([]Change, error) {
	read := s.ReadDelta
	if cached {
		read = s.readDeltaCached
	}
	var out []Change
	for _, d := range deltas {
		if want != nil && !want(d) {
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("read delta %s: %w", d.Key, err)
		}
		cs, err := read(ctx, d)
		if err != nil {
			return nil, err
		}
		out = mergeNewer(out, cs)
	}
	return out, nil
}

// coversAny returns a filter of the deltas whose id range holds one of ids.
func coversAny(ids []string) func(DeltaRef) bool {
	return func(d DeltaRef) bool {
		return slices.ContainsFunc(ids, func(id string) bool { return id >= d.MinID && id <= d.MaxID })
	}
}

// mergeNewer merges two lists of changes sorted by unique id into a new
// one; for an id in both, newer's change wins.
func mergeNewer(older, newer []Change) []Change {
	if len(older) == 0 {
		return newer
	}
	if len(newer) == 0 {
		return older
	}
	out := make([]Change, 0, len(older)+len(newer))
	i, j := 0, 0
	for i < len(older) && j < len(newer) {
		switch a, b := older[i].ID, newer[j].ID; {
		case a < b:
			out = append(out, older[i])
			i++
		case b < a:
			out = append(out, newer[j])
			j++
		default:
			out = append(out, newer[j])
			i++
			j++
		}
	}
	out = append(out, older[i:]...)
	return append(out, newer[j:]...)
}

// findChange returns the change of cs (sorted by unique id) for id.
func findChange(cs []Change, id string) (Change, bool) {
	i, ok := slices.BinarySearchFunc(cs, id, func(c Change, id string) int { return strings.Compare(c.ID, id) })
	if !ok {
		return Change{}, false
	}
	return cs[i], true
}

// overlayCursor walks the merged deltas of a scan alongside the blocks.
type overlayCursor struct{ ov []Change }

// upTo passes to fn the delta records with ids up to id (tombstones hide
// their id and pass nothing). It returns whether the deltas hold id itself
// (the block's record is overridden) and whether fn asked to stop.
func (c *overlayCursor) upTo(id string, fn func(materialize.Record) bool) (overridden, stop bool) {
	for len(c.ov) > 0 && c.ov[0].ID <= id {
		ch := c.ov[0]
		c.ov = c.ov[1:]
		overridden = ch.ID == id
		if ch.Record != nil && !fn(*ch.Record) {
			return overridden, true
		}
	}
	return overridden, false
}

// rest passes the delta records left to fn, until it returns false.
func (c *overlayCursor) rest(fn func(materialize.Record) bool) {
	for _, ch := range c.ov {
		if ch.Record != nil && !fn(*ch.Record) {
			return
		}
	}
	c.ov = nil
}

// scanOverlay returns a cursor over the deltas of m with ids after after.
func (s *Store) scanOverlay(ctx context.Context, m *Manifest, after string, cached bool) (*overlayCursor, error) {
	ov, err := s.readOverlay(ctx, m.Deltas, func(d DeltaRef) bool { return d.MaxID > after }, cached)
	if err != nil {
		return nil, err
	}
	j := sort.Search(len(ov), func(j int) bool { return ov[j].ID > after })
	return &overlayCursor{ov: ov[j:]}, nil
}

// deltaOverlay returns the base's deltas merged (readOverlay), reading them
// once per Writer.
func (w *Writer) deltaOverlay(ctx context.Context) ([]Change, error) {
	if w.base == nil || len(w.base.Deltas) == 0 {
		return nil, nil
	}
	if w.overlay == nil {
		ov, err := w.s.readOverlay(ctx, w.base.Deltas, nil, false)
		if err != nil {
			return nil, err
		}
		w.overlay = &ov
	}
	return *w.overlay, nil
}

// overlayGet applies the base's deltas to out, the base blocks' records of
// ids (Writer.Get).
func (w *Writer) overlayGet(ctx context.Context, ids []string, out map[string]materialize.Record) error {
	ov, err := w.deltaOverlay(ctx)
	if err != nil {
		return err
	}
	for _, id := range ids {
		if c, ok := findChange(ov, id); ok {
			if c.Record == nil {
				delete(out, id)
			} else {
				out[id] = c.Record.Clone()
			}
		}
	}
	return nil
}

// foldDeltaStream merges the base's delta rows (overlay: sorted by unique
// id, a nil Record a tombstone) under the changes next pulls, for a write
// that folds the deltas into the blocks it rewrites: an id only in overlay
// becomes a change to its delta value; a change whose id the overlay holds
// applies over the delta value (a Change with Ops is folded onto it here,
// Change.valueOver, since the block's record is older), and a Change with
// a Record replaces it. An error of next ends the stream.
func foldDeltaStream(overlay []Change, next func() (Change, error, bool)) func() (Change, error, bool) {
	i := 0
	var held Change
	holding, ended := false, false
	return func() (Change, error, bool) {
		if !holding && !ended {
			c, err, ok := next()
			switch {
			case !ok:
				ended = true
			case err != nil:
				ended, i = true, len(overlay)
				return Change{}, err, true
			default:
				held, holding = c, true
			}
		}
		if i < len(overlay) && (!holding || overlay[i].ID < held.ID) {
			i++
			c := overlay[i-1]
			c.folded, c.was = true, c.Record
			return c, nil, true
		}
		if !holding {
			return Change{}, nil, false
		}
		c := held
		held, holding = Change{}, false
		if i < len(overlay) && overlay[i].ID == c.ID {
			was := overlay[i].Record
			if c.Ops != nil {
				c = Change{ID: c.ID, Record: c.valueOver(was)}
			}
			c.folded, c.was = true, was
			i++
		}
		return c, nil, true
	}
}

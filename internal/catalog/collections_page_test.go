package catalog_test

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/materialize"
)

// TestListCollectionsSortedPagesEveryOrderBothWays pages 23 collections
// (names in mixed case and scripts, backlogs with ties) forwards with
// After and backwards with Before, in every order and direction, and
// compares each walk with the order computed here.
func TestListCollectionsSortedPagesEveryOrderBothWays(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		c := e.open(t)
		var all []catalog.Collection
		for i := range 23 {
			name := []string{"a", "B", "é", "z"}[i%4] + fmt.Sprintf("%02d", i)
			col := mustCreate(t, c, name, 2)
			if n := i % 5; n > 0 { // backlogs 0..4, with ties
				if _, _, err := c.AppendLog(ctx, col.ID, adds(name, n, 2), catalog.AppendLimits{}); err != nil {
					t.Fatal(err)
				}
			}
			all = append(all, col)
		}
		// Read back: the figures as the catalog holds them.
		all, err := c.ListCollections(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, sort := range []catalog.CollectionSort{catalog.SortByName, catalog.SortByBacklog, catalog.SortByRecords, catalog.SortByLastCompacted} {
			for _, desc := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s desc=%v", sort, desc), func(t *testing.T) {
					want := slices.Clone(all)
					slices.SortFunc(want, func(a, b catalog.Collection) int {
						x, y := catalog.CursorOf(a, sort), catalog.CursorOf(b, sort)
						if sort == catalog.SortByName {
							if desc {
								return strings.Compare(y.Name, x.Name)
							}
							return strings.Compare(x.Name, y.Name)
						}
						v := cmp.Compare(x.Value, y.Value)
						if desc {
							v = -v
						}
						return cmp.Or(v, strings.Compare(x.Name, y.Name))
					})
					wantNames := names(want)
					// Forwards.
					var got []string
					q := catalog.CollectionPageQuery{Sort: sort, Desc: desc, Limit: 5}
					for {
						p, err := c.ListCollectionsSorted(ctx, q)
						if err != nil {
							t.Fatal(err)
						}
						got = append(got, names(p.Collections)...)
						if !p.More {
							break
						}
						cur := catalog.CursorOf(p.Collections[len(p.Collections)-1], sort)
						q.After = &cur
					}
					if !slices.Equal(got, wantNames) {
						t.Fatalf("forwards:\n got %s\nwant %s", strings.Join(got, " "), strings.Join(wantNames, " "))
					}
					// Backwards, from after the last one.
					got = nil
					last := catalog.CursorOf(want[len(want)-1], sort)
					// A position past the end: the last one's figure with
					// a later name; by name descending, "" (before every
					// name, so after every one in that order).
					past := catalog.CollectionCursor{Value: last.Value, Name: last.Name + "~"}
					if sort == catalog.SortByName && desc {
						past.Name = ""
					}
					q = catalog.CollectionPageQuery{Sort: sort, Desc: desc, Limit: 5, Before: &past}
					for {
						p, err := c.ListCollectionsSorted(ctx, q)
						if err != nil {
							t.Fatal(err)
						}
						got = append(names(p.Collections), got...)
						if !p.More {
							break
						}
						cur := catalog.CursorOf(p.Collections[0], sort)
						q.Before = &cur
					}
					if !slices.Equal(got, wantNames) {
						t.Fatalf("backwards:\n got %s\nwant %s", strings.Join(got, " "), strings.Join(wantNames, " "))
					}
				})
			}
		}
		if _, err := c.ListCollectionsSorted(ctx, catalog.CollectionPageQuery{Sort: "bogus", Limit: 5}); !errors.Is(err, catalog.ErrInvalidArgument) {
			t.Fatalf("unknown order: %v", err)
		}
		if _, err := c.ListCollectionsSorted(ctx, catalog.CollectionPageQuery{Limit: 0}); !errors.Is(err, catalog.ErrInvalidArgument) {
			t.Fatalf("limit 0: %v", err)
		}
		cur := catalog.CollectionCursor{Name: "a"}
		if _, err := c.ListCollectionsSorted(ctx, catalog.CollectionPageQuery{Limit: 5, After: &cur, Before: &cur}); !errors.Is(err, catalog.ErrInvalidArgument) {
			t.Fatalf("both cursors: %v", err)
		}
		n, err := c.CountCollections(ctx)
		if err != nil || n != 23 {
			t.Fatalf("CountCollections: %d, %v; want 23", n, err)
		}
	})
}

func names(cs []catalog.Collection) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Name
	}
	return out
}

// TestSummarizeCollectionsCountsAndListsTheNotableOnes checks the counts
// and that only dead-lettered collections and those with an objective are
// listed.
func TestSummarizeCollectionsCountsAndListsTheNotableOnes(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		c := e.open(t)
		var ids []string
		for i := range 6 {
			col := mustCreate(t, c, fmt.Sprintf("c%d", i), 2)
			if i > 0 {
				if _, _, err := c.AppendLog(ctx, col.ID, adds("r", i, 2), catalog.AppendLimits{}); err != nil {
					t.Fatal(err)
				}
			}
			ids = append(ids, col.ID)
		}
		backlog := int64(0 + 1 + 2 + 3 + 4 + 5)
		for range 5 {
			if _, _, err := c.RecordFailure(ctx, ids[1], 5); err != nil {
				t.Fatal(err)
			}
		}
		age := time.Minute
		if _, err := c.UpdateCollectionPolicy(ctx, ids[3], catalog.PolicyUpdate{ObjectiveMaxAge: &age}); err != nil {
			t.Fatal(err)
		}
		s, err := c.SummarizeCollections(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if s.Count != 6 || s.Backlog != backlog {
			t.Fatalf("count %d backlog %d; want 6 and %d", s.Count, s.Backlog, backlog)
		}
		if got := names(s.Notable); !slices.Equal(got, []string{"c1", "c3"}) {
			t.Fatalf("notable %v; want the dead-lettered c1 and c3 with an objective", got)
		}
	})
}

// TestPreparedReadsSeeLaterWrites reads a collection, a page and a job
// through the kept statements, writes, and reads again: every read after
// a commit sees it (a kept statement holds no read snapshot).
func TestPreparedReadsSeeLaterWrites(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		c := e.open(t)
		col := mustCreate(t, c, "seen", 2)
		for i := range 3 {
			got, err := c.GetCollection(ctx, col.ID)
			if err != nil {
				t.Fatal(err)
			}
			page, err := c.ListCollectionsPage(ctx, "", 10)
			if err != nil {
				t.Fatal(err)
			}
			if got.LogPosition != int64(i) || page[0].LogPosition != int64(i) {
				t.Fatalf("after %d appends: GetCollection log position %d, ListCollectionsPage %d", i, got.LogPosition, page[0].LogPosition)
			}
			if _, _, err := c.AppendLog(ctx, col.ID, []materialize.OperationRecord{{Op: materialize.OpAdd, ID: fmt.Sprint(i), Embedding: []float32{1, 2}}}, catalog.AppendLimits{}); err != nil {
				t.Fatal(err)
			}
		}
	})
}

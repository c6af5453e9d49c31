package manager

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/compactorhq/compactor/internal/catalog"
)

func TestConcurrentCompactCallsShareOneWriteEachAllOrNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newMemStore()
		for _, id := range []string{"a", "b", "c", "d", "e", "f"} {
			store.addCollection(id, 1, time.Now())
		}
		m, err := New(store, newFakeExec(store, 100), testConfig(), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		store.insertGate = make(chan struct{})
		type result struct {
			out []Enqueued
			err error
		}
		call := func(ctx context.Context, ids ...string) chan result {
			ch := make(chan result, 1)
			go func() {
				out, err := m.Compact(ctx, ids, false, "group")
				ch <- result{out, err}
			}()
			return ch
		}
		first := call(t.Context(), "a")
		synctest.Wait() // the first call leads, held in the catalog write
		b, c := call(t.Context(), "b"), call(t.Context(), "c", "b")
		unknown := call(t.Context(), "x", "d", "y")
		gone, cancel := context.WithCancel(t.Context())
		abandoned := call(gone, "f")
		e := call(t.Context(), "e")
		synctest.Wait()
		cancel()
		if r := <-abandoned; !errors.Is(r.err, context.Canceled) {
			t.Fatalf("a call whose context ended while it waited: %+v, want context.Canceled", r)
		}
		close(store.insertGate)

		if r := <-first; r.err != nil || len(r.out) != 1 || !r.out[0].Created {
			t.Fatalf("first call: %+v", r)
		}
		rb, rc := <-b, <-c
		if rb.err != nil || rc.err != nil || len(rc.out) != 2 || rc.out[1].Job.ID != rb.out[0].Job.ID {
			t.Fatalf("b and (c, b): %+v, %+v; want c's request for b to return b's job", rb, rc)
		}
		var nf *NotFoundError
		if r := <-unknown; !errors.As(r.err, &nf) || !slices.Equal(nf.IDs, []string{"x", "y"}) {
			t.Fatalf("(x, d, y): %+v, want NotFoundError naming x and y", r)
		}
		if r := <-e; r.err != nil || len(r.out) != 1 {
			t.Fatalf("e: %+v", r)
		}
		if !slices.Equal(store.batches, []int{1, 4}) {
			t.Fatalf("writes of %v calls, want [1 4]: the calls that waited behind the first share one", store.batches)
		}
		for id, want := range map[string]int{"a": 1, "b": 1, "c": 1, "d": 0, "e": 1, "f": 0} {
			if n := len(store.jobsOf(id)); n != want {
				t.Errorf("collection %s has %d jobs, want %d", id, n, want)
			}
		}
		if j := store.jobsOf("a"); len(j) == 1 && j[0].Trigger != catalog.TriggerOneOff {
			t.Errorf("trigger %s", j[0].Trigger)
		}
	})
}

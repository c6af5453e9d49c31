package catalog_test

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/catalog/catalogtest"
	"github.com/compactorhq/compactor/internal/materialize"
)

func TestAppendLogKeyedRetryReturnsTheOriginalOffsetsAndWritesNothing(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		c := e.open(t)
		col := mustCreate(t, c, "keyed", 4)
		mustAppend(t, c, col.ID, adds("before", 2, 4))
		lim := catalog.AppendLimits{KeyWindow: time.Hour}
		batch := adds("k", 3, 4)
		first, last, replayed, err := c.AppendLogKeyed(ctx, col.ID, "run-1/batch-1", batch, lim)
		if err != nil || replayed || first != 3 || last != 5 {
			t.Fatalf("first push: offsets %d..%d replayed %v err %v; want 3..5, false, nil", first, last, replayed, err)
		}
		mustAppend(t, c, col.ID, adds("after", 1, 4)) // offset 6
		// The retry is answered from the key, even with the backlog now at
		// a limit that would refuse the batch.
		tight := catalog.AppendLimits{KeyWindow: time.Hour, MaxBacklog: 6}
		for range 2 {
			f, l, r, err := c.AppendLogKeyed(ctx, col.ID, "run-1/batch-1", adds("k", 3, 4), tight)
			if err != nil || !r || f != 3 || l != 5 {
				t.Fatalf("retry: offsets %d..%d replayed %v err %v; want 3..5, true, nil", f, l, r, err)
			}
		}
		if got := mustGet(t, c, col.ID); got.LogPosition != 6 {
			t.Fatalf("log position after retries %d, want 6 (nothing written)", got.LogPosition)
		}
		if n := len(mustReadLog(t, c, col.ID, 0, math.MaxInt64, 0)); n != 6 {
			t.Fatalf("%d log rows, want 6", n)
		}
		// Keys are per collection: the same key elsewhere is a new batch.
		other := mustCreate(t, c, "other", 4)
		if f, l, r, err := c.AppendLogKeyed(ctx, other.ID, "run-1/batch-1", batch, lim); err != nil || r || f != 1 || l != 3 {
			t.Fatalf("same key, other collection: %d..%d replayed %v err %v; want 1..3, false, nil", f, l, r, err)
		}
	})
}

func TestAppendLogKeyedRefusesAKeyReusedForADifferentBatch(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		c := e.open(t)
		col := mustCreate(t, c, "reuse", 4)
		lim := catalog.AppendLimits{KeyWindow: time.Hour}
		if _, _, _, err := c.AppendLogKeyed(ctx, col.ID, "k1", adds("a", 2, 4), lim); err != nil {
			t.Fatal(err)
		}
		changed := adds("a", 2, 4)
		changed[1].Metadata["n"] = float64(42)
		for what, ops := range map[string][]materialize.OperationRecord{"one value changed": changed, "one record more": adds("a", 3, 4)} {
			_, _, _, err := c.AppendLogKeyed(ctx, col.ID, "k1", ops, lim)
			var reuse *catalog.KeyReuseError
			if !errors.As(err, &reuse) || !errors.Is(err, catalog.ErrInvalidArgument) {
				t.Fatalf("%s: error %v, want a *KeyReuseError matching ErrInvalidArgument", what, err)
			}
			if reuse.Key != "k1" || reuse.FirstOffset != 1 || reuse.LastOffset != 2 || !strings.Contains(err.Error(), `"k1"`) {
				t.Fatalf("%s: %+v (%v); want key k1 at offsets 1..2, named in the message", what, reuse, err)
			}
		}
		if got := mustGet(t, c, col.ID); got.LogPosition != 2 {
			t.Fatalf("log position %d, want 2", got.LogPosition)
		}
	})
}

func TestAppendLogKeyedForgetsKeysAfterTheWindow(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		c := e.open(t)
		col := mustCreate(t, c, "window", 4)
		lim := catalog.AppendLimits{KeyWindow: time.Hour}
		batch := adds("w", 2, 4)
		if _, _, _, err := c.AppendLogKeyed(ctx, col.ID, "old", batch, lim); err != nil {
			t.Fatal(err)
		}
		e.clock.Advance(59 * time.Minute)
		if _, _, r, err := c.AppendLogKeyed(ctx, col.ID, "old", batch, lim); err != nil || !r {
			t.Fatalf("within the window: replayed %v err %v, want a replay", r, err)
		}
		e.clock.Advance(2 * time.Minute)
		// Past the window the key is forgotten: the batch is appended again,
		// and even a different batch may take the key.
		f, l, r, err := c.AppendLogKeyed(ctx, col.ID, "old", adds("x", 1, 4), lim)
		if err != nil || r || f != 3 || l != 3 {
			t.Fatalf("after the window: %d..%d replayed %v err %v; want 3..3, a new append", f, l, r, err)
		}
	})
}

func TestAppendLogKeyedConcurrentRetriesAppendOnce(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		c := e.open(t)
		col := mustCreate(t, c, "race", 4)
		lim := catalog.AppendLimits{KeyWindow: time.Hour}
		const tries = 8
		var wg sync.WaitGroup
		type result struct {
			first, last int64
			replayed    bool
			err         error
		}
		results := make([]result, tries)
		for i := range tries {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var r result
				r.first, r.last, r.replayed, r.err = c.AppendLogKeyed(ctx, col.ID, "same", adds("r", 5, 4), lim)
				results[i] = r
			}()
		}
		wg.Wait()
		fresh := 0
		for i, r := range results {
			if r.err != nil || r.first != 1 || r.last != 5 {
				t.Fatalf("try %d: %d..%d err %v; want 1..5", i, r.first, r.last, r.err)
			}
			if !r.replayed {
				fresh++
			}
		}
		if fresh != 1 {
			t.Fatalf("%d tries appended, want exactly 1", fresh)
		}
		if got := mustGet(t, c, col.ID); got.LogPosition != 5 {
			t.Fatalf("log position %d, want 5", got.LogPosition)
		}
	})
}

func TestAppendLogKeyedRejectsBadKeys(t *testing.T) {
	c := catalogtest.Open(t)
	col := mustCreate(t, c, "bad-keys", 4)
	for _, key := range []string{strings.Repeat("k", catalog.MaxPushKeyBytes+1), "a\nb", "\xff", "x\u202ey"} {
		_, _, _, err := c.AppendLogKeyed(ctx, col.ID, key, adds("b", 1, 4), catalog.AppendLimits{})
		wantErr(t, fmt.Sprintf("key %q", key), err, catalog.ErrInvalidArgument)
	}
	if _, _, _, err := c.AppendLogKeyed(ctx, col.ID, "ok", adds("b", 1, 4), catalog.AppendLimits{KeyWindow: -time.Second}); !errors.Is(err, catalog.ErrInvalidArgument) {
		t.Fatalf("negative window: %v, want ErrInvalidArgument", err)
	}
	if got := mustGet(t, c, col.ID); got.LogPosition != 0 {
		t.Fatalf("log position %d, want 0", got.LogPosition)
	}
}

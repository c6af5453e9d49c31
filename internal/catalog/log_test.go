package catalog_test

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/materialize"
)

func TestAppendLogAssignsDenseOffsetsAcrossBatches(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		c := e.open(t)
		col := mustCreate(t, c, "dense", 8)
		other := mustCreate(t, c, "other", 8)
		var want []materialize.OperationRecord
		next := int64(1)
		for i, n := range []int{1, 3, 700, 1, 129} {
			ops := adds(fmt.Sprintf("b%d", i), n, 8)
			first, last := mustAppend(t, c, col.ID, ops)
			if first != next || last != next+int64(n)-1 {
				t.Fatalf("batch %d of %d: offsets %d..%d, want %d..%d", i, n, first, last, next, next+int64(n)-1)
			}
			for j := range ops {
				ops[j].Offset = next + int64(j)
			}
			want = append(want, ops...)
			next += int64(n)
			// Another collection's offsets are its own.
			if f, l := mustAppend(t, c, other.ID, adds("o", 1, 8)); f != int64(i+1) || l != f {
				t.Fatalf("other collection: offsets %d..%d, want %d", f, l, i+1)
			}
		}
		if got := mustGet(t, c, col.ID); got.LogPosition != next-1 || got.Backlog() != next-1 {
			t.Fatalf("log position %d, backlog %d; want %d", got.LogPosition, got.Backlog(), next-1)
		}
		equal(t, "log", mustReadLog(t, c, col.ID, 0, math.MaxInt64, 0), want)
	})
}

func TestAppendLogConcurrentAppendersGetDenseOffsets(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		c := e.open(t)
		col := mustCreate(t, c, "busy", 2)
		const writers, batches = 8, 50
		type batch struct {
			first, last int64
			ids         []string
		}
		got := make([][]batch, writers)
		var wg sync.WaitGroup
		for w := range writers {
			wg.Go(func() {
				for b := range batches {
					ops := adds(fmt.Sprintf("w%d-b%d", w, b), 1+(w+b)%4, 2)
					first, last, err := c.AppendLog(ctx, col.ID, ops, catalog.AppendLimits{})
					if err != nil {
						t.Errorf("writer %d batch %d: %v", w, b, err)
						return
					}
					s := batch{first: first, last: last}
					for _, op := range ops {
						s.ids = append(s.ids, op.ID)
					}
					got[w] = append(got[w], s)
				}
			})
		}
		wg.Wait()
		if t.Failed() {
			return
		}
		var all []batch
		for w := range got {
			for i := 1; i < len(got[w]); i++ {
				if got[w][i].first <= got[w][i-1].last {
					t.Fatalf("writer %d: batch %d at %d does not follow its previous batch ending at %d", w, i, got[w][i].first, got[w][i-1].last)
				}
			}
			all = append(all, got[w]...)
		}
		slices.SortFunc(all, func(a, b batch) int { return int(a.first - b.first) })
		want := map[int64]string{}
		next := int64(1)
		for _, s := range all {
			if s.first != next || s.last-s.first+1 != int64(len(s.ids)) {
				t.Fatalf("batch at %d..%d (%d records): want it to start at %d with no gap or overlap", s.first, s.last, len(s.ids), next)
			}
			for i, id := range s.ids {
				want[s.first+int64(i)] = id
			}
			next = s.last + 1
		}
		ops := mustReadLog(t, c, col.ID, 0, math.MaxInt64, 0)
		equal(t, "offsets", offsets(ops), span(1, next-1))
		for _, op := range ops {
			if want[op.Offset] != op.ID {
				t.Fatalf("offset %d holds %q, the batch given that offset wrote %q", op.Offset, op.ID, want[op.Offset])
			}
		}
		if got := mustGet(t, c, col.ID).LogPosition; got != next-1 {
			t.Fatalf("log position %d, want %d", got, next-1)
		}
	})
}

func TestAppendLogRejectsInvalidBatches(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		c := e.open(t)
		col := mustCreate(t, c, "strict", 4)
		mustAppend(t, c, col.ID, adds("seed", 2, 4))
		before := mustGet(t, c, col.ID)

		good := adds("ok", 3, 4)
		with := func(i int, f func(*materialize.OperationRecord)) []materialize.OperationRecord {
			ops := adds("ok", 3, 4)
			f(&ops[i])
			return ops
		}
		tests := []struct {
			name  string
			id    string
			ops   []materialize.OperationRecord
			lim   catalog.AppendLimits
			want  error
			index int    // of the *InvalidRecordError
			field string // of the *InvalidRecordError
		}{
			{name: "an empty batch", ops: []materialize.OperationRecord{}, want: catalog.ErrInvalidArgument},
			{name: "a nil batch", ops: nil, want: catalog.ErrInvalidArgument},
			{name: "an unknown collection", id: uuid.NewString(), ops: good, want: catalog.ErrNotFound},
			{name: "a negative backlog limit", ops: good, lim: catalog.AppendLimits{MaxBacklog: -1}, want: catalog.ErrInvalidArgument},
			{name: "an ADD without embedding", ops: with(1, func(o *materialize.OperationRecord) { o.Embedding = nil }),
				want: materialize.ErrInvalidRecord, index: 1, field: "embedding"},
			{name: "an embedding of the wrong dimension", ops: with(2, func(o *materialize.OperationRecord) { o.Embedding = embedding(1, 3) }),
				want: materialize.ErrInvalidRecord, index: 2, field: "embedding"},
			{name: "a NaN in an embedding", ops: with(0, func(o *materialize.OperationRecord) { o.Embedding[2] = float32(math.NaN()) }),
				want: materialize.ErrInvalidRecord, index: 0, field: "embedding"},
			{name: "an empty id after valid records", ops: with(2, func(o *materialize.OperationRecord) { o.ID = "" }),
				want: materialize.ErrInvalidRecord, index: 2, field: "id"},
			{name: "a nested metadata value", ops: with(1, func(o *materialize.OperationRecord) { o.Metadata = materialize.Metadata{"k": map[string]any{}} }),
				want: materialize.ErrInvalidRecord, index: 1, field: "metadata.k"},
			{name: "an unknown op", ops: with(0, func(o *materialize.OperationRecord) { o.Op = 9 }),
				want: materialize.ErrInvalidRecord, index: 0, field: "op"},
			{name: "an id over the configured limit", ops: good, lim: catalog.AppendLimits{Record: materialize.Limits{MaxIDBytes: 3}},
				want: materialize.ErrInvalidRecord, index: 0, field: "id"},
			{name: "a record limit's dimension is ignored", ops: good, lim: catalog.AppendLimits{Record: materialize.Limits{Dimension: 2}}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				id := cmpOr(tt.id, col.ID)
				e.clock.Advance(time.Second)
				_, _, err := c.AppendLog(ctx, id, tt.ops, tt.lim)
				wantErr(t, "AppendLog", err, tt.want)
				if tt.want == nil { // the last case
					if got := mustGet(t, c, col.ID).LogPosition; got != before.LogPosition+int64(len(tt.ops)) {
						t.Fatalf("log position %d, want %d", got, before.LogPosition+int64(len(tt.ops)))
					}
					return
				}
				if tt.field != "" {
					ire, ok := err.(*materialize.InvalidRecordError)
					if !ok {
						t.Fatalf("error %T %v, want an unwrapped *materialize.InvalidRecordError", err, err)
					}
					if ire.Index != tt.index || ire.Field != tt.field {
						t.Fatalf("InvalidRecordError index %d field %q, want %d %q", ire.Index, ire.Field, tt.index, tt.field)
					}
				} else if tt.id != "" && !errors.Is(err, catalog.ErrNotFound) {
					t.Fatal(err)
				}
				if got := mustGet(t, c, col.ID); got.LogPosition != before.LogPosition || !got.UpdatedAt.Equal(before.UpdatedAt) {
					t.Fatalf("collection changed: log position %d (was %d), updated %v (was %v)", got.LogPosition, before.LogPosition, got.UpdatedAt, before.UpdatedAt)
				}
				if got := mustReadLog(t, c, col.ID, 0, math.MaxInt64, 0); len(got) != int(before.LogPosition) {
					t.Fatalf("log has %d rows, want %d", len(got), before.LogPosition)
				}
			})
		}
	})
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func TestAppendLogFixesDimensionOnFirstEmbedding(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		c := e.open(t)
		col := mustCreate(t, c, "unset", 0)
		noEmbedding := []materialize.OperationRecord{
			{Op: materialize.OpDelete, ID: "gone"},
			{Op: materialize.OpUpdate, ID: "meta", Metadata: materialize.Metadata{"k": "v"}},
		}
		mixed := append(adds("three", 1, 3), adds("four", 1, 4)...)
		steps := []struct {
			name    string
			ops     []materialize.OperationRecord
			wantErr bool
			wantDim int
		}{
			{"records without embeddings leave it unset", noEmbedding, false, 0},
			{"a batch with two dimensions is rejected whole", mixed, true, 0},
			{"the first embedding fixes it", adds("a", 2, 3), false, 3},
			{"another dimension is rejected", adds("b", 1, 4), true, 3},
			{"the fixed dimension is accepted", adds("c", 1, 3), false, 3},
		}
		for _, s := range steps {
			_, _, err := c.AppendLog(ctx, col.ID, s.ops, catalog.AppendLimits{})
			if (err != nil) != s.wantErr {
				t.Fatalf("%s: error %v, want error: %v", s.name, err, s.wantErr)
			}
			if err != nil && !errors.Is(err, materialize.ErrInvalidRecord) {
				t.Fatalf("%s: error %v, want an invalid record", s.name, err)
			}
			if got := mustGet(t, c, col.ID).Dimension; got != s.wantDim {
				t.Fatalf("%s: dimension %d, want %d", s.name, got, s.wantDim)
			}
		}
		if got := mustGet(t, c, col.ID).LogPosition; got != 5 {
			t.Fatalf("log position %d, want 5 (2+2+1 accepted records)", got)
		}
		fixed := mustCreate(t, c, "fixed", 5)
		if _, _, err := c.AppendLog(ctx, fixed.ID, adds("x", 1, 3), catalog.AppendLimits{}); !errors.Is(err, materialize.ErrInvalidRecord) {
			t.Fatalf("dimension 3 into a collection created with 5: error %v, want an invalid record", err)
		}
	})
}

func TestAppendLogBackpressure(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		c := e.open(t)
		col := mustCreate(t, c, "bounded", 2)
		lim := catalog.AppendLimits{MaxBacklog: 10}
		steps := []struct {
			name       string
			n          int
			commitTo   int64 // commit a compaction up to this offset first
			want       *catalog.BackpressureError
			wantLogPos int64
		}{
			{name: "below the limit", n: 8, wantLogPos: 8},
			{name: "a batch that would pass the limit", n: 3, want: &catalog.BackpressureError{CollectionID: col.ID, Backlog: 8, Incoming: 3, Limit: 10}, wantLogPos: 8},
			{name: "up to the limit exactly", n: 2, wantLogPos: 10},
			{name: "one more at the limit", n: 1, want: &catalog.BackpressureError{CollectionID: col.ID, Backlog: 10, Incoming: 1, Limit: 10}, wantLogPos: 10},
			{name: "room made by a compaction", n: 6, commitTo: 6, wantLogPos: 16},
			{name: "full again", n: 1, want: &catalog.BackpressureError{CollectionID: col.ID, Backlog: 10, Incoming: 1, Limit: 10}, wantLogPos: 16},
		}
		version := int64(0)
		for _, s := range steps {
			if s.commitTo > 0 {
				if err := c.CommitCompaction(ctx, catalog.Commit{CollectionID: col.ID, BaseVersion: version, NewVersion: version + 1, ManifestKey: "m", CompactionOffset: s.commitTo}); err != nil {
					t.Fatal(err)
				}
				version++
			}
			_, _, err := c.AppendLog(ctx, col.ID, adds(s.name, s.n, 2), lim)
			if s.want == nil && err != nil {
				t.Fatalf("%s: %v", s.name, err)
			}
			if s.want != nil {
				var bp *catalog.BackpressureError
				if !errors.As(err, &bp) || !errors.Is(err, catalog.ErrBackpressure) {
					t.Fatalf("%s: error %v, want *BackpressureError", s.name, err)
				}
				equal(t, s.name, bp, s.want)
			}
			if got := mustGet(t, c, col.ID).LogPosition; got != s.wantLogPos {
				t.Fatalf("%s: log position %d, want %d", s.name, got, s.wantLogPos)
			}
		}
		if _, _, err := c.AppendLog(ctx, col.ID, adds("unbounded", 20, 2), catalog.AppendLimits{}); err != nil {
			t.Fatalf("no limit: %v", err)
		}
	})
}

func TestReadLogRangesAndLimits(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		c := e.open(t)
		col := mustCreate(t, c, "ranges", 3)
		ops := []materialize.OperationRecord{
			{Op: materialize.OpAdd, ID: "a", Embedding: []float32{0.1, -2.5e-7, 3.4028235e38}, Document: strp("héllo \"world\"\n")},
			{Op: materialize.OpUpdate, ID: "a", Metadata: materialize.Metadata{"gone": nil, "s": "x", "f": 1.5, "b": false}},
			{Op: materialize.OpUpsert, ID: "b", Embedding: []float32{1, 2, 3}, Document: strp("")},
			{Op: materialize.OpDelete, ID: "a"},
		}
		ops = append(ops, adds("more", 6, 3)...)
		mustAppend(t, c, col.ID, ops)
		for i := range ops {
			ops[i].Offset = int64(i + 1)
		}
		equal(t, "records round-trip", mustReadLog(t, c, col.ID, 0, 10, 0), ops)

		tests := []struct {
			name        string
			after, upTo int64
			limit       int
			want        []int64
		}{
			{"everything", 0, 10, 0, span(1, 10)},
			{"an open upper bound", 0, math.MaxInt64, 0, span(1, 10)},
			{"a middle range", 3, 7, 0, span(4, 7)},
			{"a limit", 3, 7, 2, span(4, 5)},
			{"a limit larger than the range", 8, 10, 5, span(9, 10)},
			{"a negative limit is no limit", 0, 10, -1, span(1, 10)},
			{"past the end", 10, 20, 0, span(1, 0)},
			{"an empty range", 5, 5, 0, span(1, 0)},
			{"a reversed range", 7, 3, 0, span(1, 0)},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				equal(t, "offsets", offsets(mustReadLog(t, c, col.ID, tt.after, tt.upTo, tt.limit)), tt.want)
			})
		}

		if err := c.CommitCompaction(ctx, catalog.Commit{CollectionID: col.ID, BaseVersion: 0, NewVersion: 1, ManifestKey: "m", CompactionOffset: 4}); err != nil {
			t.Fatal(err)
		}
		equal(t, "offsets after compaction to 4", offsets(mustReadLog(t, c, col.ID, 0, 10, 0)), span(5, 10))
		// ScanKeptLog still visits the compacted rows stored, until a purge.
		var kept []int64
		if _, err := c.ScanKeptLog(ctx, col.ID, 1, 6, 0, func(off int64, _ []byte) error { kept = append(kept, off); return nil }); err != nil {
			t.Fatal(err)
		}
		equal(t, "kept offsets after compaction to 4", kept, span(2, 6))
		if _, err := c.PurgeLog(ctx, col.ID); err != nil {
			t.Fatal(err)
		}
		kept = nil
		if _, err := c.ScanKeptLog(ctx, col.ID, 0, 6, 0, func(off int64, _ []byte) error { kept = append(kept, off); return nil }); err != nil {
			t.Fatal(err)
		}
		equal(t, "kept offsets after the purge", kept, span(5, 6))
		_, err := c.ReadLog(ctx, uuid.NewString(), 0, 10, 0)
		wantErr(t, "ReadLog of an unknown collection", err, catalog.ErrNotFound)
	})
}

func TestReadViewReturnsCollectionAndTail(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		c := e.open(t)
		col := mustCreate(t, c, "view", 2)
		var times []time.Time
		for i := range 3 {
			times = append(times, ms(e.clock.Advance(time.Minute)))
			mustAppend(t, c, col.ID, adds(fmt.Sprintf("b%d", i), 3, 2))
		}
		check := func(what string, wantOffsets []int64, wantOldest time.Time) {
			t.Helper()
			got, tail, err := c.ReadView(ctx, col.ID)
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			equal(t, what+": tail", offsets(tail), wantOffsets)
			equal(t, what+": collection", got, mustGet(t, c, col.ID))
			if !got.OldestUncompactedAt.Equal(wantOldest) {
				t.Fatalf("%s: oldest uncompacted at %v, want %v", what, got.OldestUncompactedAt, wantOldest)
			}
			cols, err := c.ListCollections(ctx)
			if err != nil {
				t.Fatal(err)
			}
			equal(t, what+": listed", cols[0], got)
		}
		check("before compaction", span(1, 9), times[0])
		if err := c.CommitCompaction(ctx, catalog.Commit{CollectionID: col.ID, BaseVersion: 0, NewVersion: 1, ManifestKey: "m1", CompactionOffset: 3}); err != nil {
			t.Fatal(err)
		}
		check("after compaction to 3", span(4, 9), times[1])
		if err := c.CommitCompaction(ctx, catalog.Commit{CollectionID: col.ID, BaseVersion: 1, NewVersion: 2, ManifestKey: "m2", CompactionOffset: 5}); err != nil {
			t.Fatal(err)
		}
		check("after compaction to 5, mid-batch", span(6, 9), times[1])
		if err := c.CommitCompaction(ctx, catalog.Commit{CollectionID: col.ID, BaseVersion: 2, NewVersion: 3, ManifestKey: "m3", CompactionOffset: 9}); err != nil {
			t.Fatal(err)
		}
		check("fully compacted", span(1, 0), time.Time{})
		// The row keeps the oldest time (no log read): an append to an
		// empty backlog sets it, a later one leaves it, a rollback takes
		// the time of the row after the restored offset.
		times = append(times, ms(e.clock.Advance(time.Minute)))
		mustAppend(t, c, col.ID, adds("c", 2, 2))
		check("an append after full compaction", span(10, 11), times[3])
		e.clock.Advance(time.Minute)
		mustAppend(t, c, col.ID, adds("d", 1, 2))
		check("a second append", span(10, 12), times[3])
		rb := catalog.Rollback{CollectionID: col.ID, BaseVersion: 3, NewVersion: 4, ToVersion: 2, FromManifestKey: "m2", ManifestKey: "m4",
			Reason: "test", By: "alice@host", JobID: uuid.NewString(), Node: "n1"}
		if err := c.CommitRollback(ctx, rb); err != nil {
			t.Fatal(err)
		}
		check("rolled back to offset 5, mid-batch", span(6, 12), times[1])

		_, _, err := c.ReadView(ctx, uuid.NewString())
		wantErr(t, "ReadView of an unknown collection", err, catalog.ErrNotFound)
	})
}

// TestReadViewIsASnapshot reads views while another goroutine appends and
// commits compactions: every view's tail must be exactly the collection's
// backlog, which fails if the row and the tail come from different moments.
func TestReadViewIsASnapshot(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		c := e.open(t)
		col := mustCreate(t, c, "snapshot", 2)
		done := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() {
			defer close(done)
			version := int64(0)
			for i := range 60 {
				_, last, err := c.AppendLog(ctx, col.ID, adds(fmt.Sprintf("w%d", i), 3, 2), catalog.AppendLimits{})
				if err != nil {
					t.Errorf("append: %v", err)
					return
				}
				if i%3 == 2 {
					err := c.CommitCompaction(ctx, catalog.Commit{CollectionID: col.ID, BaseVersion: version, NewVersion: version + 1, ManifestKey: "m", CompactionOffset: last - 1})
					if err != nil {
						t.Errorf("commit: %v", err)
						return
					}
					version++
				}
			}
		})
		for r := range 4 {
			wg.Go(func() {
				for {
					select {
					case <-done:
						return
					default:
					}
					got, tail, err := c.ReadView(ctx, col.ID)
					if err != nil {
						t.Errorf("reader %d: %v", r, err)
						return
					}
					want := span(got.CompactionOffset+1, got.LogPosition)
					if !slices.Equal(offsets(tail), want) {
						t.Errorf("reader %d: tail %v, want the backlog %v of %+v", r, offsets(tail), want, got)
						return
					}
					if len(tail) > 0 && got.OldestUncompactedAt.IsZero() {
						t.Errorf("reader %d: a backlog of %d without an oldest time", r, len(tail))
						return
					}
				}
			})
		}
		wg.Wait()
	})
}

package catalog

import (
	"fmt"
	"testing"

	"github.com/compactorhq/compactor/internal/jobtype"
)

func TestListCacheHoldsUntilTheNextWrite(t *testing.T) {
	var nilCache *listCache
	nilCache.put("k", nilCache.begin(), listEntry{jobs: []Job{{ID: "a"}}})
	if _, ok := nilCache.get("k"); ok {
		t.Fatal("a shared catalog (nil listCache) remembered a list")
	}
	if newListCache(nil) != nil {
		t.Fatal("newListCache(nil) is not nil")
	}

	var writes tailRows
	l := newListCache(&writes)
	gen := l.begin()
	l.put("k", gen, listEntry{jobs: []Job{{ID: "a"}}})
	if e, ok := l.get("k"); !ok || len(e.jobs) != 1 || e.jobs[0].ID != "a" {
		t.Fatalf("get(k) = %+v, %v; want the list put", e, ok)
	}
	writes.began()
	if _, ok := l.get("k"); ok {
		t.Fatal("a list was served while a write transaction was open")
	}
	writes.ended()
	if _, ok := l.get("k"); ok {
		t.Fatal("a list read before a write ended was served after it")
	}
	// A read that began before a write ended is not remembered.
	l.put("k2", gen, listEntry{jobs: []Job{{ID: "b"}}})
	if _, ok := l.get("k2"); ok {
		t.Fatal("a list read while a write ended was remembered")
	}

	// The bounds: entries, then rows; an oversized list is not kept.
	gen = l.begin()
	for i := range maxListEntries + 10 {
		l.put(fmt.Sprint(i), gen, listEntry{colls: []Collection{{ID: "c"}}})
		if len(l.entries) > maxListEntries {
			t.Fatalf("%d lists remembered after %d puts, more than %d", len(l.entries), i+1, maxListEntries)
		}
	}
	for i := range 10 {
		l.put(fmt.Sprint("big", i), gen, listEntry{jobs: make([]Job, maxListRows/4)})
		if l.rows > maxListRows {
			t.Fatalf("%d rows remembered, more than %d", l.rows, maxListRows)
		}
	}
	if _, ok := l.get("big9"); !ok {
		t.Fatal("the last list put is not remembered")
	}
	l.put("huge", gen, listEntry{jobs: make([]Job, maxListRows+1)})
	if _, ok := l.get("huge"); ok {
		t.Fatalf("a list of %d rows was remembered, over the bound %d", maxListRows+1, maxListRows)
	}
	// A put after a write drops the stale lists; replacing a key does not
	// count its rows twice.
	writes.began()
	writes.ended()
	gen = l.begin()
	for range 3 {
		l.put("same", gen, listEntry{jobs: make([]Job, 5)})
	}
	if len(l.entries) != 1 || l.rows != 5 {
		t.Fatalf("%d lists of %d rows after a write and three puts of one 5-row key, want 1 of 5", len(l.entries), l.rows)
	}
}

func TestJobsKeyTellsFiltersApart(t *testing.T) {
	filters := []JobFilter{
		{},
		{CollectionID: "a"},
		{States: []JobState{JobQueued}},
		{States: []JobState{JobQueued, JobRunning}},
		{Kinds: []JobKind{jobtype.KindIndexRebuild}},
		{Trigger: TriggerOneOff},
		{Before: JobCursor{CreatedAt: fromMs(5), ID: "x"}},
		{FinishedSince: fromMs(5)},
	}
	seen := map[string]int{}
	for i, f := range filters {
		for _, limit := range []int{20, 1000} {
			k := jobsKey(f, limit)
			if j, ok := seen[k]; ok {
				t.Fatalf("filters %d and %d (limit %d) share the key %q", i, j, limit, k)
			}
			seen[k] = i
		}
	}
	if jobsKey(JobFilter{Kinds: []JobKind{""}}, 1) != jobsKey(JobFilter{Kinds: []JobKind{jobtype.KindCompaction}}, 1) {
		t.Error("the default kind and compaction have different keys, though ListJobs reads the same rows")
	}
	if collectionsKey("a", 2) == collectionsKey("a", 3) || collectionsKey("a", 2) == collectionsKey("b", 2) {
		t.Error("collection pages of different positions or sizes share a key")
	}
}

func TestListCacheClonesWhatReadersMayChange(t *testing.T) {
	jobs := []Job{{ID: "a", Predicted: &jobtype.Prediction{}, Actual: &jobtype.Actual{}}}
	got := cloneJobs(jobs)
	got[0].ID = "changed"
	*got[0].Predicted = jobtype.Prediction{Seconds: 9}
	*got[0].Actual = jobtype.Actual{BlobGets: 9}
	if jobs[0].ID != "a" || *jobs[0].Predicted != (jobtype.Prediction{}) || *jobs[0].Actual != (jobtype.Actual{}) {
		t.Fatalf("a change to the clone reached the original: %+v", jobs[0])
	}
	colls := []Collection{{ID: "a", Policy: CollectionPolicy{Windows: []string{"w"}}}}
	gotC := cloneCollections(colls)
	gotC[0].Policy.Windows[0] = "changed"
	if colls[0].Policy.Windows[0] != "w" {
		t.Fatal("a change to the clone's windows reached the original")
	}
}

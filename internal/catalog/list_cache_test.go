package catalog_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/catalog/catalogtest"
)

// TestExclusiveListsSeeEveryWrite lists jobs and collections, twice each
// (the second from what an exclusive catalog remembers), after each kind of
// write that changes a list: a job queued, claimed, cancelled; a collection
// created, paused, deleted. Each list must show the write before it.
func TestExclusiveListsSeeEveryWrite(t *testing.T) {
	c := catalogtest.OpenConfig(t, catalog.Config{DSN: filepath.Join(t.TempDir(), "catalog.db"), Exclusive: true, Holder: "test"})
	jobs := func(what string, f catalog.JobFilter) []string {
		t.Helper()
		return readTwice(t, what, func() ([]catalog.Job, error) { return c.ListJobs(ctx, f) },
			func(j catalog.Job) string { return j.CollectionName + ":" + string(j.State) },
			func(j *catalog.Job) { j.State = "CHANGED" })
	}
	colls := func(what string) []string {
		t.Helper()
		return readTwice(t, what, func() ([]catalog.Collection, error) { return c.ListCollectionsPage(ctx, "", 10) },
			func(col catalog.Collection) string { return fmt.Sprintf("%s paused=%v", col.Name, col.Paused()) },
			func(col *catalog.Collection) { col.Name = "changed" })
	}
	all := catalog.JobFilter{Limit: 20}
	queued := catalog.JobFilter{States: []catalog.JobState{catalog.JobQueued}, Limit: 20}

	equal(t, "empty: jobs", jobs("empty", all), []string{})
	equal(t, "empty: collections", colls("empty"), []string{})
	a := mustCreate(t, c, "a", 2)
	b := mustCreate(t, c, "b", 2)
	equal(t, "created: collections", colls("created"), []string{"a paused=false", "b paused=false"})
	mustEnqueue(t, c, catalog.JobRequest{CollectionID: a.ID, Trigger: catalog.TriggerOneOff})
	mustEnqueue(t, c, catalog.JobRequest{CollectionID: b.ID, Trigger: catalog.TriggerOneOff})
	equal(t, "queued: queued jobs", jobs("queued", queued), []string{"b:QUEUED", "a:QUEUED"})
	claimed := mustClaim(t, c, "n1")
	want := []string{"b:QUEUED", "a:QUEUED"}
	want[slices.Index([]string{b.ID, a.ID}, claimed.CollectionID)] = claimed.CollectionName + ":RUNNING"
	equal(t, "claimed: jobs", jobs("claimed", all), want)
	equal(t, "claimed: queued jobs", len(jobs("claimed", queued)), 1)
	if _, err := c.CancelJob(ctx, claimed.ID, "test"); err != nil {
		t.Fatal(err)
	}
	for _, s := range jobs("cancel requested", all) {
		if s == claimed.CollectionName+":CHANGED" {
			t.Fatal("a reader's change reached the list")
		}
	}
	if _, err := c.SetCollectionPause(ctx, a.ID, true, "test", "tester"); err != nil {
		t.Fatal(err)
	}
	equal(t, "paused: collections", colls("paused"), []string{"a paused=true", "b paused=false"})
	if _, err := c.DeleteCollection(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	equal(t, "deleted: collections", colls("deleted"), []string{"a paused=true"})
	for _, s := range jobs("deleted", all) {
		if s[0] == 'b' {
			t.Fatalf("a job of the deleted collection is still listed: %v", s)
		}
	}
}

// readTwice reads a list twice (the second read from what an exclusive
// catalog remembers), checks that both show the same, changes every element
// the reads returned (a reader's change must reach no other read), and
// returns what the list shows.
func readTwice[T any](t *testing.T, what string, read func() ([]T, error), show func(T) string, change func(*T)) []string {
	t.Helper()
	var shown []string
	for i := range 2 {
		got, err := read()
		if err != nil {
			t.Fatalf("%s: read %d: %v", what, i+1, err)
		}
		s := make([]string, len(got))
		for k, v := range got {
			s[k] = show(v)
		}
		if i == 1 {
			equal(t, what+": the second read", s, shown)
		}
		shown = s
		for k := range got {
			change(&got[k])
		}
	}
	return shown
}

// TestExclusiveListsReadTheirWrites queues jobs from several goroutines
// while others keep listing (and so remembering) the queue: a list made
// after a job was queued shows it, whatever was remembered meanwhile. Run
// it with -race.
func TestExclusiveListsReadTheirWrites(t *testing.T) {
	c := catalogtest.OpenConfig(t, catalog.Config{DSN: filepath.Join(t.TempDir(), "catalog.db"), Exclusive: true, Holder: "test"})
	const writers, each = 3, 15
	queued := catalog.JobFilter{States: []catalog.JobState{catalog.JobQueued}, Limit: 1000}
	stop := make(chan struct{})
	var readers sync.WaitGroup
	for range 2 {
		readers.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := c.ListJobs(ctx, queued); err != nil {
					t.Errorf("ListJobs: %v", err)
					return
				}
				if _, err := c.ListCollectionsPage(ctx, "", 100); err != nil {
					t.Errorf("ListCollectionsPage: %v", err)
					return
				}
			}
		})
	}
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				col, err := c.CreateCollection(ctx, fmt.Sprintf("w%d-%02d", w, i), 2)
				if err != nil {
					t.Errorf("CreateCollection: %v", err)
					return
				}
				page, err := c.ListCollectionsPage(ctx, "", 100)
				if err != nil {
					t.Errorf("ListCollectionsPage: %v", err)
					return
				}
				if !slices.ContainsFunc(page, func(p catalog.Collection) bool { return p.ID == col.ID }) {
					t.Errorf("the page listed after creating %s does not hold it", col.Name)
					return
				}
				job, _, err := c.EnqueueJob(ctx, catalog.JobRequest{CollectionID: col.ID, Trigger: catalog.TriggerOneOff})
				if err != nil {
					t.Errorf("EnqueueJob: %v", err)
					return
				}
				list, err := c.ListJobs(ctx, queued)
				if err != nil {
					t.Errorf("ListJobs: %v", err)
					return
				}
				if !slices.ContainsFunc(list, func(j catalog.Job) bool { return j.ID == job.ID }) {
					t.Errorf("the queue listed after queuing %s does not hold it", job.ID)
					return
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	readers.Wait()
	list, err := c.ListJobs(ctx, queued)
	if err != nil {
		t.Fatal(err)
	}
	equal(t, "jobs queued in all", len(list), writers*each)
}

package catalog_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/compactorhq/compactor/internal/catalog"
)

func oneOff(ids ...string) []catalog.JobRequest {
	out := make([]catalog.JobRequest, len(ids))
	for i, id := range ids {
		out[i] = catalog.JobRequest{CollectionID: id, Trigger: catalog.TriggerOneOff, Reason: "r"}
	}
	return out
}

func TestEnqueueJobsKeepsEachCallAllOrNothing(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		c := e.open(t)
		a, b, d := mustCreate(t, c, "a", 0), mustCreate(t, c, "b", 0), mustCreate(t, c, "d", 0)
		queuedB, _ := mustEnqueue(t, c, catalog.JobRequest{CollectionID: b.ID, Trigger: catalog.TriggerScheduled})
		unknown := uuid.NewString()
		outs, err := c.EnqueueJobs(ctx, []catalog.EnqueueCall{
			{Requests: oneOff(a.ID, b.ID)},
			{Requests: oneOff(d.ID, unknown)},                    // fails: nothing of it is queued
			{Requests: oneOff(d.ID, unknown), SkipMissing: true}, // queues d
			{Requests: oneOff(a.ID)},                             // a is queued by the first call: returned
			{Requests: []catalog.JobRequest{{CollectionID: a.ID}}},
		})
		if err != nil {
			t.Fatalf("EnqueueJobs: %v", err)
		}
		if len(outs) != 5 {
			t.Fatalf("%d outcomes for 5 calls", len(outs))
		}
		// 1: a created (named), b already queued and expedited.
		if o := outs[0]; o.Err != nil || len(o.Jobs) != 2 || !o.Jobs[0].Created || o.Jobs[0].Job.CollectionName != "a" ||
			o.Jobs[1].Created || o.Jobs[1].Job.ID != queuedB.ID || !o.Jobs[1].Job.Expedited || o.Jobs[1].Job.CollectionName != "b" {
			t.Fatalf("first call: %+v", o)
		}
		var missing *catalog.MissingCollectionsError
		if o := outs[1]; !errors.As(o.Err, &missing) || !errors.Is(o.Err, catalog.ErrNotFound) || !slices.Equal(missing.IDs, []string{unknown}) || o.Jobs != nil {
			t.Fatalf("second call: %+v, want MissingCollectionsError naming %s", o, unknown)
		}
		if o := outs[2]; o.Err != nil || len(o.Jobs) != 1 || !o.Jobs[0].Created || o.Jobs[0].Job.CollectionID != d.ID {
			t.Fatalf("third call: %+v", o)
		}
		if o := outs[3]; o.Err != nil || len(o.Jobs) != 1 || o.Jobs[0].Created || o.Jobs[0].Job.ID != outs[0].Jobs[0].Job.ID {
			t.Fatalf("fourth call: %+v, want the job of the first", o)
		}
		if o := outs[4]; !errors.Is(o.Err, catalog.ErrInvalidArgument) {
			t.Fatalf("a request without trigger: %v, want ErrInvalidArgument", o.Err)
		}
		queue, err := c.ListQueue(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, j := range queue {
			names = append(names, j.CollectionName)
		}
		slices.Sort(names)
		if !slices.Equal(names, []string{"a", "b", "d"}) {
			t.Fatalf("queued jobs of %v, want a, b and d once each", names)
		}
	})
}

func TestEnqueueJobsOfManyCollectionsInOneCall(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		c := e.open(t)
		var ids []string
		for i := range 1203 { // more than one IN (...) chunk
			ids = append(ids, mustCreate(t, c, fmt.Sprintf("c%04d", i), 0).ID)
		}
		outs, err := c.EnqueueJobs(ctx, []catalog.EnqueueCall{{Requests: oneOff(ids...)}})
		if err != nil || outs[0].Err != nil || len(outs[0].Jobs) != len(ids) {
			t.Fatalf("EnqueueJobs: %v, %v, %d jobs", err, outs[0].Err, len(outs[0].Jobs))
		}
		for i, e := range outs[0].Jobs {
			if !e.Created || e.Job.CollectionID != ids[i] || e.Job.CollectionName != fmt.Sprintf("c%04d", i) {
				t.Fatalf("job %d: %+v", i, e)
			}
		}
		// Again, with one unknown id at the end: nothing changes.
		outs, err = c.EnqueueJobs(ctx, []catalog.EnqueueCall{{Requests: oneOff(append(ids, uuid.NewString())...)}})
		if err != nil || !errors.Is(outs[0].Err, catalog.ErrNotFound) {
			t.Fatalf("with an unknown id: %v, %v", err, outs[0].Err)
		}
		queue, err := c.ListQueue(ctx, 0)
		if err != nil || len(queue) != 1000 { // ListQueue's own bound
			t.Fatalf("queue: %d jobs, %v", len(queue), err)
		}
	})
}

func TestJobsCarryTheirCollectionName(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		c := e.open(t)
		keep, gone := mustCreate(t, c, "kept", 0), mustCreate(t, c, "deleted", 0)
		jk, _ := mustEnqueue(t, c, catalog.JobRequest{CollectionID: keep.ID, Trigger: catalog.TriggerScheduled})
		mustEnqueue(t, c, catalog.JobRequest{CollectionID: gone.ID, Trigger: catalog.TriggerScheduled})
		if jk.CollectionName != "kept" {
			t.Fatalf("EnqueueJob: name %q", jk.CollectionName)
		}
		got, err := c.GetJob(ctx, jk.ID)
		if err != nil || got.CollectionName != "kept" {
			t.Fatalf("GetJob: %q, %v", got.CollectionName, err)
		}
		claimed := mustClaim(t, c, "n1")
		if claimed.CollectionName == "" {
			t.Fatalf("ClaimJob: no name")
		}
		// The jobs of a deleted collection go with it; the others keep
		// their names.
		if _, err := c.DeleteCollection(ctx, gone.ID); err != nil {
			t.Fatal(err)
		}
		jobs, err := c.ListJobs(ctx, catalog.JobFilter{})
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range jobs {
			if want := map[string]string{keep.ID: "kept"}[j.CollectionID]; j.CollectionName != want {
				t.Fatalf("ListJobs: job of %s named %q, want %q", j.CollectionID, j.CollectionName, want)
			}
		}
	})
}

func TestListCollectionsPageAndCountPaused(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		c := e.open(t)
		var names []string
		for i := range 25 {
			// Byte order, as the old Go-side paging compared: "B" < "a" < "é".
			n := []string{"a", "B", "é"}[i%3] + fmt.Sprintf("%02d", i)
			col := mustCreate(t, c, n, 0)
			names = append(names, n)
			if i%4 == 0 {
				if _, err := c.SetCollectionPause(ctx, col.ID, true, "why", "op"); err != nil {
					t.Fatal(err)
				}
			}
		}
		slices.Sort(names)
		var got []string
		after := ""
		for {
			page, err := c.ListCollectionsPage(ctx, after, 7)
			if err != nil {
				t.Fatal(err)
			}
			if len(page) > 7 {
				t.Fatalf("page of %d for a limit of 7", len(page))
			}
			for _, col := range page {
				got = append(got, col.Name)
			}
			if len(page) < 7 {
				break
			}
			after = page[len(page)-1].Name
		}
		if !slices.Equal(got, names) {
			t.Fatalf("paged names:\n got %s\nwant %s", strings.Join(got, " "), strings.Join(names, " "))
		}
		all, err := c.ListCollections(ctx)
		if err != nil {
			t.Fatal(err)
		}
		first, err := c.ListCollectionsPage(ctx, "", 25)
		if err != nil {
			t.Fatal(err)
		}
		equal(t, "a page of every collection", first, all)
		if _, err := c.ListCollectionsPage(ctx, "", 0); !errors.Is(err, catalog.ErrInvalidArgument) {
			t.Fatalf("limit 0: %v", err)
		}
		n, err := c.CountPausedCollections(ctx)
		if err != nil || n != 7 {
			t.Fatalf("CountPausedCollections: %d, %v; want 7", n, err)
		}
	})
}

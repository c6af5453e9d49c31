package server_test

import (
	"regexp"
	"testing"
	"time"

	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/clock"
	"github.com/compactorhq/compactor/internal/server"
)

// The process runs on one clock (Config.Manager.Clock): the catalog's
// rows, the manifests and the status page all read it, so the times a
// version records and the freshness debt the page shows follow that
// clock, not the system's.
func TestThePageAndTheVersionsReadTheProcessClock(t *testing.T) {
	start := time.Date(2031, 3, 1, 12, 0, 0, 0, time.UTC)
	fake := clock.NewFake(start)
	r := startApp(t, func(c *server.Config) { c.Manager.Clock = fake })
	id := r.createAndPush(t, "fresh", 3)
	age := time.Hour
	if _, err := r.app.Catalog.UpdateCollectionPolicy(t.Context(), id, catalog.PolicyUpdate{ObjectiveMaxAge: &age}); err != nil {
		t.Fatal(err)
	}

	// Half the objective later, the oldest record (pushed at start) is
	// half an hour old: a debt of 0.50.
	fake.Advance(30 * time.Minute)
	_, _, body := r.get(t, r.base+"/collections/"+id)
	debt := regexp.MustCompile(`data-field="freshness_debt"[^>]*>\s*([^<\s]*)`).FindStringSubmatch(body)
	if debt == nil || debt[1] != "0.50" {
		t.Errorf("freshness debt on the collection page: %q, want 0.50 (half an hour of an hour's objective on the process clock)", debt)
	}

	at := fake.Advance(time.Minute)
	if j := r.compactAndWait(t, id); j.State != catalog.JobSucceeded {
		t.Fatalf("compaction: %s %s", j.State, j.Error)
	}
	vs, err := r.app.Catalog.ListVersions(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	m, err := r.app.Segments.ReadManifest(t.Context(), vs[0].ManifestKey)
	if err != nil {
		t.Fatal(err)
	}
	if !vs[0].CreatedAt.Equal(at) || !m.CreatedAt.Equal(at) {
		t.Errorf("version %d committed at %v, its manifest written at %v; want the process clock's %v", vs[0].Version, vs[0].CreatedAt, m.CreatedAt, at)
	}
}

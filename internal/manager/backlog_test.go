package manager

import (
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// backlogGauges renders the two backlog gauges as the text exposition does.
func backlogGauges(records, dead int) string {
	return fmt.Sprintf(`
# HELP compactor_uncompacted_records Log records not yet compacted, summed over collections; updated on push, at the end of every job and at every scheduler run.
# TYPE compactor_uncompacted_records gauge
compactor_uncompacted_records %d
# HELP compactor_collections_dead_lettered Collections the scheduler skips after repeated failures; updated at the end of every job and at every scheduler run.
# TYPE compactor_collections_dead_lettered gauge
compactor_collections_dead_lettered %d
`, records, dead)
}

func TestRefreshBacklogMovesTheGaugesWithoutASchedulerRun(t *testing.T) {
	store := newMemStore()
	reg := prometheus.NewRegistry()
	m, err := New(store, newFakeExec(store, 1000), metricsConfig(), reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	check := func(step string, records, dead int) {
		t.Helper()
		if err := testutil.GatherAndCompare(reg, strings.NewReader(backlogGauges(records, dead)),
			"compactor_uncompacted_records", "compactor_collections_dead_lettered"); err != nil {
			t.Errorf("after %s: %v", step, err)
		}
	}
	check("start", 0, 0)

	store.addCollection("a", 0, t0)
	store.addCollection("b", 0, t0)
	store.append("a", 5710, t0)
	if err := m.RefreshBacklog(t.Context(), "a"); err != nil {
		t.Fatal(err)
	}
	check("a push of 5710 records to a", 5710, 0)

	store.append("b", 40, t0)
	if err := m.RefreshBacklog(t.Context(), "b"); err != nil {
		t.Fatal(err)
	}
	check("a push of 40 records to b", 5750, 0)

	// A commit of a compacts 5000 records; a read that lost the race with it
	// (older positions) must not bring the backlog back.
	stale := store.collection("a")
	store.mu.Lock()
	store.colls["a"].CompactionOffset = 5000
	store.mu.Unlock()
	if err := m.RefreshBacklog(t.Context(), "a"); err != nil {
		t.Fatal(err)
	}
	check("a commit of 5000 records of a", 750, 0)
	m.metrics.backlogs.update(stale)
	check("a stale read of a", 750, 0)

	store.mu.Lock()
	store.colls["b"].DeadLetteredAt = t0
	store.mu.Unlock()
	if err := m.RefreshBacklog(t.Context(), "b"); err != nil {
		t.Fatal(err)
	}
	check("b dead-lettered", 750, 1)

	// Deleted: GetCollection answers NOT_FOUND, and the Deleter's drop
	// drops it too.
	store.mu.Lock()
	delete(store.colls, "b")
	store.mu.Unlock()
	if err := m.RefreshBacklog(t.Context(), "b"); err != nil {
		t.Fatal(err)
	}
	check("b deleted", 710, 0)
	m.metrics.backlogs.drop("a")
	check("a forgotten", 0, 0)

	// A scheduler run replaces everything with the catalog's figures.
	if err := m.Schedule(t.Context()); err != nil {
		t.Fatal(err)
	}
	check("a scheduler run", 710, 0)
	lint(t, reg)
}

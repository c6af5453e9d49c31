package manager

import (
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/compactorhq/compactor/internal/catalog"
)

// While the claim gate is closed (a store the jobs need is unreachable)
// the node claims nothing, and a queued job stays QUEUED; once it opens
// again, the job runs within a poll interval.
func TestClosedClaimGateStopsClaimsUntilItOpens(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newMemStore()
		store.addCollection("a", 20, time.Now())
		cfg := testConfig()
		var down atomic.Bool
		down.Store(true)
		h := start(t, store, newFakeExec(store, 1000), cfg)
		h.m.SetClaimGate(func() error {
			if down.Load() {
				return errors.New("blob store unreachable")
			}
			return nil
		})
		id := h.compact("a")[0].Job.ID
		time.Sleep(10 * cfg.PollInterval)
		h.wantState(id, catalog.JobQueued)

		down.Store(false)
		time.Sleep(2 * cfg.PollInterval)
		h.wantState(id, catalog.JobSucceeded)
	})
}

package server

import (
	"testing"

	"github.com/compactorhq/compactor/internal/compaction"
	"github.com/compactorhq/compactor/internal/manager"
)

// The manager weighs a job's phases by the names the compaction reports:
// the two lists must stay equal.
func TestManagerKnowsTheCompactionsPhases(t *testing.T) {
	for _, p := range [][2]string{
		{compaction.PhaseReading, manager.PhaseReading},
		{compaction.PhaseMaterializing, manager.PhaseMaterializing},
		{compaction.PhaseWriting, manager.PhaseWriting},
		{compaction.PhaseIndexing, manager.PhaseIndexing},
		{compaction.PhaseCommitting, manager.PhaseCommitting},
	} {
		if p[0] != p[1] {
			t.Errorf("compaction phase %q, manager phase %q", p[0], p[1])
		}
	}
}

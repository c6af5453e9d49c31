package rpc

import (
	"strings"
	"testing"
	"time"

	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/jobtype"
	"github.com/compactorhq/compactor/internal/manager"
)

func TestJobErrorsCarryNoServerPaths(t *testing.T) {
	j := manager.Job{Job: catalog.Job{ID: "j", State: catalog.JobFailed,
		Error: `write block /var/lib/compactor/blobs/collections/c/blocks/b-1.parquet: open /var/lib/compactor/blobs/collections/c/blocks/b-1.parquet.tmp: no space left on device`}}
	got := jobToProto(j).GetError()
	if strings.Contains(got, "/var/lib") || !strings.Contains(got, "b-1.parquet") || !strings.Contains(got, "no space left on device") {
		t.Fatalf("job error %q: want the paths cut to their base names", got)
	}
}

func TestEchoIDsNamesTenAndCountsTheRest(t *testing.T) {
	ids := make([]string, 25)
	for i := range ids {
		ids[i] = strings.Repeat("x", 1000)
	}
	got := echoIDs(ids)
	if !strings.HasSuffix(got, " and 15 more") || len(got) > MaxEchoIDs*(MaxEchoBytes+len("…, "))+20 {
		t.Fatalf("echoIDs: %d bytes, ending %q", len(got), got[max(0, len(got)-30):])
	}
}

func TestProgressLeavesAnUnknownETAUnset(t *testing.T) {
	known := progressToProto(jobtype.Progress{Phase: jobtype.PhaseWriting, Fraction: 0.5, ETA: 1500 * time.Millisecond, ETAKnown: true, BlocksWritten: 2, BlocksTotal: 4})
	if known.GetEta().AsDuration() != 1500*time.Millisecond || known.GetFraction() != 0.5 || known.GetBlocksWritten() != 2 || known.GetBlocksTotal() != 4 {
		t.Fatalf("known ETA: got %v", known)
	}
	unknown := progressToProto(jobtype.Progress{Phase: jobtype.PhaseMaterializing, Fraction: 0.2})
	if unknown.Eta != nil {
		t.Fatalf("unknown ETA: got eta %v, want unset", unknown.GetEta())
	}
}

package rpc

import (
	"strings"
	"testing"

	"github.com/compactorhq/compactor/internal/catalog"
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

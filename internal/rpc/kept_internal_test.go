package rpc

import (
	"context"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/compaction"
)

// versionsOnly is a Records that answers ListVersions alone.
type versionsOnly struct {
	Records
	vs []compaction.VersionInfo
}

func (v versionsOnly) ListVersions(context.Context, string) ([]compaction.VersionInfo, error) {
	return v.vs, nil
}

// TestKeptVersionRefusesARetiredVersion: a verify of a version GC retired
// is refused before it is queued (as a job it would fail, and count toward
// the collection's dead-letter state), naming the oldest kept version.
func TestKeptVersionRefusesARetiredVersion(t *testing.T) {
	recs := versionsOnly{vs: []compaction.VersionInfo{
		{Version: catalog.Version{Version: 3}, Current: true},
		{Version: catalog.Version{Version: 2}},
		{Version: catalog.Version{Version: 1, RetiredAt: time.Unix(1, 0)}},
	}}
	for _, v := range []int64{2, 3} {
		if err := keptVersion(t.Context(), recs, "c", v); err != nil {
			t.Errorf("version %d: %v, want kept", v, err)
		}
	}
	err := keptVersion(t.Context(), recs, "c", 1)
	if connect.CodeOf(err) != connect.CodeNotFound || !strings.Contains(err.Error(), "no longer keeps version 1: the oldest kept version is 2") {
		t.Errorf("version 1: %v, want NOT_FOUND naming version 2", err)
	}
}

package cli

import (
	"fmt"
	"strings"
	"testing"
)

// TestIndexRebuildWait: "index rebuild --wait" queues an index rebuild
// with new parameters, follows it to its end and prints the summary; the
// parameters are the collection's afterwards, the job is listed with its
// kind, and bad requests fail naming what was wrong.
func TestIndexRebuildWait(t *testing.T) {
	t.Parallel()
	addr := startServer(t, nil)
	id := createCollection(t, addr, "vectors")
	var lines []string
	for i := range 40 {
		lines = append(lines, fmt.Sprintf(`{"op":"add","id":"r%02d","embedding":[%d,%d.5]}`, i, i, i))
	}
	ok(t, addr, "push", "--collection", id, jsonl(t, lines...))
	ok(t, addr, "compact", id, "--wait")

	r := ok(t, addr, "index", "rebuild", "vectors", "--m", "8", "--ef-construction", "32", "--reason", "new parameters", "--wait")
	for _, want := range []string{"INDEX_REBUILD", "created", "SUCCEEDED", "1 -> 2", "1 of 1 jobs succeeded"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
		}
	}
	if !strings.Contains(r.stderr, "SUCCEEDED in") || !strings.Contains(r.stderr, "version 1 -> 2, m 8, ef_construction 32") {
		t.Errorf("stderr should hold the job's end:\n%s", r.stderr)
	}
	got := decode[struct {
		Index struct {
			M              int `json:"m"`
			EfConstruction int `json:"ef_construction"`
		} `json:"index"`
		SegmentVersion string `json:"segment_version"`
	}](t, ok(t, addr, "-o", "json", "collections", "get", id).stdout)
	if got.Index.M != 8 || got.Index.EfConstruction != 32 || got.SegmentVersion != "2" {
		t.Fatalf("collection after the rebuild: %+v, want m 8, ef_construction 32 at version 2", got)
	}
	type kindJSON struct {
		Kind         string `json:"kind"`
		State        string `json:"state"`
		Reason       string `json:"reason"`
		IndexRebuild struct {
			M int `json:"m"`
		} `json:"index_rebuild"`
	}
	jobs := decode[[]kindJSON](t, ok(t, addr, "-o", "json", "jobs", "--kind", "index-rebuild").stdout)
	if len(jobs) != 1 || jobs[0].Kind != "JOB_KIND_INDEX_REBUILD" || jobs[0].State != "JOB_STATE_SUCCEEDED" || jobs[0].Reason != "new parameters" || jobs[0].IndexRebuild.M != 8 {
		t.Fatalf("jobs --kind index-rebuild = %+v, want the one rebuild", jobs)
	}
	res := decode[compactJSON](t, ok(t, addr, "-o", "json", "index", "rebuild", id, "--wait").stdout)
	if len(res.Jobs) != 1 || res.Jobs[0].Job.State != "JOB_STATE_SUCCEEDED" || !res.Jobs[0].Created {
		t.Fatalf("index rebuild -o json --wait = %+v, want one created job, SUCCEEDED", res)
	}
	// The reads are those of before.
	if recs := decode[[]recordJSON](t, ok(t, addr, "-o", "json", "get", "--collection", id, "--limit", "100").stdout); len(recs) != 40 {
		t.Fatalf("%d records after the rebuilds, want 40", len(recs))
	}

	fails(t, addr, nil, 1, "invalid_argument", "index", "rebuild", id, "--m", "500")
	fails(t, addr, nil, 2, "--m must not be negative", "index", "rebuild", id, "--m", "-1")
	fails(t, addr, nil, 2, "accepts 1 arg", "index", "rebuild")
	fails(t, addr, nil, 1, `collection "nope" not found`, "index", "rebuild", "nope")
	off := createCollection(t, addr, "plain", "--no-index")
	fails(t, addr, nil, 1, "failed_precondition", "index", "rebuild", off)
}

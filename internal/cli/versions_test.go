package cli

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
)

type versionJSON struct {
	Version          string `json:"version"`
	OffsetStart      string `json:"offset_start"`
	CompactionOffset string `json:"compaction_offset"`
	JobID            string `json:"job_id"`
	RecordCount      string `json:"record_count"`
	Current          bool   `json:"current"`
	Kept             bool   `json:"kept"`
	RollbackOf       string `json:"rollback_of"`
	Reason           string `json:"reason"`
	CreatedBy        string `json:"created_by"`
}

type versionsJSON struct {
	Versions       []versionJSON `json:"versions"`
	CurrentVersion string        `json:"current_version"`
	OldestKept     string        `json:"oldest_kept_version"`
}

// TestVersionsGetAtVersionAndRollback: compactor versions, get and query
// --version, and rollback with its confirmation, against a real server.
func TestVersionsGetAtVersionAndRollback(t *testing.T) {
	t.Parallel()
	addr := startServer(t, nil)
	id := createCollection(t, addr, "history", "--dimension", "2")
	pushLines := func(from, n int, doc string) {
		t.Helper()
		var lines strings.Builder
		for i := from; i < from+n; i++ {
			fmt.Fprintf(&lines, `{"op": "upsert", "id": "r%d", "embedding": [%d, 0], "document": "%s %d"}`+"\n", i, i, doc, i)
		}
		if r := cli(t, addr, strings.NewReader(lines.String()), "push", "--collection", id, "-"); r.err != nil {
			t.Fatalf("push: %v\n%s", r.err, r.stderr)
		}
	}
	if r := ok(t, addr, "versions", "history"); !strings.Contains(r.stderr, "no versions") {
		t.Errorf("versions of a collection never compacted: %q", r.stderr)
	}
	pushLines(0, 4, "first")
	ok(t, addr, "compact", "history", "--wait")
	pushLines(0, 2, "second")
	ok(t, addr, "compact", "history", "--wait")
	pushLines(4, 1, "tail")

	vs := decode[versionsJSON](t, ok(t, addr, "-o", "json", "versions", "history").stdout)
	if len(vs.Versions) != 2 || vs.CurrentVersion != "2" || vs.OldestKept != "1" || !vs.Versions[0].Current || vs.Versions[1].JobID == "" ||
		vs.Versions[0].OffsetStart != "4" || vs.Versions[0].CompactionOffset != "6" {
		t.Fatalf("versions: %+v", vs)
	}
	table := ok(t, addr, "versions", id).stdout
	for _, want := range []string{"VERSION", "OFFSETS", "(4, 6]", "(0, 4]", "current", "kept", "unknown", "job " + vs.Versions[1].JobID[:8]} {
		if !strings.Contains(table, want) {
			t.Errorf("versions table lacks %q:\n%s", want, table)
		}
	}

	at1 := decode[[]recordJSON](t, ok(t, addr, "-o", "json", "get", "--collection", "history", "--version", "1").stdout)
	if len(at1) != 4 || *at1[0].Document != "first 0" {
		t.Errorf("get --version 1: %+v", at1)
	}
	now := decode[[]recordJSON](t, ok(t, addr, "-o", "json", "get", "--collection", "history").stdout)
	if len(now) != 5 || *now[0].Document != "second 0" {
		t.Fatalf("get: %+v", now)
	}
	if byID := decode[[]recordJSON](t, ok(t, addr, "-o", "json", "get", "--collection", "history", "--version", "1", "r1").stdout); len(byID) != 1 || *byID[0].Document != "first 1" {
		t.Errorf("get --version 1 r1: %+v", byID)
	}
	// r4 is in the tail only: version 2 does not hold it.
	fails(t, addr, nil, 1, `record "r4" does not exist`, "query", "history", "--like", "r4", "--version", "2")
	if q := decode[[]hitJSON](t, ok(t, addr, "-o", "json", "query", "history", "--embedding", "[0, 0]", "-k", "10", "--version", "1").stdout); ids(q) != "r0 r1 r2 r3" || *q[0].Document != "first 0" {
		t.Errorf("query --version 1: %+v", q)
	}
	fails(t, addr, nil, 2, "--version must be at least 1", "get", "--collection", "history", "--version", "0")
	fails(t, addr, nil, 2, "--version must be at least 1", "query", "history", "--embedding", "[0, 0]", "--version", "-1")
	fails(t, addr, nil, 1, "has no version 9: the newest is 2", "get", "--collection", "history", "--version", "9")

	// Rollback: refused without confirmation, then confirmed on stdin.
	fails(t, addr, nil, 2, "--to-version is required", "rollback", "history")
	r := fails(t, addr, strings.NewReader("n\n"), 1, "not confirmed: nothing was done", "rollback", "history", "--to-version", "1")
	if !strings.Contains(r.stderr, "Roll collection history back from version 2 to version 1?") {
		t.Errorf("the question: %q", r.stderr)
	}
	fails(t, addr, nil, 1, "not confirmed (stdin ended)", "rollback", "history", "--to-version", "1")
	if got := getCollection(t, addr, id); got.SegmentVersion != "2" {
		t.Fatalf("a refused rollback changed the version to %s", got.SegmentVersion)
	}
	r = cli(t, addr, strings.NewReader("y\n"), "rollback", "history", "--to-version", "1", "--reason", "second compaction is bad", "--operator", "ops")
	if r.err != nil {
		t.Fatalf("rollback: %v\n%s", r.err, r.stderr)
	}
	for _, want := range []string{"rolled back collection history", "version 3 is version 1's segment (replaces version 2)", "compaction offset 4", "backlog 3 records"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("rollback output lacks %q: %q", want, r.stdout)
		}
	}
	after := decode[[]recordJSON](t, ok(t, addr, "-o", "json", "get", "--collection", "history").stdout)
	if fmt.Sprint(docs(after)) != fmt.Sprint(docs(now)) {
		t.Errorf("the view after the rollback %v, want the view before it %v", docs(after), docs(now))
	}
	table = ok(t, addr, "versions", "history").stdout
	// The rollback's version covers the offsets of the version it restores.
	if !strings.Contains(table, "rollback to 1 by ops: second compaction is bad") || !regexp.MustCompile(`(?m)^3 .*\(0, 4\]`).MatchString(table) {
		t.Errorf("versions after the rollback:\n%s", table)
	}
	if jobs := ok(t, addr, "jobs", "--collection", "history").stdout; !strings.Contains(jobs, "ROLLBACK") {
		t.Errorf("the job history lacks the rollback:\n%s", jobs)
	}
	fails(t, addr, nil, 1, "already the current version", "rollback", "history", "--to-version", "3", "--yes")
	out := ok(t, addr, "-o", "json", "rollback", "history", "--to-version", "2", "-y").stdout
	if !strings.Contains(out, `"replaced_version": "3"`) || !strings.Contains(out, `"rollback_of": "2"`) {
		t.Errorf("rollback -o json: %s", out)
	}
}

func docs(rs []recordJSON) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.ID+"="+*r.Document)
	}
	return out
}

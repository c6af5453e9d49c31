package e2e_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	compactorv1 "github.com/compactorhq/compactor/gen/compactor/v1"
	"github.com/compactorhq/compactor/internal/browsertest"
	"github.com/compactorhq/compactor/internal/sampletest"
)

// TestReplicasPausedPastLease shows the commit fence with real processes:
// replica A runs a slow compaction (the whole Debian sample, 5,000 records,
// in blocks of 500 under a 20 kB/s throughput cap, so its block writes take
// about ten seconds);
// it is paused (SIGSTOP) while writing, and replica B, started then, takes
// the job over once A's lease has expired and commits the follow-up. When A
// is resumed (SIGCONT) it finds its lease lost and commits nothing: the
// collection's version moved once, by B's job; A's job is FAILED
// "interrupted: lease of node A expired" with its version unchanged; and A
// keeps serving (/readyz, reads, ListNodes shows both alive).
func TestReplicasPausedPastLease(t *testing.T) {
	deadline := browsertest.Deadline(t)
	catalogURL := freshDatabase(t)
	s3 := startS3(t, deadline)
	bin := buildCompactor(t)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()

	a := startReplica(t, deadline, bin, "A", catalogURL, s3, append(slices.Clone(replicaFlags), "--max-throughput", "20kB", "--max-block-records", "500", "--min-block-records", "100", "--workers", "1")...)

	// ---- a collection with the whole sample, compacted slowly on A ----
	c, err := a.colls.CreateCollection(ctx, connect.NewRequest(&compactorv1.CreateCollectionRequest{Name: "debian", Dimension: 64}))
	if err != nil {
		t.Fatalf("CreateCollection on A: %v", err)
	}
	collID := c.Msg.GetCollection().GetId()
	ops := sampletest.Proto(t, sampletest.Base(t))
	for chunk := range slices.Chunk(ops, 1000) {
		if _, err := a.logs.PushLogs(ctx, connect.NewRequest(&compactorv1.PushLogsRequest{CollectionId: collID, Records: chunk})); err != nil {
			t.Fatalf("PushLogs on A: %v", err)
		}
	}
	res, err := a.compactions.Compact(ctx, connect.NewRequest(&compactorv1.CompactRequest{CollectionIds: []string{collID}, Reason: "fencing test"}))
	if err != nil {
		t.Fatalf("Compact on A: %v", err)
	}
	jobID := res.Msg.GetJobs()[0].GetJob().GetId()

	// Pause A once its job writes blocks (the progress it persists with
	// each lease renewal says so).
	for {
		j := getJob(t, ctx, a, jobID)
		if j.GetState() != compactorv1.JobState_JOB_STATE_QUEUED && j.GetState() != compactorv1.JobState_JOB_STATE_RUNNING {
			t.Fatalf("job %s ended (%s) before A was paused: the throughput cap did not make it slow enough", jobID, j.GetState())
		}
		if j.GetState() == compactorv1.JobState_JOB_STATE_RUNNING && strings.HasPrefix(j.GetProgress().GetPhase(), "writing") {
			break
		}
		waitTick(t, deadline, "see A's job write blocks")
	}
	a.signal(t, syscall.SIGSTOP)
	pausedAt := time.Now()
	t.Logf("paused A (SIGSTOP) while its job %s wrote blocks", jobID)

	// ---- B takes the job over and commits ----
	b := startReplica(t, deadline, bin, "B", catalogURL, s3, replicaFlags...)
	var followUp *compactorv1.Job
	for followUp == nil {
		for _, j := range listCollectionJobs(t, ctx, b, collID) {
			if j.GetId() != jobID && j.GetState() == compactorv1.JobState_JOB_STATE_SUCCEEDED {
				followUp = j
			}
		}
		if followUp == nil {
			waitTick(t, deadline, "see B take A's job over and its follow-up succeed")
		}
	}
	t.Logf("B's follow-up %s SUCCEEDED %s after A was paused (lease 3s)", followUp.GetId(), time.Since(pausedAt).Round(time.Millisecond))
	if followUp.GetNode() != "B" || followUp.GetVersionBefore() != 0 || followUp.GetVersionAfter() != 1 {
		t.Fatalf("follow-up %s: node %s, version %d -> %d; want B, 0 -> 1", followUp.GetId(), followUp.GetNode(), followUp.GetVersionBefore(), followUp.GetVersionAfter())
	}

	// ---- resume A: it must find its lease lost and commit nothing ----
	logBefore := len(a.log())
	a.signal(t, syscall.SIGCONT)
	for !strings.Contains(a.log()[logBefore:], "job lease lost") {
		a.waitTick(t, deadline, "log that its job's lease was lost after SIGCONT")
	}
	t.Logf("A, resumed, gave the job up: %s", lastLine(a.log()[logBefore:], "job lease lost"))

	if !a.ready() {
		t.Errorf("A's /readyz does not answer 200 after it was resumed")
	}
	jobs := listCollectionJobs(t, ctx, a, collID)
	if len(jobs) != 2 {
		t.Fatalf("ListCompactions of the collection on A: %d jobs, want A's interrupted job and B's follow-up:\n%s", len(jobs), jobSummary(jobs))
	}
	commits := 0
	for _, j := range jobs {
		switch j.GetId() {
		case jobID:
			if j.GetState() != compactorv1.JobState_JOB_STATE_FAILED || j.GetError() != "interrupted: lease of node A expired" || j.GetNode() != "A" {
				t.Errorf("A's job %s: %s %q on %s; want FAILED \"interrupted: lease of node A expired\" on A", jobID, j.GetState(), j.GetError(), j.GetNode())
			}
			if j.GetVersionAfter() != j.GetVersionBefore() {
				t.Errorf("A's job %s moved the version %d -> %d", jobID, j.GetVersionBefore(), j.GetVersionAfter())
			}
		case followUp.GetId():
			if j.GetState() != compactorv1.JobState_JOB_STATE_SUCCEEDED || j.GetNode() != "B" || j.GetVersionAfter() != 1 {
				t.Errorf("B's follow-up changed after A resumed: %s on %s, version %d", j.GetState(), j.GetNode(), j.GetVersionAfter())
			}
		}
		if j.GetVersionAfter() > j.GetVersionBefore() {
			commits++
		}
	}
	col, err := a.colls.GetCollection(ctx, connect.NewRequest(&compactorv1.GetCollectionRequest{Id: collID}))
	if err != nil {
		t.Fatalf("GetCollection on A: %v", err)
	}
	if v := col.Msg.GetCollection().GetSegmentVersion(); v != 1 || commits != 1 {
		t.Errorf("segment version %d after %d committing jobs; want 1 and 1 (B's follow-up alone)", v, commits)
	}
	if n := col.Msg.GetCollection().GetRecordCount(); n != int64(len(ops)) {
		t.Errorf("record count %d, want %d", n, len(ops))
	}
	// A keeps serving: it reads the version B committed, and lists both
	// nodes alive.
	if got := readAll(t, ctx, a, collID); len(got) != len(ops) {
		t.Errorf("GetRecords on A: %d records, want %d", len(got), len(ops))
	}
	for {
		nodes, err := a.compactions.ListNodes(ctx, connect.NewRequest(&compactorv1.ListNodesRequest{}))
		if err != nil {
			t.Fatalf("ListNodes on A: %v", err)
		}
		alive := map[string]bool{}
		for _, n := range nodes.Msg.GetNodes() {
			alive[n.GetName()] = n.GetAlive()
		}
		if alive["A"] && alive["B"] {
			break
		}
		a.waitTick(t, deadline, fmt.Sprintf("list A and B alive (now %v)", alive))
	}
}

func getJob(t *testing.T, ctx context.Context, r *replica, id string) *compactorv1.Job {
	t.Helper()
	res, err := r.compactions.GetCompaction(ctx, connect.NewRequest(&compactorv1.GetCompactionRequest{JobId: id}))
	if err != nil {
		t.Fatalf("GetCompaction %s on %s: %v", id, r.name, err)
	}
	return res.Msg.GetJob()
}

func listCollectionJobs(t *testing.T, ctx context.Context, r *replica, collID string) []*compactorv1.Job {
	t.Helper()
	res, err := r.compactions.ListCompactions(ctx, connect.NewRequest(&compactorv1.ListCompactionsRequest{CollectionId: collID, PageSize: 1000}))
	if err != nil {
		t.Fatalf("ListCompactions of %s on %s: %v", collID, r.name, err)
	}
	return res.Msg.GetJobs()
}

// lastLine is the last line of text containing substr.
func lastLine(text, substr string) string {
	lines := strings.Split(text, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.Contains(lines[i], substr) {
			return lines[i]
		}
	}
	return ""
}

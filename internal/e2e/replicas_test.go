package e2e_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	compactorv1 "github.com/compactorhq/compactor/gen/compactor/v1"
	"github.com/compactorhq/compactor/internal/browsertest"
	"github.com/compactorhq/compactor/internal/sampletest"
)

const (
	replicaCollections = 30
	// recordsPerCollection keeps the run short: the first 500 records of
	// the Debian sample go into each collection (all ADDs).
	recordsPerCollection = 500
)

// replicaFlags are the serve flags of the test replicas: short leases and
// polls so a takeover happens within seconds, and no scheduler (the only
// jobs are the ones the test asks for).
var replicaFlags = []string{
	"--lease-duration", "3s", "--lease-renew-interval", "500ms",
	"--status-poll-interval", "200ms", "--heartbeat-interval", "500ms",
	"--schedule-interval", "1h",
}

// TestReplicasKillOne runs three `compactor serve` replicas on one
// PostgreSQL catalog and one VersityGW bucket, pushes the Debian sample into
// 30 collections through replica 1, compacts them all through replica 2,
// and kills replica 3 (SIGKILL) while it runs jobs, restarting nothing. The
// other two take its jobs over once their leases expire: every job ends,
// none stays RUNNING; each dead job ended FAILED "interrupted: lease of node
// r3 expired" and its follow-up SUCCEEDED; every collection reads exactly
// the records pushed; the jobs were run by all three nodes (ListCompactions
// and the job pages on replica 1); replica 1 lists replica 3 as gone
// (ListNodes and its page's Nodes panel). It logs how long the takeover
// took.
func TestReplicasKillOne(t *testing.T) {
	deadline := browsertest.Deadline(t)
	catalogURL := freshDatabase(t)
	s3 := startS3(t, deadline)
	bin := buildCompactor(t)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()

	// A throughput cap makes a 500-record job last about a second, so
	// replica 3 is seen running jobs before it has finished them all.
	flags := append(slices.Clone(replicaFlags), "--max-throughput", "50KiB", "--workers", "2")
	r1 := startReplica(t, deadline, bin, "r1", catalogURL, s3, flags...)
	r2 := startReplica(t, deadline, bin, "r2", catalogURL, s3, flags...)
	r3 := startReplica(t, deadline, bin, "r3", catalogURL, s3, flags...)

	// ---- the base load, through replica 1 ----
	ops := sampletest.Proto(t, sampletest.Base(t))[:recordsPerCollection]
	want := map[string]*compactorv1.Record{}
	for _, op := range ops {
		want[op.GetId()] = &compactorv1.Record{Id: op.GetId(), Embedding: op.GetEmbedding(), Document: op.Document, Metadata: op.GetMetadata()}
	}
	var collIDs []string
	for i := range replicaCollections {
		c, err := r1.colls.CreateCollection(ctx, connect.NewRequest(&compactorv1.CreateCollectionRequest{Name: fmt.Sprintf("debian-%02d", i), Dimension: 64}))
		if err != nil {
			t.Fatalf("CreateCollection on r1: %v", err)
		}
		id := c.Msg.GetCollection().GetId()
		res, err := r1.logs.PushLogs(ctx, connect.NewRequest(&compactorv1.PushLogsRequest{CollectionId: id, Records: ops}))
		if err != nil {
			t.Fatalf("PushLogs into %s on r1: %v", id, err)
		}
		if int(res.Msg.GetCount()) != len(ops) {
			t.Fatalf("PushLogs appended %d records, want %d", res.Msg.GetCount(), len(ops))
		}
		collIDs = append(collIDs, id)
	}

	// ---- compact all through replica 2 ----
	compactAt := time.Now()
	res, err := r2.compactions.Compact(ctx, connect.NewRequest(&compactorv1.CompactRequest{All: true, Reason: "replicas test"}))
	if err != nil {
		t.Fatalf("Compact all on r2: %v", err)
	}
	if n := len(res.Msg.GetJobs()); n != replicaCollections {
		t.Fatalf("Compact all returned %d jobs, want %d", n, replicaCollections)
	}

	// ---- kill replica 3 while it runs jobs ----
	// Once it has finished at least one job (so the history shows work of
	// all three nodes) and is running others.
	var r3Running []string
	r3Done := 0
	for len(r3Running) == 0 || r3Done == 0 {
		r3Running, r3Done = nil, 0
		active := 0
		for _, j := range listJobs(t, ctx, r1) {
			switch j.GetState() {
			case compactorv1.JobState_JOB_STATE_RUNNING:
				active++
				if j.GetNode() == r3.name {
					r3Running = append(r3Running, j.GetId())
				}
			case compactorv1.JobState_JOB_STATE_QUEUED:
				active++
			case compactorv1.JobState_JOB_STATE_SUCCEEDED:
				if j.GetNode() == r3.name {
					r3Done++
				}
			}
		}
		if active == 0 {
			t.Fatalf("every job ended before replica 3 was seen running one after finishing one (%d finished on r3)", r3Done)
		}
		if len(r3Running) == 0 || r3Done == 0 {
			waitTick(t, deadline, "see replica 3 run a job after finishing one")
		}
	}
	r3.signal(t, syscall.SIGKILL)
	killedAt := time.Now()
	<-r3.exited
	t.Logf("killed replica 3 (SIGKILL) %s after Compact, after it finished %d jobs, while it ran jobs %v", killedAt.Sub(compactAt).Round(time.Millisecond), r3Done, r3Running)

	// ---- wait until no job is QUEUED or RUNNING ----
	for len(listJobs(t, ctx, r1, compactorv1.JobState_JOB_STATE_QUEUED, compactorv1.JobState_JOB_STATE_RUNNING)) > 0 {
		waitTick(t, deadline, "see every job end")
	}
	t.Logf("every job ended %s after the kill", time.Since(killedAt).Round(time.Millisecond))

	// ---- the jobs ----
	jobs := listJobs(t, ctx, r1)
	byNode := map[string]int{} // SUCCEEDED jobs
	ranOn := map[string]int{}  // jobs in any state
	var interrupted []*compactorv1.Job
	for _, j := range jobs {
		ranOn[j.GetNode()]++
		switch j.GetState() {
		case compactorv1.JobState_JOB_STATE_SUCCEEDED:
			byNode[j.GetNode()]++
		case compactorv1.JobState_JOB_STATE_FAILED:
			if j.GetError() != "interrupted: lease of node r3 expired" {
				t.Errorf("job %s of %s FAILED on %s with %q; the only failures expected are r3's interrupted jobs", j.GetId(), j.GetCollectionId(), j.GetNode(), j.GetError())
				continue
			}
			interrupted = append(interrupted, j)
		default:
			t.Errorf("job %s of %s is %s after every job ended", j.GetId(), j.GetCollectionId(), j.GetState())
		}
	}
	t.Logf("%d jobs; by node: %v, of which SUCCEEDED: %v; %d interrupted on r3", len(jobs), ranOn, byNode, len(interrupted))
	for _, n := range []string{"r1", "r2", "r3"} {
		if byNode[n] == 0 {
			t.Errorf("no job SUCCEEDED on %s: the jobs were not spread over the three nodes (%v)", n, byNode)
		}
	}
	if len(ranOn) != 3 {
		t.Errorf("ListCompactions on r1 shows jobs on nodes %v, want exactly r1, r2, r3", ranOn)
	}
	if len(interrupted) == 0 {
		t.Fatalf("no job FAILED \"interrupted: lease of node r3 expired\"; r3 was running %v when killed", r3Running)
	}
	var lastTakeover, lastInterrupt time.Duration
	for _, j := range interrupted {
		if j.GetNode() != "r3" {
			t.Errorf("interrupted job %s names node %q, want r3", j.GetId(), j.GetNode())
		}
		if j.GetVersionAfter() != j.GetVersionBefore() {
			t.Errorf("interrupted job %s moved the version %d -> %d", j.GetId(), j.GetVersionBefore(), j.GetVersionAfter())
		}
		var followUp *compactorv1.Job
		for _, f := range jobs {
			if f.GetCollectionId() == j.GetCollectionId() && f.GetState() == compactorv1.JobState_JOB_STATE_SUCCEEDED &&
				!f.GetCreateTime().AsTime().Before(j.GetFinishTime().AsTime()) {
				followUp = f
			}
		}
		if followUp == nil {
			t.Errorf("interrupted job %s of %s has no SUCCEEDED follow-up", j.GetId(), j.GetCollectionId())
			continue
		}
		if followUp.GetNode() == "r3" || followUp.GetAttempt() != j.GetAttempt()+1 {
			t.Errorf("follow-up %s of %s: node %s attempt %d, want r1 or r2 and attempt %d", followUp.GetId(), j.GetId(), followUp.GetNode(), followUp.GetAttempt(), j.GetAttempt()+1)
		}
		took := followUp.GetFinishTime().AsTime().Sub(killedAt)
		lastTakeover = max(lastTakeover, took)
		interruptedAfter := j.GetFinishTime().AsTime().Sub(killedAt)
		lastInterrupt = max(lastInterrupt, interruptedAfter)
		t.Logf("r3's job %s (%s): interrupted %s after the kill; follow-up %s on %s started %s and SUCCEEDED %s after the kill",
			j.GetId(), j.GetCollectionName(), interruptedAfter.Round(time.Millisecond), followUp.GetId(), followUp.GetNode(),
			followUp.GetStartTime().AsTime().Sub(killedAt).Round(time.Millisecond), took.Round(time.Millisecond))
	}
	t.Logf("takeover: r3's %d running jobs were declared interrupted within %s of the kill, and redone and committed elsewhere within %s (lease 3s, poll 200ms; the follow-ups queue behind the other jobs)",
		len(interrupted), lastInterrupt.Round(time.Millisecond), lastTakeover.Round(time.Millisecond))

	// ---- every collection reads exactly what was pushed ----
	for _, id := range collIDs {
		got := readAll(t, ctx, r1, id)
		if len(got) != len(want) {
			t.Errorf("collection %s: %d records, want %d", id, len(got), len(want))
		}
		for rid, rec := range got {
			if !proto.Equal(rec, want[rid]) {
				t.Errorf("collection %s: record %s = %v, want %v", id, rid, rec, want[rid])
				break
			}
		}
		c, err := r1.colls.GetCollection(ctx, connect.NewRequest(&compactorv1.GetCollectionRequest{Id: id}))
		if err != nil {
			t.Fatalf("GetCollection %s: %v", id, err)
		}
		if col := c.Msg.GetCollection(); col.GetBacklog() != 0 || col.GetSegmentVersion() != 1 || col.GetRecordCount() != recordsPerCollection {
			t.Errorf("collection %s: backlog %d, version %d, %d records; want 0, 1 (one commit), %d", id, col.GetBacklog(), col.GetSegmentVersion(), col.GetRecordCount(), recordsPerCollection)
		}
	}

	// ---- replica 1 shows replica 3 gone ----
	for {
		nodes, err := r1.compactions.ListNodes(ctx, connect.NewRequest(&compactorv1.ListNodesRequest{}))
		if err != nil {
			t.Fatalf("ListNodes on r1: %v", err)
		}
		alive := map[string]bool{}
		for _, n := range nodes.Msg.GetNodes() {
			alive[n.GetName()] = n.GetAlive()
		}
		if !alive["r3"] && alive["r1"] && alive["r2"] {
			if _, ok := alive["r3"]; !ok {
				t.Fatalf("ListNodes on r1 does not list r3 at all: %v", alive)
			}
			break
		}
		waitTick(t, deadline, fmt.Sprintf("see r3 gone and r1, r2 alive in ListNodes on r1 (now %v)", alive))
	}

	// ---- replica 1's page: the nodes, and a job of each node ----
	page := getPage(t, ctx, r1, "/")
	for n, state := range map[string]string{"r1": "alive", "r2": "alive", "r3": "gone"} {
		if !strings.Contains(page, `data-testid="node-row" data-node="`+n+`" data-state="`+state+`"`) {
			t.Errorf("r1's page does not show node %s as %s in its Nodes panel", n, state)
		}
	}
	nodeField := regexp.MustCompile(`<dd data-field="node">\s*([^<\s]+)`)
	for _, n := range []string{"r1", "r2", "r3"} {
		i := slices.IndexFunc(jobs, func(j *compactorv1.Job) bool { return j.GetNode() == n })
		if i < 0 {
			continue // reported above
		}
		m := nodeField.FindStringSubmatch(getPage(t, ctx, r1, "/jobs/"+jobs[i].GetId()))
		if m == nil || m[1] != n {
			t.Errorf("r1's page of job %s does not name node %s (got %v)", jobs[i].GetId(), n, m)
		}
	}

	select {
	case <-r1.exited:
		t.Fatalf("r1 exited")
	case <-r2.exited:
		t.Fatalf("r2 exited")
	default:
	}
}

// listJobs returns every job (all pages) of ListCompactions on r in the
// given states (every state when none).
func listJobs(t *testing.T, ctx context.Context, r *replica, states ...compactorv1.JobState) []*compactorv1.Job {
	t.Helper()
	var jobs []*compactorv1.Job
	token := ""
	for {
		res, err := r.compactions.ListCompactions(ctx, connect.NewRequest(&compactorv1.ListCompactionsRequest{States: states, PageSize: 1000, PageToken: token}))
		if err != nil {
			t.Fatalf("ListCompactions on %s: %v", r.name, err)
		}
		jobs = append(jobs, res.Msg.GetJobs()...)
		if token = res.Msg.GetNextPageToken(); token == "" {
			return jobs
		}
	}
}

// readAll reads a whole collection on r with paged GetRecords, by id.
func readAll(t *testing.T, ctx context.Context, r *replica, collID string) map[string]*compactorv1.Record {
	t.Helper()
	got := map[string]*compactorv1.Record{}
	token := ""
	for pages := 0; ; pages++ {
		if pages > 1000 {
			t.Fatalf("GetRecords on %s: more than 1000 pages; the page token does not advance", collID)
		}
		res, err := r.colls.GetRecords(ctx, connect.NewRequest(&compactorv1.GetRecordsRequest{CollectionId: collID, PageSize: 200, PageToken: token}))
		if err != nil {
			t.Fatalf("GetRecords %s on %s: %v", collID, r.name, err)
		}
		for _, rec := range res.Msg.GetRecords() {
			if _, dup := got[rec.GetId()]; dup {
				t.Fatalf("GetRecords %s: record %s on two pages", collID, rec.GetId())
			}
			got[rec.GetId()] = rec
		}
		if token = res.Msg.GetNextPageToken(); token == "" {
			return got
		}
	}
}

// waitTick fails the test once the deadline has passed, and otherwise
// waits a little before the caller looks again.
func waitTick(t *testing.T, deadline time.Time, what string) {
	t.Helper()
	if time.Now().After(deadline) {
		t.Fatalf("did not %s by the test's deadline", what)
	}
	time.Sleep(50 * time.Millisecond)
}

// getPage returns the HTML of the page at path on r, failing the test
// unless it answers 200.
func getPage(t *testing.T, ctx context.Context, r *replica, path string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s on %s: %v", path, r.name, err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s on %s: %d %v", path, r.name, res.StatusCode, err)
	}
	return string(body)
}

// jobSummary is a one-line-per-job dump for failure messages.
func jobSummary(jobs []*compactorv1.Job) string {
	lines := make([]string, 0, len(jobs))
	for _, j := range jobs {
		lines = append(lines, fmt.Sprintf("%s %s %s node=%s v%d->%d %s %s", j.GetId(), j.GetCollectionName(), j.GetState(), j.GetNode(), j.GetVersionBefore(), j.GetVersionAfter(), j.GetError(), j.GetNote()))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

package rpc_test

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	compactorv1 "github.com/compactorhq/compactor/gen/compactor/v1"
	"github.com/compactorhq/compactor/internal/server"
)

// A corrupt block, and a block missing from the blob store while the
// current version lists it, answer DATA_LOSS naming the collection and the
// block key (relative to the bucket, never a server path) on every
// protocol; the collection's compactions fail and dead-letter it after the
// usual count; another collection compacts and reads as before; the metric
// counts it.
func TestCorruptBlockIsDataLossAndDeadLettersItsCollection(t *testing.T) {
	t.Run("damaged", func(t *testing.T) {
		testDataLoss(t, "corrupt block collections/%s/blocks/", func(path string) error {
			return os.WriteFile(path, []byte("PAR1 damaged PAR1"), 0o600)
		})
	})
	t.Run("deleted", func(t *testing.T) {
		testDataLoss(t, "block collections/%s/blocks/", os.Remove)
	})
}

// testDataLoss damages every block of a collection with damage, then checks
// the answers as TestCorruptBlockIsDataLossAndDeadLettersItsCollection
// says; named (with the collection id for %s) is what messages must hold.
func testDataLoss(t *testing.T, named string, damage func(path string) error) {
	f := newFixture(t, fixtureOptions{configure: func(c *server.Config) {
		c.Segment.MaxBlockRecords, c.Segment.MinBlockRecords = 8, 2
		c.Manager.DeadLetterAfter = 2
	}})
	c := f.clients(protocols[0])
	bad := createCollection(t, c, "bad", 2).GetId()
	good := createCollection(t, c, "good", 2).GetId()
	for _, id := range []string{bad, good} {
		push(t, c, id, smallRecords(0, 40, 2))
		wantSucceeded(t, waitJob(t, c, compactOne(t, c, id).GetJob().GetId()))
	}

	blocks, err := filepath.Glob(filepath.Join(f.cfg.DataDir, "blobs", "collections", bad, "blocks", "*.parquet"))
	if err != nil || len(blocks) < 2 {
		t.Fatalf("blocks of the collection: %v, %v", blocks, err)
	}
	for _, b := range blocks {
		if err := damage(b); err != nil {
			t.Fatal(err)
		}
	}
	wantNamed := func(what, msg string) {
		t.Helper()
		if !strings.Contains(msg, bad) || !strings.Contains(msg, fmt.Sprintf(named, bad)) {
			t.Errorf("%s: %q does not name the collection and the block key", what, msg)
		}
		if strings.Contains(msg, f.cfg.DataDir) {
			t.Errorf("%s: %q shows a server path", what, msg)
		}
	}
	for _, p := range protocols {
		c := f.clients(p)
		_, err := c.colls.GetRecords(t.Context(), connect.NewRequest(&compactorv1.GetRecordsRequest{CollectionId: bad, Ids: []string{"r00001"}}))
		wantNamed(p.name+": GetRecords by id", wantCode(t, err, connect.CodeDataLoss).Message())
		_, err = c.colls.GetRecords(t.Context(), connect.NewRequest(&compactorv1.GetRecordsRequest{CollectionId: bad, PageSize: 10}))
		wantNamed(p.name+": GetRecords paged", wantCode(t, err, connect.CodeDataLoss).Message())
		_, err = c.colls.QueryRecords(t.Context(), connect.NewRequest(&compactorv1.QueryRecordsRequest{CollectionId: bad, K: 3,
			Embeddings: []*compactorv1.QueryEmbedding{{Values: []float32{1, 2}}}}))
		wantNamed(p.name+": QueryRecords", wantCode(t, err, connect.CodeDataLoss).Message())
	}

	push(t, c, bad, smallRecords(0, 1, 2)) // an update of r00000, in a damaged block
	for i := range f.cfg.Manager.DeadLetterAfter {
		j := waitJob(t, c, compactOne(t, c, bad).GetJob().GetId())
		if j.GetState() != compactorv1.JobState_JOB_STATE_FAILED {
			t.Fatalf("compaction %d of the damaged collection ended %v", i+1, j.GetState())
		}
		wantNamed("job error", j.GetError())
	}
	// The manager records the failure just after the job row shows FAILED.
	coll := getCollection(t, c, bad)
	for deadline := time.Now().Add(60 * time.Second); coll.GetFailureCount() < int32(f.cfg.Manager.DeadLetterAfter) && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
		coll = getCollection(t, c, bad)
	}
	if !coll.GetDeadLettered() || coll.GetFailureCount() != int32(f.cfg.Manager.DeadLetterAfter) {
		t.Errorf("damaged collection: dead-lettered %v after %d failures, want dead-lettered after %d",
			coll.GetDeadLettered(), coll.GetFailureCount(), f.cfg.Manager.DeadLetterAfter)
	}

	push(t, c, good, smallRecords(40, 5, 2))
	wantSucceeded(t, waitJob(t, c, compactOne(t, c, good).GetJob().GetId()))
	if recs := allRecords(t, c, good, 7); len(recs) != 45 {
		t.Errorf("healthy collection: %d records, want 45", len(recs))
	}
	if coll := getCollection(t, c, good); coll.GetDeadLettered() || coll.GetFailureCount() != 0 {
		t.Errorf("healthy collection: dead-lettered %v, %d failures", coll.GetDeadLettered(), coll.GetFailureCount())
	}

	res, err := f.srv.Client().Get(f.srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	// 3 reads (2 GetRecords, 1 QueryRecords) × 4 protocols, and the compactions.
	want := fmt.Sprintf(`compactor_corrupt_blocks_total{kind="block"} %d`, 3*len(protocols)+f.cfg.Manager.DeadLetterAfter)
	if !strings.Contains(string(body), want) {
		t.Errorf("/metrics lacks %q", want)
	}
}

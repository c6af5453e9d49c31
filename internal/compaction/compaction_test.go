package compaction

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/jobtype"
	"github.com/compactorhq/compactor/internal/materialize"
	"github.com/compactorhq/compactor/internal/segment"
	"github.com/compactorhq/compactor/internal/segment/segmenttest"
)

var (
	propSteps = flag.Int("compaction.steps", 0, "steps of the property test per run (0: 400, or 100 under -race; run longer with e.g. -compaction.steps=20000)")
	propSeed  = flag.Uint64("compaction.seed", 1, "seed of the property test")
	propRuns  = flag.Int("compaction.runs", 3, "independent runs of the property test, seeds seed..seed+runs-1")
)

func emb(v float32) []float32 { return []float32{v, v, v} }

func doc(s string) *string { return &s }

// TestPropertyAgainstModel: random sequences of the four operations over a
// small id space, compactions at random points with a small maximum size (so
// a backlog takes several compactions), GC at random points, and reads
// compared with the model after every step.
func TestPropertyAgainstModel(t *testing.T) {
	steps := *propSteps
	if steps == 0 {
		steps = 400
		if raceEnabled {
			steps = 100
		}
	}
	for run := range uint64(*propRuns) + 1 {
		// One more run spills nearly every log batch to disk as a sorted
		// run.
		seed, spill := *propSeed+run, run == uint64(*propRuns)
		if spill {
			seed = *propSeed
		}
		t.Run(fmt.Sprintf("seed=%d/spill=%t", seed, spill), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
			ec := envConfig{maxRecords: 1 + r.IntN(12), batchRecords: 1 + r.IntN(5), maxBlock: 4 + r.IntN(6), minBlock: 2, spill: spill}
			// Deltas with small thresholds, so that runs write deltas over
			// deltas and fold them (by rows and by count) often.
			ec.seg = segment.Config{DeltaMinBlocks: 1 + r.IntN(2), DeltaMaxFraction: 0.3 + r.Float64()/2, DeltaFoldRecords: 4 + r.IntN(24), MaxDeltas: 1 + r.IntN(4)}
			e := newEnv(t, ec)
			g := gen{r: r, ids: 24, dim: 3}
			var deltas, folds int // compactions that wrote a delta, and that folded deltas
			lastDeltas := 0
			for step := range steps {
				switch k := r.IntN(10); {
				case k < 5:
					e.push(g.batch(1 + r.IntN(8))...)
				case k < 9:
					before := e.coll()
					res := e.compact()
					if res.OffsetEnd < before.CompactionOffset || e.coll().CompactionOffset != res.OffsetEnd {
						t.Fatalf("step %d: offset moved from %d to %d (result %d)", step, before.CompactionOffset, e.coll().CompactionOffset, res.OffsetEnd)
					}
					if got, want := e.coll().RecordCount, int64(len(e.model)); res.OpRecordsRead > 0 && res.Remaining == 0 && got != want {
						t.Fatalf("step %d: record count %d after catching up, model has %d", step, got, want)
					}
					if n := e.deltaCount(); n > lastDeltas {
						deltas++
						lastDeltas = n
					} else if n < lastDeltas {
						folds++
						lastDeltas = n
					}
				default:
					e.clock.Advance(DefaultConfig().GCGrace / 2)
					if _, err := e.comp.GC(e.ctx, e.id); err != nil {
						t.Fatalf("step %d: gc: %v", step, err)
					}
				}
				e.check(fmt.Sprintf("step %d", step))
			}
			e.compactAll()
			e.check("end")
			if got := e.coll().RecordCount; got != int64(len(e.model)) {
				t.Fatalf("record count %d, model has %d", got, len(e.model))
			}
			e.checkNoGarbage("end")
			e.check("after gc")
			if deltas == 0 || folds == 0 {
				t.Errorf("%d compactions wrote a delta, %d folded deltas: the run did not cover both", deltas, folds)
			}
		})
	}
}

// deltaCount returns the number of deltas of the collection's current
// version.
func (e *env) deltaCount() int {
	e.t.Helper()
	key := e.coll().ManifestKey
	if key == "" {
		return 0
	}
	m, err := e.seg.ReadManifest(e.ctx, key)
	if err != nil {
		e.t.Fatal(err)
	}
	return len(m.Deltas)
}

func TestAddCompactDeleteAddReturnsOnlyTheSecondAdd(t *testing.T) {
	e := newEnv(t, envConfig{maxRecords: 100, batchRecords: 10, maxBlock: 8, minBlock: 2})
	e.push(materialize.OperationRecord{Op: materialize.OpAdd, ID: "x", Embedding: emb(1), Document: doc("first"), Metadata: materialize.Metadata{"a": "1"}})
	e.compact()
	e.push(materialize.OperationRecord{Op: materialize.OpDelete, ID: "x"},
		materialize.OperationRecord{Op: materialize.OpAdd, ID: "x", Embedding: emb(2), Document: doc("second")})
	e.check("before the second compaction")
	e.compact()
	res, err := e.comp.GetRecords(e.ctx, e.id, []string{"x"})
	if err != nil {
		t.Fatal(err)
	}
	want := materialize.Record{ID: "x", Embedding: emb(2), Document: doc("second")}
	e.compare("x", res.Records, []materialize.Record{want})
}

func TestReAddingExistingIDsKeepsTheRecordCount(t *testing.T) {
	e := newEnv(t, envConfig{maxRecords: 1000, batchRecords: 100, maxBlock: 16, minBlock: 4})
	var ops []materialize.OperationRecord
	for i := range 50 {
		ops = append(ops, materialize.OperationRecord{Op: materialize.OpAdd, ID: fmt.Sprintf("r%03d", i), Embedding: emb(float32(i))})
	}
	e.push(ops...)
	e.compact()
	for i := range ops {
		ops[i].Embedding = emb(-1) // re-added: ignored
	}
	e.push(ops...)
	e.compact()
	if c := e.coll(); c.RecordCount != 50 {
		t.Fatalf("record count %d after re-adding, want 50", c.RecordCount)
	}
	e.check("after re-adding")
}

func TestFirstCompactionOfNRecordsMakesExactlyN(t *testing.T) {
	e := newEnv(t, envConfig{maxRecords: 10_000, batchRecords: 100, maxBlock: 64, minBlock: 16})
	const n = 1000
	var ops []materialize.OperationRecord
	for i := range n {
		ops = append(ops, materialize.OperationRecord{Op: materialize.OpAdd, ID: fmt.Sprintf("r%05d", i), Embedding: emb(float32(i))})
	}
	e.push(ops...)
	res := e.compact()
	if res.RecordCount != n || e.coll().RecordCount != n {
		t.Fatalf("record count %d (catalog %d), want %d", res.RecordCount, e.coll().RecordCount, n)
	}
	// The records' positions in the segment (block by block, in id order)
	// are its internal numbering: 0..n-1, no holes, no duplicates.
	m, err := e.seg.ReadManifest(e.ctx, e.coll().ManifestKey)
	if err != nil {
		t.Fatal(err)
	}
	pos := 0
	for _, b := range m.Blocks {
		recs, err := e.seg.ReadBlock(e.ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		if int64(len(recs)) != b.Records {
			t.Fatalf("block %s lists %d records and holds %d", b.Key, b.Records, len(recs))
		}
		for _, r := range recs {
			if want := fmt.Sprintf("r%05d", pos); r.ID != want {
				t.Fatalf("record at position %d is %s, want %s", pos, r.ID, want)
			}
			pos++
		}
	}
	if pos != n {
		t.Fatalf("segment holds %d records, want %d", pos, n)
	}
}

func TestMetadataNullDeletesOmittedKeyStays(t *testing.T) {
	e := newEnv(t, envConfig{maxRecords: 100, batchRecords: 10, maxBlock: 8, minBlock: 2})
	e.push(materialize.OperationRecord{Op: materialize.OpAdd, ID: "x", Embedding: emb(1), Metadata: materialize.Metadata{"gone": "a", "kept": "b"}})
	e.compact()
	e.push(materialize.OperationRecord{Op: materialize.OpUpdate, ID: "x", Metadata: materialize.Metadata{"gone": nil, "new": true}})
	e.compact()
	res, err := e.comp.GetRecords(e.ctx, e.id, []string{"x"})
	if err != nil {
		t.Fatal(err)
	}
	want := materialize.Record{ID: "x", Embedding: emb(1), Metadata: materialize.Metadata{"kept": "b", "new": true}}
	e.compare("x", res.Records, []materialize.Record{want})
}

func TestNothingToCompact(t *testing.T) {
	e := newEnv(t, envConfig{maxRecords: 100, batchRecords: 10, maxBlock: 8, minBlock: 2})
	res := e.compact()
	if res.Note != NoteNothingToCompact || res.VersionAfter != 0 || res.OpRecordsRead != 0 {
		t.Fatalf("result %+v, want nothing to compact", res)
	}
	if _, err := e.comp.Compact(e.ctx, "no-such-collection", Options{}); !errors.Is(err, catalog.ErrNotFound) {
		t.Fatalf("unknown collection: %v, want ErrNotFound", err)
	}
}

func TestACompactionThatChangesNoRecordSaysWhy(t *testing.T) {
	e := newEnv(t, envConfig{maxRecords: 100, batchRecords: 10, maxBlock: 8, minBlock: 2})
	adds := func() {
		for i := range 20 {
			e.push(materialize.OperationRecord{Op: materialize.OpAdd, ID: fmt.Sprintf("r%02d", i), Embedding: emb(float32(i))})
		}
	}
	adds()
	if res := e.compact(); res.Note != "" || res.RecordsWritten != 20 {
		t.Fatalf("first compaction %+v, want 20 records written and no note", res)
	}
	adds() // the same ids again: every ADD is ignored
	res := e.compact()
	if res.OpRecordsRead != 20 || res.RecordsWritten != 0 || res.Note != NoteNoChange {
		t.Fatalf("compaction of duplicate ADDs %+v, want 20 read, 0 written and the note %q", res, NoteNoChange)
	}
	// Deleting records changes the collection although no record is written.
	for i := range 20 {
		e.push(materialize.OperationRecord{Op: materialize.OpDelete, ID: fmt.Sprintf("r%02d", i)})
	}
	if res := e.compact(); res.Note != "" {
		t.Fatalf("compaction of deletes %+v, want no note", res)
	}
}

// scenario builds the same state every time: a compacted base and a tail.
func scenario(t *testing.T) *env {
	e := newEnv(t, envConfig{maxRecords: 1000, batchRecords: 4, maxBlock: 6, minBlock: 2})
	g := gen{r: rand.New(rand.NewPCG(7, 7)), ids: 30, dim: 3}
	e.push(g.batch(40)...)
	e.compact()
	e.push(g.batch(25)...)
	return e
}

// putsOfCompaction is the number of blob writes the scenario's second
// compaction makes.
func putsOfCompaction(t *testing.T) int {
	e := scenario(t)
	before := e.faulty.Puts()
	e.compact()
	return e.faulty.Puts() - before
}

func TestFailingBlobWriteAtEveryIndex(t *testing.T) {
	n := putsOfCompaction(t)
	if n < 3 {
		t.Fatalf("the scenario writes only %d blobs; it must exercise several", n)
	}
	for i := 1; i <= n; i++ {
		t.Run(fmt.Sprintf("put %d of %d", i, n), func(t *testing.T) {
			e := scenario(t)
			before := e.coll()
			e.faulty.FailPutAt = e.faulty.Puts() + i
			_, err := e.comp.Compact(e.ctx, e.id, Options{})
			if !errors.Is(err, segmenttest.ErrInjected) {
				t.Fatalf("compact: %v, want the injected fault", err)
			}
			if !IsTransient(err) {
				t.Fatalf("a failed blob write must count as transient: %v", err)
			}
			if after := e.coll(); after.SegmentVersion != before.SegmentVersion || after.CompactionOffset != before.CompactionOffset {
				t.Fatalf("catalog changed: version %d→%d, offset %d→%d", before.SegmentVersion, after.SegmentVersion, before.CompactionOffset, after.CompactionOffset)
			}
			e.check("after the failed compaction")
			e.compact()
			e.check("after the next compaction")
			e.checkNoGarbage("after the next compaction")
		})
	}
}

func TestConflictingCommitExactlyOneWins(t *testing.T) {
	e := scenario(t)
	first := e.faulty.Puts() + 1
	blocked, release := make(chan struct{}), make(chan struct{})
	e.faulty.BeforePut = func(n int, _ string) {
		if n == first {
			close(blocked)
			<-release
		}
	}
	errA := make(chan error, 1)
	go func() {
		_, err := e.comp.Compact(e.ctx, e.id, Options{})
		errA <- err
	}()
	<-blocked
	resB, errB := e.comp.Compact(e.ctx, e.id, Options{}) // B runs while A waits in its first write
	close(release)
	err := <-errA
	if errB != nil {
		t.Fatalf("the compaction that committed first failed: %v", errB)
	}
	var ce *catalog.ConflictError
	if !errors.As(err, &ce) || !errors.Is(err, catalog.ErrConflict) || !IsTransient(err) {
		t.Fatalf("the losing compaction returned %v, want a transient *catalog.ConflictError", err)
	}
	if c := e.coll(); c.SegmentVersion != resB.VersionAfter || c.CompactionOffset != resB.OffsetEnd {
		t.Fatalf("catalog at version %d offset %d, want the winner's %d and %d", c.SegmentVersion, c.CompactionOffset, resB.VersionAfter, resB.OffsetEnd)
	}
	e.check("after the race")
	// The loser removed what it wrote at once: every blob is referenced
	// by a committed version, before any GC.
	versions, _ := e.cat.ListVersions(e.ctx, e.id)
	referenced := map[string]bool{}
	for _, v := range versions {
		referenced[v.ManifestKey] = true
		m, err := e.seg.ReadManifest(e.ctx, v.ManifestKey)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range m.Blocks {
			referenced[b.Key] = true
		}
		for _, k := range indexKeys(m) {
			referenced[k] = true
		}
	}
	blobs, _ := e.blobs.List(e.ctx, "collections/"+e.id+"/")
	for _, b := range blobs {
		if !referenced[b.Key] {
			t.Fatalf("the losing compaction left %s behind", b.Key)
		}
	}
	e.checkNoGarbage("after the race")
}

func TestCancellationAtEveryBatchBoundary(t *testing.T) {
	// Count the progress reports (batch boundaries) of a full run.
	e := scenario(t)
	var boundaries int
	if _, err := e.comp.Compact(e.ctx, e.id, Options{Progress: func(jobtype.Progress) { boundaries++ }}); err != nil {
		t.Fatal(err)
	}
	if boundaries < 4 {
		t.Fatalf("only %d batch boundaries; the scenario must have several", boundaries)
	}
	for k := 1; k <= boundaries; k++ {
		t.Run(fmt.Sprintf("boundary %d of %d", k, boundaries), func(t *testing.T) {
			e := scenario(t)
			before := e.coll()
			ctx, cancel := context.WithCancel(e.ctx)
			defer cancel()
			var seen int
			var phase string
			_, err := e.comp.Compact(ctx, e.id, Options{Progress: func(p jobtype.Progress) {
				seen++
				if seen == k {
					phase = string(p.Phase)
					cancel()
				}
			}})
			switch {
			case phase == "committing":
				// Past the last boundary: the commit is not interrupted.
				if err != nil {
					t.Fatalf("cancelled during the commit: %v, want the commit to complete", err)
				}
			case !errors.Is(err, context.Canceled):
				t.Fatalf("cancelled at boundary %d (%s): %v, want context.Canceled", k, phase, err)
			default:
				if after := e.coll(); after.SegmentVersion != before.SegmentVersion || after.CompactionOffset != before.CompactionOffset {
					t.Fatalf("a cancelled compaction committed: version %d→%d", before.SegmentVersion, after.SegmentVersion)
				}
				// What it wrote is gone at once.
				for _, key := range e.faulty.PutKeys() {
					if !slices.Contains(referencedKeys(t, e), key) {
						if _, err := e.blobs.Get(e.ctx, key); err == nil {
							t.Fatalf("cancelled compaction left %s", key)
						}
					}
				}
			}
			e.check("after cancellation")
			e.compactAll()
			e.check("after the next compaction")
			e.checkNoGarbage("after the next compaction")
		})
	}
}

func referencedKeys(t *testing.T, e *env) []string {
	versions, err := e.cat.ListVersions(e.ctx, e.id)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, v := range versions {
		keys = append(keys, v.ManifestKey)
		m, err := e.seg.ReadManifest(e.ctx, v.ManifestKey)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range m.Blocks {
			keys = append(keys, b.Key)
		}
		keys = append(keys, indexKeys(m)...)
	}
	return keys
}

func TestProcessKilledMidCompactionLosesNothing(t *testing.T) {
	n := putsOfCompaction(t)
	for i := 0; i < n; i++ { // dies after i successful writes, before the commit
		t.Run(fmt.Sprintf("after put %d of %d", i, n), func(t *testing.T) {
			e := scenario(t)
			before := e.coll()
			start := e.faulty.Puts()
			if i == 0 {
				e.crash.kill(true)
			}
			e.faulty.BeforePut = func(k int, _ string) {
				// Put k itself goes through; from the next one on nothing
				// is written or cleaned up.
				if k == start+i {
					e.crash.kill(true)
				}
			}
			if _, err := e.comp.Compact(e.ctx, e.id, Options{}); err == nil {
				t.Fatal("a compaction whose process died reported success")
			}
			e.faulty.BeforePut = nil
			e.crash.kill(false)
			// The next start: a new compactor over the same storage.
			if after := e.coll(); after.CompactionOffset != before.CompactionOffset {
				t.Fatalf("offset moved to %d", after.CompactionOffset)
			}
			next, err := New(e.cat, e.seg, e.comp.cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			e.comp = next
			e.check("after the restart")
			e.compactAll()
			e.check("after compacting again")
			e.checkNoGarbage("after compacting again")
		})
	}
}

// TestCopyOnWrite: after compacting 10 new ids into a collection of
// 100,000 (deltas off: ten ids over nine blocks would make one), the new
// version reuses every block but those whose ranges hold the new ids.
func TestCopyOnWrite(t *testing.T) {
	if testing.Short() {
		t.Skip("loads 100,000 records")
	}
	e := newEnv(t, envConfig{maxRecords: 200_000, batchRecords: 10_000, maxBlock: 2048, minBlock: 512, seg: segment.Config{NoDeltas: true}, noIndex: true})
	const n = 100_000
	ops := make([]materialize.OperationRecord, 0, 10_000)
	for i := range n {
		ops = append(ops, materialize.OperationRecord{Op: materialize.OpAdd, ID: fmt.Sprintf("id-%07d", i*10), Embedding: []float32{float32(i), 1}})
		if len(ops) == cap(ops) {
			e.push(ops...)
			ops = ops[:0]
		}
	}
	e.compact()
	base, err := e.seg.ReadManifest(e.ctx, e.coll().ManifestKey)
	if err != nil {
		t.Fatal(err)
	}
	// Ten new ids spread over the key space.
	r := rand.New(rand.NewPCG(3, 3))
	var fresh []materialize.OperationRecord
	owners := map[int]bool{}
	for range 10 {
		id := fmt.Sprintf("id-%07d", r.IntN(n)*10+5)
		fresh = append(fresh, materialize.OperationRecord{Op: materialize.OpAdd, ID: id, Embedding: []float32{-1, -1}})
		// The owner: the last block whose MinID <= id (the first owns
		// anything below it).
		owner := 0
		for i, b := range base.Blocks {
			if b.MinID <= id {
				owner = i
			}
		}
		owners[owner] = true
	}
	e.push(fresh...)
	res := e.compact()
	if res.BlocksWritten != len(owners) {
		t.Fatalf("wrote %d blocks, want %d: the blocks owning the new ids", res.BlocksWritten, len(owners))
	}
	if want := len(base.Blocks) - len(owners); res.BlocksReused != want {
		t.Fatalf("reused %d of %d blocks, want %d", res.BlocksReused, len(base.Blocks), want)
	}
	next, err := e.seg.ReadManifest(e.ctx, e.coll().ManifestKey)
	if err != nil {
		t.Fatal(err)
	}
	baseKeys := map[string]bool{}
	for _, b := range base.Blocks {
		baseKeys[b.Key] = true
	}
	var shared int
	for _, b := range next.Blocks {
		if baseKeys[b.Key] {
			shared++
		}
	}
	if shared != len(base.Blocks)-len(owners) {
		t.Fatalf("the new version references %d blocks of the base, want %d", shared, len(base.Blocks)-len(owners))
	}
	if next.RecordCount != n+10 {
		t.Fatalf("record count %d, want %d", next.RecordCount, n+10)
	}
	got, err := e.comp.GetRecords(e.ctx, e.id, []string{fresh[0].ID, "id-0000000"})
	if err != nil || len(got.Records) != 2 {
		t.Fatalf("read back: %d records, %v", len(got.Records), err)
	}
}

// getHook runs hook once, before the first Get of a block.
type getHook struct {
	segment.Blobs
	once sync.Once
	hook func()
}

func (g *getHook) Get(ctx context.Context, key string) ([]byte, error) {
	if strings.Contains(key, "/blocks/") {
		g.once.Do(g.hook)
	}
	return g.Blobs.Get(ctx, key)
}

// TestReadRetriesWhenGCRemovesItsVersion: a read that opened a version
// which GC then collects (two newer versions committed, its blocks past the
// grace period) reads the newer version instead of failing.
func TestReadRetriesWhenGCRemovesItsVersion(t *testing.T) {
	e := newEnv(t, envConfig{maxRecords: 100, batchRecords: 10, maxBlock: 64, minBlock: 16})
	put := func(v float32) {
		e.push(materialize.OperationRecord{Op: materialize.OpUpsert, ID: "x", Embedding: emb(v)})
		e.compact()
	}
	put(1)
	hooked := &getHook{Blobs: e.blobs}
	hooked.hook = func() { // between the reader's manifest and its block
		// The reader takes longer than the grace (it runs on another
		// replica: this process's pins do not cover it): version 1 is
		// retired, then collected a grace later.
		put(2)
		put(3)
		for range 2 {
			if _, err := e.comp.GC(e.ctx, e.id); err != nil {
				t.Errorf("gc: %v", err)
			}
			e.clock.Advance(2 * DefaultConfig().GCGrace)
		}
	}
	reader, err := New(e.cat, segment.NewStore(hooked, segment.Config{MaxBlockRecords: 64, MinBlockRecords: 16}, e.clock.Now), e.comp.cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := reader.GetRecords(e.ctx, e.id, []string{"x"})
	if err != nil {
		t.Fatalf("read across a GC: %v", err)
	}
	e.compare("x", res.Records, []materialize.Record{{ID: "x", Embedding: emb(3)}})
	if n := reader.readRetries.Load(); n != 1 {
		t.Fatalf("%d read retries, want 1 (the version read was collected)", n)
	}
}

// A compaction reports its phases in order, each once: reading log,
// materializing, writing blocks, indexing, committing; the result says
// whether the writer wrote blocks or a delta, and a delta's progress
// counts no block.
func TestProgressReportsThePhasesInOrderAndTheResultTheKindOfWrite(t *testing.T) {
	e := newEnv(t, envConfig{maxRecords: 1000, batchRecords: 50, maxBlock: 16, minBlock: 4,
		seg: segment.Config{DeltaMinBlocks: 2, DeltaMaxFraction: 0.5}})
	phases := func(opts *Options) *[]jobtype.Progress {
		var seen []jobtype.Progress
		opts.Progress = func(p jobtype.Progress) {
			if len(seen) == 0 || seen[len(seen)-1].Phase != p.Phase {
				seen = append(seen, p)
			} else {
				seen[len(seen)-1] = p
			}
		}
		return &seen
	}
	want := []jobtype.Phase{jobtype.PhaseReading, jobtype.PhaseMaterializing, jobtype.PhaseWriting, jobtype.PhaseIndexing, jobtype.PhaseCommitting}
	order := func(seen []jobtype.Progress) []jobtype.Phase {
		var out []jobtype.Phase
		for _, p := range seen {
			out = append(out, p.Phase)
		}
		return out
	}
	var ops []materialize.OperationRecord
	for i := range 160 {
		ops = append(ops, materialize.OperationRecord{Op: materialize.OpAdd, ID: fmt.Sprintf("k%04d", i*10), Embedding: emb(float32(i))})
	}
	e.push(ops...)
	var opts Options
	seen := phases(&opts)
	res, err := e.comp.Compact(e.ctx, e.id, opts)
	if err != nil {
		t.Fatal(err)
	}
	if got := order(*seen); !slices.Equal(got, want) || res.WriteKind != segment.WroteBlocks {
		t.Fatalf("first compaction: phases %v, wrote %q; want %v and blocks", got, res.WriteKind, want)
	}
	if w := (*seen)[2]; w.BlocksTotal < 10 || w.BlocksWritten != w.BlocksTotal {
		t.Errorf("writing blocks ended at %d of %d blocks, want at least 10 of as many", w.BlocksWritten, w.BlocksTotal)
	}

	// Updates in 8 of the 10 blocks: a delta.
	ops = ops[:0]
	for i := range 8 {
		ops = append(ops, materialize.OperationRecord{Op: materialize.OpUpdate, ID: fmt.Sprintf("k%04d", i*200), Document: doc("updated")})
	}
	e.push(ops...)
	opts = Options{}
	seen = phases(&opts)
	if res, err = e.comp.Compact(e.ctx, e.id, opts); err != nil {
		t.Fatal(err)
	}
	if got := order(*seen); !slices.Equal(got, want) || res.WriteKind != segment.WroteDelta || e.deltaCount() != 1 {
		t.Fatalf("spread update: phases %v, wrote %q, %d deltas; want %v and one delta", got, res.WriteKind, e.deltaCount(), want)
	}
	if w := (*seen)[2]; w.BlocksTotal != 0 || w.BlocksWritten != 0 || res.BlocksWritten != 0 {
		t.Errorf("a delta's progress counts %d of %d blocks (result %d), want none", w.BlocksWritten, w.BlocksTotal, res.BlocksWritten)
	}
	e.check("after the delta")
}

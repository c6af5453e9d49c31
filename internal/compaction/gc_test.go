package compaction

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/catalog/catalogtest"
	"github.com/compactorhq/compactor/internal/clock"
	"github.com/compactorhq/compactor/internal/materialize"
	"github.com/compactorhq/compactor/internal/segment"
	"github.com/compactorhq/compactor/internal/segment/segmenttest"
)

// epochGate bounds how much fake time a read may span: the clock only moves
// forward (advance) once every read that began before the previous advance
// has ended, so a read spans at most one step of the clock. It stands for
// "reads take less than the grace period" on a real clock.
type epochGate struct {
	mu     sync.Mutex
	cond   *sync.Cond
	epoch  int
	active map[int]int // epoch a read began in → reads still running
}

func newEpochGate() *epochGate {
	g := &epochGate{active: make(map[int]int)}
	g.cond = sync.NewCond(&g.mu)
	return g
}

func (g *epochGate) begin() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.active[g.epoch]++
	return g.epoch
}

func (g *epochGate) end(e int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.active[e]--; g.active[e] == 0 {
		delete(g.active, e)
	}
	g.cond.Broadcast()
}

// advance waits until no read from before the current epoch runs, then
// calls move (which advances the clock) and starts the next epoch.
func (g *epochGate) advance(move func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for slices.ContainsFunc(slices.Collect(maps.Keys(g.active)), func(e int) bool { return e < g.epoch }) {
		g.cond.Wait()
	}
	move()
	g.epoch++
}

// pausingBlobs holds the first block Get after arm until the test lets it
// go: the read then has its version's manifest but no block yet.
type pausingBlobs struct {
	segment.Blobs
	mu     sync.Mutex
	armed  bool
	paused chan<- chan struct{} // receives the channel that resumes the read
	done   <-chan struct{}
}

func (p *pausingBlobs) arm() {
	p.mu.Lock()
	p.armed = true
	p.mu.Unlock()
}

func (p *pausingBlobs) Get(ctx context.Context, key string) ([]byte, error) {
	p.mu.Lock()
	pause := p.armed && strings.Contains(key, "/blocks/")
	if pause {
		p.armed = false
	}
	p.mu.Unlock()
	if pause {
		resume := make(chan struct{})
		select {
		case p.paused <- resume:
			<-resume
		case <-p.done:
		}
	}
	return p.Blobs.Get(ctx, key)
}

// TestReadsSurviveGCAtTheMostAggressiveSettings: with --versions-to-keep 1
// and --gc-grace at its minimum, reads on other replicas (Compactors of
// their own over the same catalog and bucket: this process's pins do not
// protect them) run across 100 compactions, each followed by GC. One reader
// is held between its manifest and its blocks during every compaction and
// GC; the fake clock moves by half the grace per compaction, but never
// further than one step during a read. No read fails and none needs the
// retry on a fresh view.
func TestReadsSurviveGCAtTheMostAggressiveSettings(t *testing.T) {
	const (
		compactions = 100
		regions     = 4  // each compaction rewrites one id region of 4
		perRegion   = 40 // ids per region
	)
	ctx := context.Background()
	fake := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	cat := catalogtest.OpenConfig(t, catalog.Config{Now: fake.Now})
	shared := segmenttest.NewClocked(segmenttest.NewMem(t), fake.Now)
	segCfg := segment.Config{MaxBlockRecords: 32, MinBlockRecords: 8}
	cfg := DefaultConfig()
	cfg.VersionsToKeep, cfg.GCGrace = 1, MinGCGrace
	if err := cfg.Validate(); err != nil {
		t.Fatalf("the most aggressive settings are refused: %v", err)
	}
	newCompactor := func(b segment.Blobs) *Compactor {
		c, err := New(cat, segment.NewStore(b, segCfg, fake.Now), cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	writer := newCompactor(shared)
	done := make(chan struct{})
	paused := make(chan chan struct{})
	pausing := &pausingBlobs{Blobs: shared, paused: paused, done: done}
	slow, fast := newCompactor(pausing), newCompactor(shared)

	coll, err := cat.CreateCollection(ctx, "gc-race", 3)
	if err != nil {
		t.Fatal(err)
	}
	id := func(region, i int) string { return fmt.Sprintf("r%d-%03d", region, i) }
	var ids []string
	var ops []materialize.OperationRecord
	for r := range regions {
		for i := range perRegion {
			ids = append(ids, id(r, i))
			ops = append(ops, materialize.OperationRecord{Op: materialize.OpUpsert, ID: id(r, i), Embedding: emb(0)})
		}
	}
	push := func(ops []materialize.OperationRecord) {
		t.Helper()
		if _, _, err := cat.AppendLog(ctx, coll.ID, ops, catalog.AppendLimits{}); err != nil {
			t.Fatal(err)
		}
	}
	push(ops)
	if _, err := writer.Compact(ctx, coll.ID, Options{}); err != nil {
		t.Fatal(err)
	}

	gate := newEpochGate()
	var (
		wg        sync.WaitGroup
		mu        sync.Mutex
		readErrs  []error
		reads     int
		wrongSize int
	)
	read := func(c *Compactor, n int) {
		e := gate.begin()
		defer gate.end(e)
		var err error
		var got int
		if n%2 == 0 {
			var res ReadResult
			res, err = c.GetRecords(ctx, coll.ID, ids)
			got = len(res.Records)
		} else {
			after := ""
			for err == nil {
				var res ReadResult
				if res, err = c.ListRecords(ctx, coll.ID, after, 50); err != nil {
					break
				}
				got += len(res.Records)
				if after = res.Next; after == "" {
					break
				}
			}
		}
		mu.Lock()
		defer mu.Unlock()
		reads++
		if err != nil {
			readErrs = append(readErrs, err)
		} else if got != len(ids) {
			wrongSize++
		}
	}
	// The slow reader runs one read after the other, each held during one
	// compaction and GC; the fast one reads once per compaction, unheld
	// (paced, so that the race detector's cost stays bounded).
	tick := make(chan struct{}, 1)
	wg.Add(2)
	go func() {
		defer wg.Done()
		for n := 0; ; n++ {
			select {
			case <-done:
				return
			default:
			}
			pausing.arm()
			read(slow, n)
		}
	}()
	go func() {
		defer wg.Done()
		for n := 0; ; n++ {
			select {
			case <-done:
				return
			case <-tick:
				read(fast, n)
			}
		}
	}()

	var retired, deleted int
	for i := range compactions {
		resume := <-paused // a read holds its version's manifest
		select {
		case tick <- struct{}{}:
		default:
		}
		region := i % regions
		batch := make([]materialize.OperationRecord, perRegion)
		for j := range batch {
			batch[j] = materialize.OperationRecord{Op: materialize.OpUpsert, ID: id(region, j), Embedding: emb(float32(i + 1))}
		}
		push(batch)
		if _, err := writer.Compact(ctx, coll.ID, Options{}); err != nil {
			t.Fatalf("compaction %d: %v", i, err)
		}
		res, err := writer.GC(ctx, coll.ID)
		if err != nil {
			t.Fatalf("gc after compaction %d: %v", i, err)
		}
		retired += res.VersionsRetired
		deleted += res.VersionsDeleted
		close(resume)
		gate.advance(func() { fake.Advance(cfg.GCGrace / 2) })
	}
	close(done)
	wg.Wait()

	if len(readErrs) > 0 {
		t.Errorf("%d of %d reads failed; first: %v", len(readErrs), reads, readErrs[0])
	}
	if wrongSize > 0 {
		t.Errorf("%d of %d reads returned a wrong number of records", wrongSize, reads)
	}
	if n := slow.readRetries.Load() + fast.readRetries.Load(); n > 0 {
		t.Errorf("%d reads were retried on a fresh view: GC deleted a version in use", n)
	}
	// GC did work: versions were retired and collected as they went.
	if retired < compactions-1 || deleted < compactions-4 {
		t.Errorf("GC retired %d and deleted %d versions over %d compactions", retired, deleted, compactions)
	}
	t.Logf("%d reads across %d compactions; GC retired %d and deleted %d versions", reads, compactions, retired, deleted)
}

// TestGCGraceFloor: a grace under MinGCGrace is refused with an error that
// names the flag and the minimum.
func TestGCGraceFloor(t *testing.T) {
	for _, grace := range []time.Duration{-time.Second, 0, time.Millisecond, MinGCGrace - time.Millisecond} {
		cfg := DefaultConfig()
		cfg.GCGrace = grace
		err := cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), "--gc-grace") || !strings.Contains(err.Error(), MinGCGrace.String()) {
			t.Errorf("--gc-grace %s: %v, want an error naming the flag and the minimum %s", grace, err, MinGCGrace)
		}
	}
	cfg := DefaultConfig()
	cfg.GCGrace, cfg.VersionsToKeep = MinGCGrace, 1
	if err := cfg.Validate(); err != nil {
		t.Errorf("the minimum grace with one version kept: %v", err)
	}
}

// TestGCSparesWhatThisProcessUses: however long a read or a compaction of
// this process takes, its GC never deletes the version the read uses or the
// blocks the compaction has written but not committed yet.
func TestGCSparesWhatThisProcessUses(t *testing.T) {
	e := newEnv(t, envConfig{maxRecords: 100, batchRecords: 10, maxBlock: 4, minBlock: 2})
	e.comp.cfg.VersionsToKeep = 1
	gcAgeing := func() {
		for range 2 {
			e.clock.Advance(2 * e.comp.cfg.GCGrace)
			if _, err := e.comp.GC(e.ctx, e.id); err != nil {
				t.Errorf("gc: %v", err)
			}
		}
	}
	put := func(v float32) {
		e.push(materialize.OperationRecord{Op: materialize.OpUpsert, ID: "x", Embedding: emb(v)})
		e.compact()
	}
	put(1)

	{ // A read paused between its manifest and its block.
		hooked := &getHook{Blobs: e.blobs}
		reader, err := New(e.cat, segment.NewStore(hooked, segment.Config{MaxBlockRecords: 4, MinBlockRecords: 2}, e.clock.Now), e.comp.cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		reader.pins = e.comp.pins // the same process
		hooked.hook = func() {
			put(2)
			put(3)
			gcAgeing()
		}
		res, err := reader.GetRecords(e.ctx, e.id, []string{"x"})
		if err != nil {
			t.Fatalf("read across GC: %v", err)
		}
		e.compare("x", res.Records, []materialize.Record{{ID: "x", Embedding: emb(1)}})
		if n := reader.readRetries.Load(); n != 0 {
			t.Fatalf("%d read retries, want none", n)
		}
		gcAgeing()
		e.checkNoGarbage("after the read")
	}

	{ // A compaction paused between its blocks and its manifest.
		hold := make(chan struct{})
		reached := make(chan struct{})
		var once sync.Once
		e.faulty.BeforePut = func(n int, key string) {
			if strings.Contains(key, "/manifests/") {
				once.Do(func() { close(reached); <-hold })
			}
		}
		defer func() { e.faulty.BeforePut = nil }()
		e.push(materialize.OperationRecord{Op: materialize.OpUpsert, ID: "y", Embedding: emb(4)})
		errc := make(chan error, 1)
		go func() {
			_, err := e.comp.Compact(e.ctx, e.id, Options{})
			errc <- err
		}()
		<-reached // its blocks are written, its manifest not yet
		gcAgeing()
		close(hold)
		if err := <-errc; err != nil {
			t.Fatalf("compaction across GC: %v", err)
		}
		e.model.apply(materialize.OperationRecord{Op: materialize.OpUpsert, ID: "x", Embedding: emb(3)})
		e.model.apply(materialize.OperationRecord{Op: materialize.OpUpsert, ID: "y", Embedding: emb(4)})
		e.check("after the compaction")
		e.checkNoGarbage("after the compaction")
	}
}

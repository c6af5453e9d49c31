package segment

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"math"
	"sync"

	"github.com/compactorhq/compactor/internal/materialize"
)

// Writer builds one new segment version from a base: Write (blocks by
// copy-on-write, or a delta), then WriteManifest; Abort on any failure
// deletes every blob this writer wrote. It is used by one goroutine
// (Write's encoders are its own).
type Writer struct {
	s            *Store
	collectionID string
	base         *Manifest
	// loaded holds the records of the base blocks read so far, by index in
	// base.Blocks.
	loaded map[int][]materialize.Record
	// written is every key this writer put (or tried to put), for Abort.
	written []string
	// unsynced are the blocks put through a deferredSyncer and not yet
	// made durable (Write does before it returns).
	unsynced []string
	mu       sync.Mutex // guards written and unsynced while encoders put blocks
	wrote    bool
	// overlay is the base's deltas merged, once read (delta.go).
	overlay *[]Change
	// onChange is WriteOptions.OnChange of the write running.
	onChange func(id string, r *materialize.Record)
	// check holds the figures of the write's verification (digest.go's
	// identity: what was written = what was consumed + what changed).
	check writeCheck
}

// writeCheck accumulates, during one write, the two sides of the
// identity a write must keep: the records and digest of the blocks it
// writes equal those of the base blocks it consumes (rewrites or drops)
// adjusted by the changes it applies (minus each record replaced or
// deleted, plus each record inserted or updated). Reused blocks are on
// neither side. A writer that loses, duplicates or alters a record breaks
// it.
type writeCheck struct {
	applied        Digest // Σ H(new) − Σ H(old) over the changes applied
	appliedRecords int64  // inserted − deleted
	consumed       map[int]Digest
	consumedCount  map[int]int64
}

// consume records base block i, read as recs, as an input of the write:
// its digest as recorded (so that a block damaged since it was written is
// caught), else as read.
func (c *writeCheck) consume(ref BlockRef, i int, recs []materialize.Record) {
	if _, ok := c.consumed[i]; ok {
		return
	}
	if c.consumed == nil {
		c.consumed, c.consumedCount = make(map[int]Digest), make(map[int]int64)
	}
	d, err := ParseDigest(ref.Digest)
	if err != nil {
		d = DigestOf(recs)
	}
	c.consumed[i], c.consumedCount[i] = d, int64(len(recs))
}

// apply records a change of a record from old to new (nil: absent).
func (c *writeCheck) apply(old, new *materialize.Record) {
	if old != nil {
		c.applied = c.applied.Sub(RecordHash(old))
		c.appliedRecords--
	}
	if new != nil {
		c.applied = c.applied.Add(RecordHash(new))
		c.appliedRecords++
	}
}

// NewWriter starts a new version of collectionID over base (nil: the
// collection has no segment yet).
func (s *Store) NewWriter(collectionID string, base *Manifest) *Writer {
	return &Writer{s: s, collectionID: collectionID, base: base, loaded: make(map[int][]materialize.Record)}
}

func (w *Writer) baseBlocks() []BlockRef {
	if w.base == nil {
		return nil
	}
	return w.base.Blocks
}

// load returns the records of base block i, reading it once.
func (w *Writer) load(ctx context.Context, i int) ([]materialize.Record, error) {
	if recs, ok := w.loaded[i]; ok {
		return recs, nil
	}
	recs, err := w.s.ReadBlock(ctx, w.base.Blocks[i])
	if err != nil {
		return nil, err
	}
	w.loaded[i] = recs
	w.check.consume(w.base.Blocks[i], i, recs)
	return recs, nil
}

// Get returns the current records of the given ids in the base, its
// deltas applied (missing ids absent). For ids few enough to make a delta
// over many blocks it reads only their rows; otherwise it loads and keeps
// the blocks whose ranges hold the ids, so that a block Write does not
// read them again.
func (w *Writer) Get(ctx context.Context, ids []string) (map[string]materialize.Record, error) {
	if out, ok, err := w.getFew(ctx, ids); ok { // delta.go: few ids over many blocks
		return out, err
	}
	out := make(map[string]materialize.Record)
	byBlock, order := idsByBlock(w.baseBlocks(), ids)
	for _, i := range order {
		recs, err := w.load(ctx, i)
		if err != nil {
			return nil, err
		}
		for _, id := range byBlock[i] {
			if r, ok := findRecord(recs, id); ok {
				// A copy: the loaded block is the input of Write.
				out[id] = r.Clone()
			}
		}
	}
	if err := w.overlayGet(ctx, ids, out); err != nil {
		return nil, err
	}
	return out, nil
}

// WriteKind is what a Write wrote: blocks or a delta.
type WriteKind string

// The kinds of write (WriteReport.Kind).
const (
	// WroteBlocks: the changes were merged into the blocks whose id
	// ranges they fall into, which were rewritten (copy-on-write), with
	// every delta of the base folded into them; the new version lists no
	// deltas.
	WroteBlocks WriteKind = "blocks"
	// WroteDelta: the changes were written as one delta file that the new
	// version lists after the base's deltas, beside the base's blocks,
	// all reused by reference (none when no change changed anything).
	WroteDelta WriteKind = "delta"
)

// WriteOptions are the settings of one Write.
type WriteOptions struct {
	// CompactionOffset is the manifest's compaction offset.
	CompactionOffset int64
	// Dimension is the collection's embedding dimension; 0: the first
	// record's (then every record must have it).
	Dimension int
	// OnKind, when set, is called once from Write's goroutine with the
	// kind of write chosen, before anything is written.
	OnKind func(WriteKind)
	// OnBlock, when set, is called with the bytes of each block written,
	// in manifest order, from Write's goroutine (never for a delta).
	OnBlock func(bytes int64)
	// Encoders is how many blocks are encoded and put at once (<= 0:
	// GOMAXPROCS). Blocks keep their id order in the manifest whatever
	// order they finish in; at most Encoders blocks are in flight, so
	// memory stays bounded.
	Encoders int
	// OnChange, when set, is called from Write's goroutine for each
	// record id whose record the write changes against the base: r is the
	// new record (inserted or updated) or nil (deleted). The record is the
	// writer's: a caller that keeps it past the call copies what it keeps.
	OnChange func(id string, r *materialize.Record)
	// Window is the most records a run being built holds before it sends
	// blocks of 15/16 of MaxBlockRecords from its front (<= 0: 8 blocks'
	// worth); the rest of a run is cut into near-equal blocks. It bounds
	// the writer's memory whatever the size of the change.
	Window int
}

// Write applies a stream of changes (sorted by ID, unique; a Change with
// Ops is folded onto its id's current record with the materialization
// rules) to the base and writes the blobs of the new version, deciding
// itself whether as a delta or as blocks (DESIGN.md §7b; docs/storage.md,
// "Deltas"):
//
//  1. It first gathers the stream in memory while it holds at most
//     maxDeltaChanges(base) operation records (a Change with a Record
//     counts one): none when the base has no blocks, Config.NoDeltas is
//     set or the base lists Config.MaxDeltas deltas; else what the base's
//     deltas may still take before they are folded (Config.DeltaFoldRecords,
//     by default max(MaxBlockRecords, 10% of the base's records), less the
//     rows they hold), within what one delta file can hold back to a read
//     (about 46,000 rows at dimension 128). A longer stream is written as
//     blocks, streaming on past what was gathered.
//  2. A stream gathered whole is written as a delta when the base has
//     deltas already (folding them for a change that touches few blocks
//     would rewrite every block they touch), or when its changes touch
//     more than Config.DeltaMinBlocks blocks and number less than
//     Config.DeltaMaxFraction of those blocks' records; else as blocks.
//
// Blocks: untouched blocks are reused, changed ones rewritten, empty ones
// dropped, small ones merged with a neighbour, runs cut into blocks of at
// most MaxBlockRecords (near-equal in size within opts.Window), every delta
// of the base folded into the blocks written; the writer holds one base
// block and the window, never the whole change set. A delta: the current
// records of the changed ids are read (only their rows, for few ids over
// many blocks), changes that change nothing (a delete of an absent id, a
// record equal to the current one) are left out, and the rest are written
// as one delta file (none when nothing is left; the version still moves
// on).
//
// ctx is checked before each blob write; an error the stream yields ends
// the write and is returned as it is; a change out of order, of another
// dimension or with unstorable metadata is an error naming it. It returns
// the new manifest (Version = base's + 1, not yet written: WriteManifest)
// and the report of what it wrote. On error the caller calls Abort. Write
// is called once per Writer.
func (w *Writer) Write(ctx context.Context, changes iter.Seq2[Change, error], opts WriteOptions) (*Manifest, WriteReport, error) {
	if err := w.begin(); err != nil {
		return nil, WriteReport{}, err
	}
	next, stop := iter.Pull2(changes)
	defer stop()
	gathered, whole, err := gather(next, w.s.maxDeltaChanges(w.base))
	if err != nil {
		return nil, WriteReport{}, err
	}
	kind := WroteBlocks
	if whole && w.s.preferDelta(w.base, gathered) {
		kind = WroteDelta
	}
	if opts.OnKind != nil {
		opts.OnKind(kind)
	}
	if kind == WroteDelta {
		return w.writeDelta(ctx, gathered, opts)
	}
	return w.writeBlocks(ctx, prefixed(gathered, next), opts)
}

// begin starts the one write of w: it refuses a second one, an invalid
// collection id and a base of another collection.
func (w *Writer) begin() error {
	if w.wrote {
		return errors.New("write segment: Write called twice on one Writer")
	}
	w.wrote = true
	if err := checkCollectionID(w.collectionID); err != nil {
		return fmt.Errorf("write segment: %w", err)
	}
	if w.base != nil && w.base.CollectionID != w.collectionID {
		return fmt.Errorf("write segment: base manifest is of collection %s, not %s", w.base.CollectionID, w.collectionID)
	}
	return nil
}

// gather pulls changes from next while they hold at most limit operation
// records (a Change with a Record counts one). whole: the stream ended
// within the limit, and changes is all of it. An error of the stream is
// returned as it is.
func gather(next func() (Change, error, bool), limit int64) (changes []Change, whole bool, err error) {
	if limit <= 0 {
		return nil, false, nil
	}
	var ops int64
	for {
		c, err, ok := next()
		if !ok {
			return changes, true, nil
		}
		if err != nil {
			return nil, false, err
		}
		changes = append(changes, c)
		if ops += int64(max(len(c.Ops), 1)); ops > limit {
			return changes, false, nil
		}
	}
}

// prefixed returns a pull function that yields first before what next
// yields.
func prefixed(first []Change, next func() (Change, error, bool)) func() (Change, error, bool) {
	return func() (Change, error, bool) {
		if len(first) > 0 {
			c := first[0]
			first[0] = Change{} // let the writer's copy be the only one
			first = first[1:]
			return c, nil, true
		}
		return next()
	}
}

// writeBlocks is Write's block write over the changes next yields.
func (w *Writer) writeBlocks(ctx context.Context, next func() (Change, error, bool), opts WriteOptions) (*Manifest, WriteReport, error) {
	report := WriteReport{Kind: WroteBlocks}
	w.onChange = opts.OnChange
	// The loaded base blocks are not needed after the write: let them go.
	defer clear(w.loaded)
	// The base's deltas go into the blocks this write rewrites.
	overlay, err := w.deltaOverlay(ctx)
	if err != nil {
		return nil, report, fmt.Errorf("write segment: fold deltas: %w", err)
	}
	if len(overlay) > 0 {
		next = foldDeltaStream(overlay, next)
		report.DeltasFolded = len(w.base.Deltas)
	}
	blocks := w.baseBlocks()
	m := &Manifest{
		FormatVersion:    formatVersion,
		CollectionID:     w.collectionID,
		Version:          1,
		CompactionOffset: opts.CompactionOffset,
		Dimension:        opts.Dimension,
		CreatedAt:        w.s.now().UTC().Round(0),
		Blocks:           []BlockRef{},
	}
	if w.base != nil {
		m.Version = w.base.Version + 1
	}
	src := &changeSource{next: next, dimension: opts.Dimension}
	out := newBlockSink(ctx, w, opts.Encoders, opts.OnBlock)
	lay := &layout{w: w, ctx: ctx, blocks: blocks, min: w.s.cfg.MinBlockRecords, max: w.s.cfg.MaxBlockRecords, out: out, openIdx: -1}
	lay.trimAt = max(cmp.Or(max(opts.Window, 0), 8*lay.max), 2*lay.max)
	err = w.merge(ctx, blocks, src, lay)
	if err == nil {
		err = lay.finish()
	}
	if err != nil {
		out.cancel() // stop the encoders in flight
	}
	refs, werr := out.wait()
	if err == nil {
		err = werr
	}
	if err != nil {
		return nil, report, err
	}
	if m.Dimension == 0 {
		m.Dimension = src.dimension
	}
	for _, r := range refs {
		m.Blocks = append(m.Blocks, r.ref)
		m.RecordCount += r.ref.Records
		if r.reused {
			report.BlocksReused++
			continue
		}
		report.BlocksWritten++
		report.RecordsWritten += r.ref.Records
		report.BytesWritten += r.ref.Bytes
	}
	report.BlocksDropped = len(blocks) - report.BlocksReused
	if err := w.verifyWrite(m, refs); err != nil {
		return nil, report, err
	}
	// Every block is durable before the manifest that lists it is written
	// (and so before a commit can reference it).
	if ds, ok := w.s.blobs.(deferredSyncer); ok && len(w.unsynced) > 0 {
		if err := ds.syncNames(ctx, w.unsynced); err != nil {
			return nil, report, fmt.Errorf("sync blocks: %w", err)
		}
		w.unsynced = nil
	}
	if err := checkManifest(m); err != nil {
		// A bug, not bad input: the plan must keep the invariants.
		return nil, report, fmt.Errorf("write segment: new manifest: %w", err)
	}
	return m, report, nil
}

// verifyWrite checks the identity of writeCheck over the blocks of the new
// manifest m (refs: its blocks, reused or written) and sets m.Digest, the
// sum of its blocks' digests, when every block has one (a block reused
// from a manifest written before digests has none). A write that breaks
// the identity is a *VerificationError of phase "compaction".
func (w *Writer) verifyWrite(m *Manifest, refs []*sinkSlot) error {
	var written, consumed Digest
	var writtenRecs, consumedRecs int64
	var sum Digest
	all := true
	for _, r := range refs {
		d, err := ParseDigest(r.ref.Digest)
		if err != nil {
			all = false
		}
		sum = sum.Add(d)
		if r.reused {
			continue
		}
		written = written.Add(d)
		writtenRecs += r.ref.Records
	}
	for i, d := range w.check.consumed {
		consumed = consumed.Add(d)
		consumedRecs += w.check.consumedCount[i]
	}
	// Base blocks read by Get but reused as they are are on neither side.
	for _, r := range refs {
		if !r.reused {
			continue
		}
		for i, b := range w.baseBlocks() {
			if b.Key == r.ref.Key {
				if d, ok := w.check.consumed[i]; ok {
					consumed = consumed.Sub(d)
					consumedRecs -= w.check.consumedCount[i]
				}
				break
			}
		}
	}
	want := consumed.Add(w.check.applied)
	wantRecs := consumedRecs + w.check.appliedRecords
	if written != want || writtenRecs != wantRecs {
		return &VerificationError{CollectionID: w.collectionID, Version: m.Version, Phase: "compaction",
			Problems: []Problem{{Kind: KindManifest, Key: "(version " + fmt.Sprint(m.Version) + ", not written)",
				What: fmt.Sprintf("the blocks written hold %d records digesting to %s; the base blocks rewritten with the changes applied hold %d digesting to %s",
					writtenRecs, written, wantRecs, want)}}}
	}
	if all {
		m.Digest = sum.String()
	}
	return nil
}

// changeSource pulls changes and checks them: ids non-empty, sorted and
// unique; records of the id, of the dimension, with storable metadata.
type changeSource struct {
	next      func() (Change, error, bool)
	n         int
	prev      string
	dimension int
	peeked    bool
	cur       Change
	done      bool
}

// peek returns the next change without consuming it (ok false at the end).
func (s *changeSource) peek() (Change, bool, error) {
	if s.peeked {
		return s.cur, true, nil
	}
	if s.done {
		return Change{}, false, nil
	}
	c, err, ok := s.next()
	if !ok {
		s.done = true
		return Change{}, false, nil
	}
	if err != nil {
		s.done = true
		return Change{}, false, err
	}
	if err := s.check(c); err != nil {
		s.done = true
		return Change{}, false, fmt.Errorf("write segment: %w", err)
	}
	s.cur, s.peeked = c, true
	return c, true, nil
}

func (s *changeSource) take() { s.peeked, s.cur = false, Change{} }

func (s *changeSource) check(c Change) error {
	i := s.n
	s.n++
	if c.ID == "" {
		return fmt.Errorf("change %d: empty id", i)
	}
	if i > 0 && s.prev >= c.ID {
		return fmt.Errorf("change %d: id %q not after %q (changes must be sorted by unique id)", i, c.ID, s.prev)
	}
	s.prev = c.ID
	if c.Ops == nil && c.Record != nil {
		if c.Record.ID != c.ID {
			return fmt.Errorf("change %q: record has id %q", c.ID, c.Record.ID)
		}
		return s.checkRecord(c.Record)
	}
	return nil
}

// checkRecord checks a record that goes into a block.
func (s *changeSource) checkRecord(r *materialize.Record) error {
	if s.dimension > 0 && len(r.Embedding) != s.dimension {
		return fmt.Errorf("change %q: embedding has %d dimensions, want %d", r.ID, len(r.Embedding), s.dimension)
	}
	if s.dimension == 0 && len(r.Embedding) > 0 {
		s.dimension = len(r.Embedding)
	}
	if err := checkMetadata(r.Metadata); err != nil {
		return fmt.Errorf("change %q: %w", r.ID, err)
	}
	return nil
}

// valueOver returns the record c leaves its id with over cur, the id's
// current record (nil when absent): c.Record, or c.Ops folded onto cur
// with the materialization rules (materialize.ApplyOwning: c's operation
// records are taken over; cur is not modified). nil: the id ends absent.
// It is the one place a compaction applies the rules: to the base block's
// record as blocks are rewritten, to the current record as a delta is
// written, and to a base delta's record as deltas are folded.
func (c Change) valueOver(cur *materialize.Record) *materialize.Record {
	if c.Ops == nil {
		return c.Record
	}
	return materialize.ApplyOwning(cur, c.Ops)
}

// resolve returns the value of change c over cur (the current record of
// c.ID, nil when absent: Change.valueOver), checked as a record that goes
// into a block.
func (s *changeSource) resolve(c Change, cur *materialize.Record) (*materialize.Record, error) {
	if c.Ops == nil {
		return c.Record, nil
	}
	r := c.valueOver(cur)
	if r != nil {
		if r.ID != c.ID {
			return nil, fmt.Errorf("write segment: change %q: operation records of id %q", c.ID, r.ID)
		}
		if err := s.checkRecord(r); err != nil {
			return nil, fmt.Errorf("write segment: %w", err)
		}
	}
	return r, nil
}

// baseRecords returns the records of base block i, in id order: the one
// place the writer reads the base (the copy Get loaded, else the block).
func (w *Writer) baseRecords(ctx context.Context, i int) ([]materialize.Record, error) {
	if recs, ok := w.loaded[i]; ok {
		return recs, nil
	}
	recs, err := w.s.ReadBlock(ctx, w.base.Blocks[i])
	if err != nil {
		return nil, fmt.Errorf("write segment: %w", err)
	}
	w.check.consume(w.base.Blocks[i], i, recs)
	return recs, nil
}

// merge merge-joins the change stream with the base blocks, one block at a
// time, and feeds the layout: a block no change falls into (or whose
// changes change nothing) is reused; the merged records of a changed block
// form a rewritten span.
func (w *Writer) merge(ctx context.Context, blocks []BlockRef, src *changeSource, lay *layout) error {
	if len(blocks) == 0 {
		lay.open()
		for {
			c, ok, err := src.peek()
			if err != nil || !ok {
				if err != nil {
					return err
				}
				break
			}
			src.take()
			r, err := src.resolve(c, nil)
			if err != nil {
				return err
			}
			w.tell(c, nil, r)
			if r != nil {
				w.check.apply(nil, r)
				if err := lay.add(*r); err != nil {
					return err
				}
			}
		}
		return lay.close()
	}
	for i := range blocks {
		// The changes block i owns: ids below the next block's MinID.
		owns := func(id string) bool { return i == len(blocks)-1 || id < blocks[i+1].MinID }
		c, ok, err := src.peek()
		if err != nil {
			return err
		}
		if !ok || !owns(c.ID) {
			if err := lay.reuse(i); err != nil {
				return err
			}
			continue
		}
		recs, err := w.baseRecords(ctx, i)
		if err != nil {
			return err
		}
		// Records go to staging until the first real change: a block
		// whose changes change nothing is reused, not rewritten.
		staging := make([]materialize.Record, 0, len(recs))
		changed := false
		emit := func(r materialize.Record) error {
			if !changed {
				staging = append(staging, r)
				return nil
			}
			return lay.add(r)
		}
		markChanged := func() error {
			if changed {
				return nil
			}
			changed = true
			lay.open()
			for _, r := range staging {
				if err := lay.add(r); err != nil {
					return err
				}
			}
			staging = nil
			return nil
		}
		k := 0
		for {
			c, ok, err := src.peek()
			if err != nil {
				return err
			}
			if !ok || !owns(c.ID) {
				break
			}
			for k < len(recs) && recs[k].ID < c.ID {
				if err := emit(recs[k]); err != nil {
					return err
				}
				k++
			}
			src.take()
			var cur *materialize.Record
			if k < len(recs) && recs[k].ID == c.ID {
				cur = &recs[k]
				k++
			}
			r, err := src.resolve(c, cur)
			if err != nil {
				return err
			}
			w.tell(c, cur, r)
			switch {
			case r == nil && cur == nil: // absent from the block before and after
			case r == nil: // deleted
				err = markChanged()
				w.check.apply(cur, nil)
			case cur == nil: // inserted
				w.check.apply(nil, r)
				if err = markChanged(); err == nil {
					err = emit(*r)
				}
			default:
				if !sameRecord(*cur, *r) {
					w.check.apply(cur, r)
					err = markChanged()
				}
				if err == nil {
					err = emit(*r)
				}
			}
			if err != nil {
				return err
			}
		}
		if !changed {
			if err := lay.reuse(i); err != nil {
				return err
			}
			continue
		}
		for ; k < len(recs); k++ {
			if err := lay.add(recs[k]); err != nil {
				return err
			}
		}
		if err := lay.close(); err != nil {
			return err
		}
	}
	return nil
}

// tell calls WriteOptions.OnChange when change c, whose value is r, changes
// its id's record in the base version: against cur, the base block's
// record, or, for an id a base delta holds (c.folded), against the delta's.
func (w *Writer) tell(c Change, cur, r *materialize.Record) {
	if w.onChange == nil {
		return
	}
	if c.folded {
		cur = c.was
	}
	if (cur == nil) != (r == nil) || (r != nil && !sameRecord(*cur, *r)) {
		w.onChange(c.ID, r)
	}
}

// span is a run of the new version's records: either one base block reused
// as it is (rewrite false), or records to write as one or more blocks.
type span struct {
	rewrite bool
	base    int // index in base.Blocks when !rewrite
	recs    []materialize.Record
}

func (sp span) size(blocks []BlockRef) int {
	if sp.rewrite {
		return len(sp.recs)
	}
	return int(blocks[sp.base].Records)
}

// layout turns the stream of spans (reused base blocks and rewritten runs,
// in id order) into blocks: a rewritten span under MinBlockRecords merges
// with a neighbour (pickNeighbour), spans over MaxBlockRecords are cut into
// near-equal blocks. It keeps a window of spans not yet final: the head
// leaves it once no later merge can reach it (it and its successor had
// their merge check, and the successor holds at least MinBlockRecords
// records). The open span (being built, always the last) that grows past
// trimAt records while it heads the window sends blocks of 15/16 of
// MaxBlockRecords from its front, so memory stays bounded whatever the size
// of the change.
type layout struct {
	w        *Writer
	ctx      context.Context
	blocks   []BlockRef
	min, max int
	trimAt   int
	out      *blockSink
	window   []span
	checked  int // window[:checked] had their merge check
	openIdx  int // index of the open span in window; -1: none
}

func (l *layout) open() {
	l.window = append(l.window, span{rewrite: true})
	l.openIdx = len(l.window) - 1
}

func (l *layout) add(r materialize.Record) error {
	sp := &l.window[l.openIdx]
	sp.recs = append(sp.recs, r)
	if len(sp.recs) <= l.trimAt {
		return nil
	}
	// A large open span: settle what precedes it, so that it heads the
	// window and can send its front.
	if l.openIdx > 0 {
		if err := l.settle(false, true); err != nil {
			return err
		}
		if err := l.emitFront(); err != nil {
			return err
		}
		if l.openIdx != 0 {
			return nil
		}
	}
	// Blocks cut from the front are filled to 15/16 of the maximum, so that
	// a few later inserts into one of them do not split it at once (the
	// rest of a run is cut into near-equal blocks, which leaves room too).
	cut := l.max - l.max/16
	sp = &l.window[0]
	for len(sp.recs) > l.trimAt {
		if err := l.out.write(sp.recs[:cut:cut]); err != nil {
			return err
		}
		sp.recs = sp.recs[cut:]
	}
	return nil
}

func (l *layout) close() error {
	if len(l.window[l.openIdx].recs) == 0 {
		// Changed and empty: the block is dropped.
		l.window = l.window[:l.openIdx]
		l.checked = min(l.checked, len(l.window))
	}
	l.openIdx = -1
	if err := l.settle(false, false); err != nil {
		return err
	}
	return l.emitFront()
}

func (l *layout) reuse(i int) error {
	l.window = append(l.window, span{base: i})
	if err := l.settle(false, false); err != nil {
		return err
	}
	return l.emitFront()
}

func (l *layout) finish() error {
	if err := l.settle(true, false); err != nil {
		return err
	}
	for _, sp := range l.window {
		if err := l.send(sp); err != nil {
			return err
		}
	}
	l.window = nil
	return nil
}

// settle runs the merge check over the spans not checked yet whose
// successor is known (every span when final). withOpen: the open span
// counts as a known successor (its size so far standing for its final
// size).
func (l *layout) settle(final, withOpen bool) error {
	i := l.checked
	for i < len(l.window) {
		if l.openIdx >= 0 && (i >= l.openIdx || (i == l.openIdx-1 && !withOpen)) {
			break
		}
		if !final && l.openIdx < 0 && i == len(l.window)-1 {
			break
		}
		sp := l.window[i]
		if !sp.rewrite || len(sp.recs) >= l.min || len(l.window) == 1 {
			i++
			continue
		}
		j := pickNeighbour(l.window, i, l.blocks)
		lo, hi := min(i, j), max(i, j)
		loRecs, err := l.records(l.window[lo])
		if err != nil {
			return err
		}
		hiRecs, err := l.records(l.window[hi])
		if err != nil {
			return err
		}
		recs := make([]materialize.Record, 0, len(loRecs)+len(hiRecs))
		recs = append(append(recs, loRecs...), hiRecs...)
		l.window[lo] = span{rewrite: true, recs: recs}
		l.window = append(l.window[:hi], l.window[hi+1:]...)
		switch {
		case l.openIdx == hi:
			l.openIdx = lo
		case l.openIdx > hi:
			l.openIdx--
		}
		i = lo // still under the minimum: merge again
	}
	l.checked = i
	return nil
}

// records returns the records of sp, reading its base block if reused.
func (l *layout) records(sp span) ([]materialize.Record, error) {
	if sp.rewrite {
		return sp.recs, nil
	}
	return l.w.baseRecords(l.ctx, sp.base)
}

// emitFront sends the spans at the head of the window that no later merge
// can reach.
func (l *layout) emitFront() error {
	for len(l.window) >= 2 && l.checked >= 1 && l.openIdx != 0 {
		next := l.window[1]
		if next.size(l.blocks) < l.min || (l.checked < 2 && l.openIdx != 1) {
			return nil
		}
		if err := l.send(l.window[0]); err != nil {
			return err
		}
		l.window = l.window[1:]
		l.checked--
		if l.openIdx >= 0 {
			l.openIdx--
		}
	}
	return nil
}

// send writes a final span: a reused block by reference, a rewritten one
// cut into near-equal blocks of at most MaxBlockRecords.
func (l *layout) send(sp span) error {
	if !sp.rewrite {
		return l.out.reuse(l.blocks[sp.base])
	}
	for _, part := range splitEven(sp.recs, l.max) {
		if err := l.out.write(part); err != nil {
			return err
		}
	}
	return nil
}

// pickNeighbour chooses the span to merge spans[i] with: a neighbour being
// rewritten anyway (no extra read), else the smaller one.
func pickNeighbour(spans []span, i int, blocks []BlockRef) int {
	switch {
	case i == 0:
		return 1
	case i == len(spans)-1:
		return i - 1
	}
	prev, next := spans[i-1], spans[i+1]
	if prev.rewrite != next.rewrite {
		if prev.rewrite {
			return i - 1
		}
		return i + 1
	}
	if next.size(blocks) < prev.size(blocks) {
		return i + 1
	}
	return i - 1
}

// putBlock encodes recs as a block and puts it under a new key.
func (w *Writer) putBlock(ctx context.Context, recs []materialize.Record) (BlockRef, error) {
	if err := ctx.Err(); err != nil {
		return BlockRef{}, fmt.Errorf("write block: %w", err)
	}
	if w.s.dropRecord != nil { // tests only: a writer that loses a record
		recs = w.s.dropRecord(recs)
	}
	data, err := encodeBlock(recs)
	if err != nil {
		return BlockRef{}, fmt.Errorf("encode block: %w", err)
	}
	digest := DigestOf(recs)
	key := newBlockKey(w.collectionID)
	// Recorded before the Put: a Put that fails may still have written.
	// Encoders put concurrently: the lists are shared.
	w.mu.Lock()
	w.written = append(w.written, key)
	w.mu.Unlock()
	if ds, ok := w.s.blobs.(deferredSyncer); ok {
		if err := ds.putDeferred(ctx, key, data); err != nil {
			return BlockRef{}, fmt.Errorf("put block %s: %w", key, err)
		}
		w.mu.Lock()
		w.unsynced = append(w.unsynced, key)
		w.mu.Unlock()
	} else if err := w.s.blobs.Put(ctx, key, data); err != nil {
		return BlockRef{}, fmt.Errorf("put block %s: %w", key, err)
	}
	ref := BlockRef{
		Key:      key,
		MinID:    recs[0].ID,
		MaxID:    recs[len(recs)-1].ID,
		Records:  int64(len(recs)),
		Bytes:    int64(len(data)),
		Digest:   digest.String(),
		Checksum: Checksum(data),
	}
	if err := w.readBack(ctx, KindBlock, ref.Key, ref.Checksum, func(back []byte) (Digest, error) {
		got, err := decodeBlockOf(ref, back)
		return DigestOf(got), err
	}, digest); err != nil {
		return BlockRef{}, err
	}
	return ref, nil
}

// readBack is the read-back check of one blob this writer put (unless
// Config.NoReadBack): it reads the blob at key again from the blob store
// (not from any cache), checks its SHA-256 against checksum, decodes and
// digests it with decode, and compares the digest with want, the digest of
// the records the writer meant to write. A blob that is missing, does not
// decode or digests differently is a *VerificationError of phase
// "compaction" naming the key; a failure to read is returned as it is.
func (w *Writer) readBack(ctx context.Context, kind, key, checksum string, decode func([]byte) (Digest, error), want Digest) error {
	if w.s.cfg.NoReadBack {
		return nil
	}
	fail := func(format string, args ...any) error {
		return &VerificationError{CollectionID: w.collectionID, Version: w.newVersion(), Phase: "compaction",
			Problems: []Problem{{Kind: kind, Key: key, What: "read back after the write: " + fmt.Sprintf(format, args...)}}}
	}
	back, err := w.s.blobs.Get(ctx, key)
	if errors.Is(err, ErrNotExist) {
		return fail("missing from the blob store")
	}
	if err != nil {
		return fmt.Errorf("read back %s %s: %w", kind, key, err)
	}
	if got := Checksum(back); got != checksum {
		return fail("SHA-256 %s written, %s read", checksum, got)
	}
	got, err := decode(back)
	if err != nil {
		var ce *CorruptError
		if errors.As(err, &ce) {
			return fail("%v", ce.Err)
		}
		return fail("%v", err)
	}
	if got != want {
		return fail("records written digest to %s, the records read to %s", want, got)
	}
	return nil
}

// newVersion is the version this writer builds.
func (w *Writer) newVersion() int64 {
	if w.base == nil {
		return 1
	}
	return w.base.Version + 1
}

// WriteManifest writes m under a new unique key and returns the key and its
// size in bytes.
func (w *Writer) WriteManifest(ctx context.Context, m *Manifest) (string, int64, error) {
	if m == nil {
		return "", 0, errors.New("write manifest: nil manifest")
	}
	if m.CollectionID != w.collectionID {
		return "", 0, fmt.Errorf("write manifest: manifest of collection %s, writer of %s", m.CollectionID, w.collectionID)
	}
	if err := checkManifest(m); err != nil {
		return "", 0, fmt.Errorf("write manifest: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return "", 0, fmt.Errorf("write manifest: %w", err)
	}
	data, err := encodeManifest(m)
	if err != nil {
		return "", 0, fmt.Errorf("write manifest: %w", err)
	}
	key := newManifestKey(w.collectionID, m.Version)
	w.written = append(w.written, key)
	if err := w.s.blobs.Put(ctx, key, data); err != nil {
		return "", 0, fmt.Errorf("put manifest %s: %w", key, err)
	}
	return key, int64(len(data)), nil
}

// Abort deletes every blob this writer wrote (blocks and manifest). Blocks of
// the base are never touched. Use a context that is not cancelled.
func (w *Writer) Abort(ctx context.Context) error {
	var errs []error
	var left []string
	for _, key := range w.written {
		if err := w.s.blobs.Delete(ctx, key); err != nil {
			errs = append(errs, fmt.Errorf("abort: %w", err))
			left = append(left, key)
		}
	}
	w.written = left // a retried Abort deletes what is left
	return errors.Join(errs...)
}

// splitEven splits recs into ceil(n/maxRecs) runs whose sizes differ by at
// most one.
func splitEven(recs []materialize.Record, maxRecs int) [][]materialize.Record {
	n := len(recs)
	if n == 0 {
		return nil
	}
	k := (n + maxRecs - 1) / maxRecs
	parts := make([][]materialize.Record, 0, k)
	size, extra := n/k, n%k
	for p := range k {
		sz := size
		if p < extra {
			sz++
		}
		parts = append(parts, recs[:sz:sz])
		recs = recs[sz:]
	}
	return parts
}

// sameRecord reports whether a and b would be stored identically.
func sameRecord(a, b materialize.Record) bool {
	if a.ID != b.ID || len(a.Embedding) != len(b.Embedding) || (a.Embedding == nil) != (b.Embedding == nil) ||
		(a.Document == nil) != (b.Document == nil) || (a.Metadata == nil) != (b.Metadata == nil) ||
		len(a.Metadata) != len(b.Metadata) {
		return false
	}
	if a.Document != nil && *a.Document != *b.Document {
		return false
	}
	for i, v := range a.Embedding {
		if math.Float32bits(v) != math.Float32bits(b.Embedding[i]) {
			return false
		}
	}
	for k, v := range a.Metadata {
		u, ok := b.Metadata[k]
		if !ok {
			return false
		}
		switch v := v.(type) {
		case string:
			if u, ok := u.(string); !ok || u != v {
				return false
			}
		case float64:
			if u, ok := u.(float64); !ok || math.Float64bits(u) != math.Float64bits(v) {
				return false
			}
		case bool:
			if u, ok := u.(bool); !ok || u != v {
				return false
			}
		default:
			return false
		}
	}
	return true
}

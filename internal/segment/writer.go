package segment

import (
	"context"
	"errors"
	"fmt"
	"iter"
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

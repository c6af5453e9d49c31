package segment

import (
	"context"
	"io"
	"time"

	"github.com/compactorhq/compactor/internal/materialize"
)

// OpenBucket opens a gocloud.dev/blob bucket by URL ("file:///abs/dir",
// "mem://", "s3://bucket?region=..."), creating a file:// directory when
// missing, and adapts it to Blobs. A file:// Put fsyncs the file and its
// directory before it returns; an s3:// PUT is durable once acknowledged.
// The closer closes the bucket.
func OpenBucket(ctx context.Context, url string) (Blobs, io.Closer, error) {
	return openBucket(ctx, url)
}

// Store reads and writes segments in a blob store. Safe for concurrent use.
type Store struct {
	storeImpl
}

// NewStore returns a Store over b. now is the clock for manifest times and
// GC (nil: time.Now). Zero Config fields take their defaults.
func NewStore(b Blobs, cfg Config, now func() time.Time) *Store { return newStore(b, cfg, now) }

// ReadManifest reads and decodes a manifest. Errors wrap ErrNotExist when
// missing; a manifest that cannot be decoded, breaks an invariant, is over
// 256 MiB or is stored under another collection's or version's key is a
// *CorruptError (matching ErrCorrupt) naming the key and the collection.
func (s *Store) ReadManifest(ctx context.Context, key string) (*Manifest, error) {
	return s.readManifest(ctx, key)
}

// ReadBlock reads all records of a block, in id order. Errors wrap
// ErrNotExist when missing; a block that cannot be decoded, claims more than
// its file can hold or MaxBlockDecodeBytes allows, or contradicts ref
// (size, record count, id range) is a *CorruptError (matching ErrCorrupt)
// naming the key and the collection. Get, Scan and Writer.Get return the
// same errors.
func (s *Store) ReadBlock(ctx context.Context, ref BlockRef) ([]materialize.Record, error) {
	return s.readBlock(ctx, ref)
}

// Get returns the records of m with the given ids (missing ids are absent
// from the map). It reads only the blocks whose range holds an id. m nil:
// empty segment.
func (s *Store) Get(ctx context.Context, m *Manifest, ids []string) (map[string]materialize.Record, error) {
	return s.get(ctx, m, ids)
}

// Scan calls fn for the records of m with id > after, in id order, until fn
// returns false or the records end. It reads one block at a time.
func (s *Store) Scan(ctx context.Context, m *Manifest, after string, fn func(materialize.Record) bool) error {
	return s.scan(ctx, m, after, fn)
}

// GC deletes the blobs under collections/<collectionID>/ that plan allows:
// the manifests in plan.Expired and their blocks that no manifest in
// plan.Keep references, whatever their age; and, unless plan.SpareOrphans,
// the blobs that no manifest in Keep or Expired references and whose
// ModTime is older than now-plan.OrphanGrace. Every manifest in Keep is read
// before anything is deleted (an unreadable one is an error and nothing is
// deleted); manifests are deleted before blocks, so a pass cut short never
// leaves a manifest whose blocks are gone.
func (s *Store) GC(ctx context.Context, collectionID string, plan GCPlan) (GCStats, error) {
	return s.gc(ctx, collectionID, plan)
}

// DeleteCollection deletes every blob under collections/<collectionID>/.
func (s *Store) DeleteCollection(ctx context.Context, collectionID string) error {
	return s.deleteCollection(ctx, collectionID)
}

// Writer builds one new segment version from a base by copy-on-write. It is
// used by one goroutine. Get, then Write, then WriteManifest; Abort on any
// failure deletes every blob this writer wrote.
type Writer struct {
	writerImpl
}

// NewWriter starts a new version of collectionID over base (nil: the
// collection has no segment yet).
func (s *Store) NewWriter(collectionID string, base *Manifest) *Writer {
	return s.newWriter(collectionID, base)
}

// Get returns the current records of the given ids in the base (missing ids
// absent). It loads and keeps the blocks whose ranges hold the ids, so that
// Write does not read them again.
func (w *Writer) Get(ctx context.Context, ids []string) (map[string]materialize.Record, error) {
	return w.get(ctx, ids)
}

// Write applies changes (sorted by ID, unique) to the base and writes the
// blocks that change, checking ctx before each block write (a batch
// boundary) and calling onBlock(bytes) after each. It returns the new
// manifest (Version = base's + 1, not yet written) and the figures. On error
// the caller calls Abort.
func (w *Writer) Write(ctx context.Context, changes []Change, compactionOffset int64, dimension int, onBlock func(bytes int64)) (*Manifest, WriteStats, error) {
	return w.write(ctx, changes, compactionOffset, dimension, onBlock)
}

// WriteManifest writes m under a new unique key and returns the key and its
// size in bytes.
func (w *Writer) WriteManifest(ctx context.Context, m *Manifest) (key string, size int64, err error) {
	return w.writeManifest(ctx, m)
}

// Abort deletes every blob this writer wrote (blocks and manifest). Blocks of
// the base are never touched. Use a context that is not cancelled.
func (w *Writer) Abort(ctx context.Context) error { return w.abort(ctx) }

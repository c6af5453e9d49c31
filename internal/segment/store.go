package segment

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/compactorhq/compactor/internal/materialize"
)

// Block size defaults.
const (
	defaultMaxBlockRecords = 4096
	minMaxBlockRecords     = 2 // so that 0 < MinBlockRecords < MaxBlockRecords
)

// withDefaults fills zero fields and clamps the others (NewStore cannot
// return an error):
//   - MaxBlockRecords <= 0 becomes 4096; 1 becomes 2.
//   - MinBlockRecords <= 0 becomes MaxBlockRecords/4 (at least 1).
//   - MinBlockRecords above MaxBlockRecords/2 becomes MaxBlockRecords/2, so
//     that the halves of a split block are never under it.
func (c Config) withDefaults() Config {
	if c.MaxBlockRecords <= 0 {
		c.MaxBlockRecords = defaultMaxBlockRecords
	}
	c.MaxBlockRecords = max(c.MaxBlockRecords, minMaxBlockRecords)
	if c.MinBlockRecords <= 0 {
		c.MinBlockRecords = max(c.MaxBlockRecords/4, 1)
	}
	c.MinBlockRecords = min(c.MinBlockRecords, c.MaxBlockRecords/2)
	return c.withDeltaDefaults()
}

// Store reads and writes segments in a blob store. Safe for concurrent use.
type Store struct {
	blobs Blobs
	cfg   Config
	now   func() time.Time
	// cache holds decoded blocks and deltas for Get and Scan; nil when
	// Config.BlockCacheBytes is 0.
	cache *blockCache
	// rows holds blocks without their embeddings for GetLight (rows.go);
	// nil when Config.RowCacheBytes is 0.
	rows *blockCache
	// dropRecord, set by tests only (never in production), changes the
	// records of each block before it is encoded: a writer that loses a
	// record, for the verification tests.
	dropRecord func([]materialize.Record) []materialize.Record
}

// StoreOption configures NewStore.
type StoreOption func(*storeOptions)

type storeOptions struct{ reg prometheus.Registerer }

// WithRegisterer registers the Store's metrics (the compactor_block_cache_*
// series of its decoded block cache, the compactor_row_cache_* series of
// its row cache) on reg.
func WithRegisterer(reg prometheus.Registerer) StoreOption {
	return func(o *storeOptions) { o.reg = reg }
}

// NewStore returns a Store over b. now is the clock for manifest times and
// GC (nil: time.Now). Zero Config fields take their defaults, but for
// BlockCacheBytes: 0 (or less) keeps no decoded block cache.
func NewStore(b Blobs, cfg Config, now func() time.Time, opts ...StoreOption) *Store {
	if now == nil {
		now = time.Now
	}
	var o storeOptions
	for _, opt := range opts {
		opt(&o)
	}
	s := &Store{blobs: b, cfg: cfg.withDefaults(), now: now}
	if cfg.BlockCacheBytes > 0 {
		s.cache = newBlockCache(cfg.BlockCacheBytes, o.reg)
	}
	if cfg.RowCacheBytes > 0 {
		s.rows = newCache(cfg.RowCacheBytes, o.reg, rowCacheHelp)
	}
	return s
}

// Now reads the Store's clock (NewStore's now): the time the manifests
// written through it record, for writers of manifests outside Writer.
func (s *Store) Now() time.Time { return s.now() }

// ReadManifest reads and decodes a manifest. Errors wrap ErrNotExist when
// missing; a manifest that cannot be decoded, breaks an invariant, is over
// 256 MiB or is stored under another collection's or version's key is a
// *CorruptError (matching ErrCorrupt) naming the key and the collection.
func (s *Store) ReadManifest(ctx context.Context, key string) (*Manifest, error) {
	data, err := s.getBlob(ctx, KindManifest, key)
	if err != nil {
		return nil, fmt.Errorf("read manifest %s: %w", key, err)
	}
	return decodeManifestAt(key, data)
}

// manifestCachePrefix marks a decoded manifest's entry in the decoded block
// cache (a manifest key names one file for good, like a block key).
const manifestCachePrefix = "manifest\x00"

// ReadManifestShared is ReadManifest through the decoded block cache, for
// readers: the manifest returned may be shared with other readers and must
// not be modified. Its entry is sized at twice the encoded bytes (an
// estimate of the decoded structures). Errors are ReadManifest's; an error
// is not cached.
func (s *Store) ReadManifestShared(ctx context.Context, key string) (*Manifest, error) {
	if s.cache == nil {
		return s.ReadManifest(ctx, key)
	}
	var size int64
	v, err := s.cache.get(ctx, manifestCachePrefix+key, func() (any, error) {
		data, err := s.getBlob(ctx, KindManifest, key)
		if err != nil {
			return nil, fmt.Errorf("read manifest %s: %w", key, err)
		}
		size = 2 * int64(len(data))
		return decodeManifestAt(key, data)
	}, func(any) int64 { return size })
	if err != nil {
		return nil, err
	}
	return v.(*Manifest), nil
}

// ReadBlock reads all records of a block, in id order. Errors wrap
// ErrNotExist when missing; a block that cannot be decoded, claims more than
// its file can hold or MaxBlockDecodeBytes allows, or contradicts ref
// (size, record count, id range) is a *CorruptError (matching ErrCorrupt)
// naming the key and the collection. Get, Scan and Writer.Get return the
// same errors.
func (s *Store) ReadBlock(ctx context.Context, ref BlockRef) ([]materialize.Record, error) {
	// The records are decoded copies: the file's buffer goes back to the
	// pool (TestBlockDecodersKeepNoFileBytes).
	data, release, err := s.getBlobBuffer(ctx, KindBlock, ref.Key)
	defer release()
	if err != nil {
		return nil, fmt.Errorf("read block %s: %w", ref.Key, err)
	}
	return decodeBlockOf(ref, data)
}

// readBlockCached is ReadBlock through the decoded block cache (ReadBlock
// itself when there is none). The records returned may be shared with
// other readers: they must not be modified.
func (s *Store) readBlockCached(ctx context.Context, ref BlockRef) ([]materialize.Record, error) {
	if s.cache == nil {
		return s.ReadBlock(ctx, ref)
	}
	v, err := s.cache.get(ctx, ref.Key, func() (any, error) { return s.ReadBlock(ctx, ref) }, recordsBytes)
	if err != nil {
		return nil, err
	}
	return v.([]materialize.Record), nil
}

// readDeltaCached is ReadDelta through the decoded block cache, as
// readBlockCached.
func (s *Store) readDeltaCached(ctx context.Context, ref DeltaRef) ([]Change, error) {
	if s.cache == nil {
		return s.ReadDelta(ctx, ref)
	}
	v, err := s.cache.get(ctx, ref.Key, func() (any, error) { return s.ReadDelta(ctx, ref) }, changesBytes)
	if err != nil {
		return nil, err
	}
	return v.([]Change), nil
}

// findRecord returns the record of recs (sorted by id) with id.
func findRecord(recs []materialize.Record, id string) (materialize.Record, bool) {
	i, ok := slices.BinarySearchFunc(recs, id, func(r materialize.Record, id string) int { return strings.Compare(r.ID, id) })
	if !ok {
		return materialize.Record{}, false
	}
	return recs[i], true
}

// idsByBlock groups the ids that fall inside a block's [MinID, MaxID] by the
// block's index; ids outside every range are absent and need no read.
func idsByBlock(blocks []BlockRef, ids []string) (map[int][]string, []int) {
	byBlock := make(map[int][]string)
	if len(blocks) == 0 {
		return byBlock, nil
	}
	for _, id := range ids {
		i := owner(blocks, id)
		if id < blocks[i].MinID || id > blocks[i].MaxID {
			continue
		}
		byBlock[i] = append(byBlock[i], id)
	}
	order := make([]int, 0, len(byBlock))
	for i := range byBlock {
		order = append(order, i)
	}
	slices.Sort(order)
	return byBlock, order
}

// Get returns the records of m with the given ids (missing ids are absent
// from the map), its deltas applied. It reads the deltas whose range holds
// an id, and only the blocks whose range holds an id the deltas do not
// decide; of a block that is not in the decoded block cache and holds few
// of the ids, only the id column and the rows of those ids are decoded.
// The records may be shared with the cache and other readers: they must
// not be modified. m nil: empty segment.
func (s *Store) Get(ctx context.Context, m *Manifest, ids []string) (map[string]materialize.Record, error) {
	return s.get(ctx, m, ids, false)
}

// GetLight is Get without the embeddings: the records of m with the given
// ids (missing ids absent), their deltas applied, each with Embedding nil.
// A record whose block the decoded block cache holds is taken from there;
// of the other blocks it reads the id, document and metadata columns alone,
// never decoding their embeddings, through the row cache
// (Config.RowCacheBytes): the whole block's ids, documents and metadata
// JSON, so that later hits in that block read nothing. It is the read of a
// query's hits when the caller did not ask for their embeddings (the
// index gave their distances). Errors as Get's. The records' metadata may
// be shared with other readers: they must not modify it.
func (s *Store) GetLight(ctx context.Context, m *Manifest, ids []string) (map[string]materialize.Record, error) {
	return s.get(ctx, m, ids, true)
}

// get is Get (light false) and GetLight.
func (s *Store) get(ctx context.Context, m *Manifest, ids []string, light bool) (map[string]materialize.Record, error) {
	out := make(map[string]materialize.Record)
	if m == nil {
		return out, nil
	}
	// Deltas first: the newest delta holding an id decides it.
	if ov, err := s.readOverlay(ctx, m.Deltas, coversAny(ids), true); err != nil {
		return nil, err
	} else if len(ov) > 0 {
		rest := make([]string, 0, len(ids))
		for _, id := range ids {
			if c, ok := findChange(ov, id); !ok {
				rest = append(rest, id)
			} else if c.Record != nil {
				r := *c.Record
				if light {
					r.Embedding = nil
				}
				out[id] = r
			}
		}
		ids = rest
	}
	byBlock, order := idsByBlock(m.Blocks, ids)
	for _, i := range order {
		var err error
		if light {
			err = s.lightFromBlock(ctx, m.Blocks[i], byBlock[i], out)
		} else {
			err = s.getFromBlock(ctx, m.Blocks[i], byBlock[i], out)
		}
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// lightFromBlock adds to out the records of ids (sorted, inside ref's
// range) that block ref holds, without their embeddings: from the decoded
// block cache when it holds the block, else from the row cache.
func (s *Store) lightFromBlock(ctx context.Context, ref BlockRef, ids []string, out map[string]materialize.Record) error {
	if v, ok := s.cache.peek(ref.Key); ok {
		recs := v.([]materialize.Record)
		for _, id := range ids {
			if r, ok := findRecord(recs, id); ok {
				r.Embedding = nil
				out[id] = r
			}
		}
		return nil
	}
	b, err := s.readLightCached(ctx, ref)
	if err != nil {
		return err
	}
	for _, id := range ids {
		i, ok := b.find(id)
		if !ok {
			continue
		}
		r, err := b.record(i)
		if err != nil {
			return corrupt(KindBlock, ref.Key, err)
		}
		out[id] = r
	}
	return nil
}

// sparseReadFraction: a Get that wants fewer than 1/sparseReadFraction of a
// block's records, when the block is not cached, decodes only the id
// column and the wanted rows (readBlockRows) and leaves the cache as it is;
// one that wants more decodes the whole block into the cache.
const sparseReadFraction = 8

// getFromBlock adds to out the records of ids (sorted, inside ref's range)
// that block ref holds: from the cache when it holds the block; else, for
// few ids, from a decode of their rows alone; else from the whole block,
// decoded into the cache.
func (s *Store) getFromBlock(ctx context.Context, ref BlockRef, ids []string, out map[string]materialize.Record) error {
	if v, ok := s.cache.peek(ref.Key); ok {
		addFound(out, v.([]materialize.Record), ids)
		return nil
	}
	if int64(len(ids))*sparseReadFraction < ref.Records {
		s.cache.noteMiss()
		found, err := s.readBlockRows(ctx, ref, ids)
		if err != nil {
			return err
		}
		maps.Copy(out, found)
		return nil
	}
	recs, err := s.readBlockCached(ctx, ref)
	if err != nil {
		return err
	}
	addFound(out, recs, ids)
	return nil
}

// addFound adds to out the records of recs (sorted by id) with the given
// ids.
func addFound(out map[string]materialize.Record, recs []materialize.Record, ids []string) {
	for _, id := range ids {
		if r, ok := findRecord(recs, id); ok {
			out[id] = r
		}
	}
}

// Scan calls fn for the records of m with id > after, in id order, its
// deltas applied, until fn returns false or the records end. It reads the
// deltas whose range ends after after (held for the scan; their total is
// bounded by Config.DeltaFoldRecords), then one block at a time, through
// the decoded block cache, so that the pages of a paged read decode each
// block once while it stays cached. The records may be shared with the
// cache and other readers: fn must not modify them.
func (s *Store) Scan(ctx context.Context, m *Manifest, after string, fn func(materialize.Record) bool) error {
	return s.scan(ctx, m, after, fn, true)
}

// ScanUncached is Scan reading the blocks and deltas from the blob store
// without the decoded block cache (neither using nor filling it): for one
// pass over a whole version (an index build) that would evict what reads
// revisit. fn may keep the records.
func (s *Store) ScanUncached(ctx context.Context, m *Manifest, fn func(materialize.Record) bool) error {
	return s.scan(ctx, m, "", fn, false)
}

func (s *Store) scan(ctx context.Context, m *Manifest, after string, fn func(materialize.Record) bool, cached bool) error {
	if m == nil {
		return nil
	}
	// The deltas' records merge into the blocks' in id order.
	ov, err := s.scanOverlay(ctx, m, after, cached)
	if err != nil {
		return err
	}
	for i := owner(m.Blocks, after); i < len(m.Blocks); i++ {
		ref := m.Blocks[i]
		if ref.MaxID <= after {
			continue
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("scan: %w", err)
		}
		var recs []materialize.Record
		if cached {
			recs, err = s.readBlockCached(ctx, ref)
		} else {
			recs, err = s.ReadBlock(ctx, ref)
		}
		if err != nil {
			return err
		}
		j := sort.Search(len(recs), func(j int) bool { return recs[j].ID > after })
		for _, r := range recs[j:] {
			overridden, stop := ov.upTo(r.ID, fn)
			if stop {
				return nil
			}
			if !overridden && !fn(r) {
				return nil
			}
		}
	}
	ov.rest(fn)
	return nil
}

// isManifestKey reports whether key is a manifest's (rather than a block's
// or a stray blob's).
func isManifestKey(collectionID, key string) bool {
	return strings.HasPrefix(key, manifestsPrefix(collectionID))
}

// manifestsFirst orders blobs so that manifests are deleted before blocks: a
// pass cut short never leaves a manifest whose blocks are gone.
func manifestsFirst(collectionID string, blobs []BlobInfo) {
	slices.SortStableFunc(blobs, func(a, b BlobInfo) int {
		am, bm := isManifestKey(collectionID, a.Key), isManifestKey(collectionID, b.Key)
		switch {
		case am == bm:
			return 0
		case am:
			return -1
		}
		return 1
	})
}

// GC deletes the blobs under collections/<collectionID>/ that plan allows:
// the manifests in plan.Expired and their blocks and deltas that no
// manifest in plan.Keep references, whatever their age; and, unless plan.SpareOrphans,
// the blobs that no manifest in Keep or Expired references and whose
// ModTime is older than now-plan.OrphanGrace. Every manifest in Keep is read
// before anything is deleted (an unreadable one is an error and nothing is
// deleted); manifests are deleted before blocks, so a pass cut short never
// leaves a manifest whose blocks are gone.
func (s *Store) GC(ctx context.Context, collectionID string, plan GCPlan) (GCStats, error) {
	var stats GCStats
	if err := checkCollectionID(collectionID); err != nil {
		return stats, fmt.Errorf("gc: %w", err)
	}
	if plan.OrphanGrace < 0 {
		return stats, fmt.Errorf("gc %s: negative orphan grace period %v", collectionID, plan.OrphanGrace)
	}
	// Everything kept is read before anything is deleted: a kept manifest
	// that cannot be read means the referenced set is unknown.
	referenced := make(map[string]bool)
	for _, key := range plan.Keep {
		m, err := s.gcManifest(ctx, collectionID, key)
		if err != nil {
			return stats, err
		}
		referenced[key] = true
		for _, k := range m.blobKeys() {
			referenced[k] = true
		}
	}
	// The blobs of expired versions go whatever their age; a missing
	// expired manifest was deleted by an earlier pass (its blocks left by
	// a pass cut short are orphans now), and an undecodable one goes
	// alone (its blocks become orphans) rather than stop GC for good.
	expired := make(map[string]bool)
	for _, key := range plan.Expired {
		m, err := s.gcManifest(ctx, collectionID, key)
		if errors.Is(err, ErrNotExist) {
			continue
		}
		if errors.Is(err, ErrCorrupt) {
			expired[key] = true
			continue
		}
		if err != nil {
			return stats, err
		}
		expired[key] = true
		for _, k := range m.blobKeys() {
			expired[k] = true
		}
	}
	blobs, err := s.blobs.List(ctx, collectionPrefix(collectionID))
	if err != nil {
		return stats, fmt.Errorf("gc %s: %w", collectionID, err)
	}
	cutoff := s.now().Add(-plan.OrphanGrace)
	manifestsFirst(collectionID, blobs)
	for _, b := range blobs {
		switch {
		case referenced[b.Key]:
			continue
		case expired[b.Key]:
		case plan.SpareOrphans || !b.ModTime.Before(cutoff):
			continue
		}
		if err := ctx.Err(); err != nil {
			return stats, fmt.Errorf("gc %s: %w", collectionID, err)
		}
		if err := s.blobs.Delete(ctx, b.Key); err != nil {
			return stats, fmt.Errorf("gc %s: delete %s: %w", collectionID, b.Key, err)
		}
		stats.BlobsDeleted++
		stats.BytesDeleted += b.Size
	}
	return stats, nil
}

// gcManifest reads a manifest GC was given and checks that it is one of
// the collection's.
func (s *Store) gcManifest(ctx context.Context, collectionID, key string) (*Manifest, error) {
	if !isManifestKey(collectionID, key) {
		return nil, fmt.Errorf("gc %s: key %s is not a manifest of the collection", collectionID, key)
	}
	m, err := s.ReadManifest(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("gc %s: %w", collectionID, err)
	}
	if m.CollectionID != collectionID {
		return nil, fmt.Errorf("gc %s: manifest %s belongs to collection %s", collectionID, key, m.CollectionID)
	}
	return m, nil
}

// DeleteCollection deletes every blob under collections/<collectionID>/.
func (s *Store) DeleteCollection(ctx context.Context, collectionID string) error {
	if err := checkCollectionID(collectionID); err != nil {
		return fmt.Errorf("delete collection: %w", err)
	}
	blobs, err := s.blobs.List(ctx, collectionPrefix(collectionID))
	if err != nil {
		return fmt.Errorf("delete collection %s: %w", collectionID, err)
	}
	manifestsFirst(collectionID, blobs)
	for _, b := range blobs {
		if err := s.blobs.Delete(ctx, b.Key); err != nil {
			return fmt.Errorf("delete collection %s: delete %s: %w", collectionID, b.Key, err)
		}
	}
	return nil
}

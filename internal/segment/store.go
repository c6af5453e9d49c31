package segment

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

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
	return c
}

type storeImpl struct {
	blobs Blobs
	cfg   Config
	now   func() time.Time
}

func newStore(b Blobs, cfg Config, now func() time.Time) *Store {
	if now == nil {
		now = time.Now
	}
	return &Store{storeImpl{blobs: b, cfg: cfg.withDefaults(), now: now}}
}

func (s *storeImpl) readManifest(ctx context.Context, key string) (*Manifest, error) {
	data, err := s.blobs.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("read manifest %s: %w", key, err)
	}
	return decodeManifestAt(key, data)
}

func (s *storeImpl) readBlock(ctx context.Context, ref BlockRef) ([]materialize.Record, error) {
	data, err := s.blobs.Get(ctx, ref.Key)
	if err != nil {
		return nil, fmt.Errorf("read block %s: %w", ref.Key, err)
	}
	return decodeBlockOf(ref, data)
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

func (s *storeImpl) get(ctx context.Context, m *Manifest, ids []string) (map[string]materialize.Record, error) {
	out := make(map[string]materialize.Record)
	if m == nil {
		return out, nil
	}
	byBlock, order := idsByBlock(m.Blocks, ids)
	for _, i := range order {
		recs, err := s.readBlock(ctx, m.Blocks[i])
		if err != nil {
			return nil, err
		}
		for _, id := range byBlock[i] {
			if r, ok := findRecord(recs, id); ok {
				out[id] = r
			}
		}
	}
	return out, nil
}

func (s *storeImpl) scan(ctx context.Context, m *Manifest, after string, fn func(materialize.Record) bool) error {
	if m == nil || len(m.Blocks) == 0 {
		return nil
	}
	for i := owner(m.Blocks, after); i < len(m.Blocks); i++ {
		ref := m.Blocks[i]
		if ref.MaxID <= after {
			continue
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("scan: %w", err)
		}
		recs, err := s.readBlock(ctx, ref)
		if err != nil {
			return err
		}
		j := sort.Search(len(recs), func(j int) bool { return recs[j].ID > after })
		for _, r := range recs[j:] {
			if !fn(r) {
				return nil
			}
		}
	}
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

func (s *storeImpl) gc(ctx context.Context, collectionID string, plan GCPlan) (GCStats, error) {
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
		for _, b := range m.Blocks {
			referenced[b.Key] = true
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
		for _, b := range m.Blocks {
			expired[b.Key] = true
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
func (s *storeImpl) gcManifest(ctx context.Context, collectionID, key string) (*Manifest, error) {
	if !isManifestKey(collectionID, key) {
		return nil, fmt.Errorf("gc %s: key %s is not a manifest of the collection", collectionID, key)
	}
	m, err := s.readManifest(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("gc %s: %w", collectionID, err)
	}
	if m.CollectionID != collectionID {
		return nil, fmt.Errorf("gc %s: manifest %s belongs to collection %s", collectionID, key, m.CollectionID)
	}
	return m, nil
}

func (s *storeImpl) deleteCollection(ctx context.Context, collectionID string) error {
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

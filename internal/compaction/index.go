package compaction

import (
	"cmp"
	"container/list"
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"time"
	"weak"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/materialize"
	"github.com/compactorhq/compactor/internal/metric"
	"github.com/compactorhq/compactor/internal/segment"
	"github.com/compactorhq/compactor/internal/vindex"
	"github.com/compactorhq/compactor/internal/where"
)

// The vector index of a segment version (DESIGN.md §7c), built by the
// compaction that writes the version:
//
//   - incremental: the previous version's graph (from the in-process cache,
//     keyed by its immutable graph blob key, or decoded from its blobs)
//     gives a copy-on-write Successor; the writer reports each record id it
//     inserts, updates or deletes (segment.WriteOptions.OnChange), and the
//     successor takes those vectors in batches and tombstones the deleted
//     ids, so the work is in proportion to the change; tombstones past
//     vindex.RepairFraction are repaired, and past vindex.RebuildFraction
//     the graph is rebuilt from its live vectors;
//   - full: when the version before has no index, its index does not
//     decode (or a blob is missing), or the collection's parameters changed
//     (vindex Compatible), the graph is built from every record of the new
//     version, read back from its blocks.
//
// The blobs (a graph blob, rewritten per version, and append-only vector
// chunk blobs shared with later versions) are written durably before the
// manifest that lists them (segment.IndexRef), so the commit's
// compare-and-swap commits them with the version, readers pin them with
// the version and GC collects them with it (a chunk stays while any
// retained version lists it).
//
// Queries open a version's graph through the same cache (storedIndexes).
// Its records' metadata, which a filtered search evaluates during the
// traversal, is read from the version's blocks the first time a filtered
// query needs it and kept with the cached graph, with where.Stats for the
// plan's selectivity estimate: the blocks stay the one copy of the
// metadata (an index blob of its own would duplicate every record's
// metadata in every version, since the graph blob is rewritten per
// version), and unfiltered queries never pay for it.

// DefaultIndexCacheBytes is the default budget of the in-process cache of
// decoded vector indexes (Config.IndexCacheBytes, --index-cache-bytes).
const DefaultIndexCacheBytes = 1 << 30

// indexBatch is how many vectors an incremental build inserts at once.
const indexBatch = 4096

// WithIndexCacheBytes sets the budget, in bytes (estimated: vectors and
// links), of the decoded vector indexes kept in process for queries and
// the next compaction, overriding Config.IndexCacheBytes. The index most
// recently used is kept even when it alone is over the budget.
func WithIndexCacheBytes(n int64) Option {
	return func(c *Compactor) { c.indexes.budget = n }
}

// indexMetrics are the index build's metrics; nil fields without
// WithRegisterer.
type indexMetrics struct {
	seconds   *prometheus.HistogramVec
	vectors   prometheus.Counter
	tombstone prometheus.Gauge
	mu        sync.Mutex
	fractions map[string]float64 // collection id → tombstone fraction of its last index written
}

// Build kinds: the build label of compactor_index_build_seconds and
// segment.IndexRef.Build.
const (
	buildFull        = "full"
	buildIncremental = "incremental"
	buildRepaired    = "repaired"
	buildRebuild     = "rebuild" // an index rebuild job
)

func newIndexMetrics(reg prometheus.Registerer) *indexMetrics {
	f := promauto.With(reg)
	m := &indexMetrics{
		seconds: f.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "compactor_index_build_seconds",
			Help:    "Duration of the index phase of jobs that wrote a vector index, by build: full (every record), incremental (a successor of the previous version's graph), repaired (incremental, then tombstones re-linked) or rebuild (an index rebuild job).",
			Buckets: []float64{0.001, 0.005, 0.025, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800},
		}, []string{"build"}),
		vectors:   metric.Counter(f, "compactor_index_vectors_indexed_total", "Vectors inserted into vector indexes by compactions (a full build counts every vector, an incremental one the new and updated ones)."),
		tombstone: metric.Gauge(f, "compactor_index_tombstone_fraction", "The largest tombstone fraction (tombstones over nodes in the graph) among the last indexes this process wrote per collection; repairs start above 0.1."),
		fractions: map[string]float64{},
	}
	f.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "compactor_index_vector_bytes_mapped",
		Help: "Bytes of vector index vectors this process holds outside the Go heap (in its RSS, not in the go_memstats figures): the vectors of every graph in memory, chunks that versions share counted once.",
	}, func() float64 { return float64(vindex.MappedBytes()) })
	for _, b := range []string{buildFull, buildIncremental, buildRepaired, buildRebuild} {
		m.seconds.WithLabelValues(b)
	}
	return m
}

func (m *indexMetrics) observe(collectionID, build string, d time.Duration, inserted int, st vindex.Stats) {
	if m == nil {
		return
	}
	m.seconds.WithLabelValues(build).Observe(d.Seconds())
	m.vectors.Add(float64(inserted))
	m.mu.Lock()
	defer m.mu.Unlock()
	frac := 0.0
	if in := st.Slots - st.Dropped; in > 0 {
		frac = float64(st.Tombstones) / float64(in)
	}
	m.fractions[collectionID] = frac
	top := 0.0
	for _, f := range m.fractions {
		top = max(top, f)
	}
	m.tombstone.Set(top)
}

// indexParams returns the vindex parameters of coll's settings for
// vectors of dim dimensions.
func indexParams(coll catalog.Collection, dim int) vindex.Params {
	s := coll.Index.WithDefaults()
	return vindex.Params{Dim: dim, Distance: s.Distance, M: s.M, EfConstruction: s.EfConstruction, EfSearch: s.EfSearch}
}

// indexBuild is the index of one compaction, built beside its blocks. Its
// methods run on the compaction's goroutine.
type indexBuild struct {
	c    *Compactor
	coll catalog.Collection
	base *segment.Manifest
	// g is the successor of the base's graph being updated, nil for a full
	// build after the blocks are written.
	g        *vindex.Graph
	ids      []string
	vecs     [][]float32
	inserted int
	spent    time.Duration // in the change hook
	err      error         // the first error of the hook
	threads  int
	job      string // the id of the job building it ("" unknown)
}

// startIndex prepares the index of the version a compaction of coll over
// base writes: nil when the collection has indexing off. It opens the
// base's graph (cache, or decode) for an incremental build; a base index
// that does not decode or has a blob missing is logged and rebuilt from
// the blocks. Errors: storage errors reading the base's index.
func (c *Compactor) startIndex(ctx context.Context, coll catalog.Collection, base *segment.Manifest) (*indexBuild, error) {
	if coll.Index.Disabled {
		return nil, nil
	}
	b := &indexBuild{c: c, coll: coll, base: base, threads: max(1, runtime.GOMAXPROCS(0))}
	if base == nil || base.Index == nil {
		return b, nil
	}
	start := time.Now()
	prev, err := c.indexes.open(ctx, c.seg, base.Index)
	b.spent += time.Since(start)
	switch {
	case err == nil:
	case isIndexDamage(err):
		c.logger.Warn("previous vector index unreadable: rebuilding it from the blocks", "collection", coll.ID, "version", base.Version, "err", err)
		return b, nil
	default:
		return nil, fmt.Errorf("open the vector index of version %d: %w", base.Version, classifyRead(err))
	}
	p := indexParams(coll, prev.g.Params().Dim)
	if !prev.g.Compatible(p) || prev.g.NeedsRebuild() || len(prev.g.Chunks()) != len(base.Index.Chunks) {
		return b, nil // full build
	}
	b.g = prev.g.Successor()
	return b, nil
}

// isIndexDamage reports whether err says an index blob is corrupt or
// missing (the next build starts from the blocks).
func isIndexDamage(err error) bool {
	return errors.Is(err, segment.ErrCorrupt) || errors.Is(err, segment.ErrNotExist) || errors.Is(err, vindex.ErrCorrupt)
}

// onChange is the writer's change hook (nil when there is no incremental
// build): it tombstones deleted ids at once and inserts new and updated
// vectors in batches.
func (b *indexBuild) onChange() func(id string, r *materialize.Record) {
	if b == nil || b.g == nil {
		return nil
	}
	return func(id string, r *materialize.Record) {
		if b.err != nil {
			return
		}
		start := time.Now()
		defer func() { b.spent += time.Since(start) }()
		if r == nil || len(r.Embedding) == 0 {
			b.g.Delete(id)
			return
		}
		b.ids = append(b.ids, id)
		b.vecs = append(b.vecs, slices.Clone(r.Embedding))
		if len(b.ids) >= indexBatch {
			b.err = b.flush()
		}
	}
}

// flush inserts the pending vectors.
func (b *indexBuild) flush() error {
	if len(b.ids) == 0 {
		return nil
	}
	if err := b.g.InsertBatch(b.ids, b.vecs, b.threads); err != nil {
		return fmt.Errorf("insert %d vectors into the index: %w", len(b.ids), err)
	}
	b.inserted += len(b.ids)
	b.ids, b.vecs = b.ids[:0], b.vecs[:0]
	return nil
}

// writeIndex finishes the index of m (the new version, its blocks
// written): the pending inserts, a repair or rebuild when the tombstones
// call for one, or a full build from m's records; then it writes the
// chunk blobs and the graph blob through w and sets m.Index. b nil (indexing
// off) leaves m without an index. Errors: storage errors, a context error.
func (c *Compactor) writeIndex(ctx context.Context, b *indexBuild, w *segment.Writer, m *segment.Manifest) error {
	m.Index = nil
	if b == nil {
		return nil
	}
	if b.err != nil {
		return b.err
	}
	start := time.Now()
	dim := cmp.Or(b.coll.Dimension, m.Dimension)
	if dim == 0 {
		return nil // no record has an embedding yet
	}
	params := indexParams(b.coll, dim)
	build := buildIncremental
	g := b.g
	if g != nil {
		if err := b.flush(); err != nil {
			return err
		}
		if int64(g.Len()) != m.RecordCount {
			// The successor disagrees with the version (it must not): a
			// full build restores the invariant.
			c.logger.Warn("incremental vector index disagrees with the version: rebuilding", "collection", b.coll.ID,
				"vectors", g.Len(), "records", m.RecordCount)
			g = nil
		}
	}
	switch {
	case g == nil:
		build = buildFull
		var err error
		if g, err = c.buildFullIndex(ctx, params, m, b.threads, nil); err != nil {
			return err
		}
		b.inserted = g.Len()
	case g.NeedsRebuild():
		build = buildFull
		var err error
		if g, err = g.Rebuild(params, b.threads); err != nil {
			return fmt.Errorf("rebuild the index: %w", err)
		}
		b.inserted += g.Len()
	case g.NeedsRepair():
		build = buildRepaired
		g.Repair(b.threads)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("write index: %w", err)
	}
	var chunks []segment.BlobRef
	if build != buildFull && b.base != nil && b.base.Index != nil {
		chunks = slices.Clone(b.base.Index.Chunks)
	}
	ref, err := c.putIndex(ctx, w, g, chunks)
	if err != nil {
		return err
	}
	spent := b.spent + time.Since(start)
	ref.Build, ref.BuiltAt, ref.BuildSeconds, ref.Job = build, m.CreatedAt, spent.Seconds(), b.job
	m.Index = ref
	if m.FormatVersion < 1 {
		m.FormatVersion = 1
	}
	c.indexm.observe(b.coll.ID, build, spent, b.inserted, g.Stats())
	return nil
}

// putIndex writes graph g through w: its chunks after those listed in
// chunks (the chunk blobs a successor shares with its base), then the
// graph blob, durably. It returns the reference a manifest lists, with the
// graph's parameters and figures (Build and the times are the caller's),
// and caches g under its graph key: the graph is immutable from here (the
// next compaction takes a successor of it, queries of the version search
// it). Errors: storage errors.
func (c *Compactor) putIndex(ctx context.Context, w *segment.Writer, g *vindex.Graph, chunks []segment.BlobRef) (*segment.IndexRef, error) {
	graph, err := g.Encode(func(_ vindex.ChunkRef, chunk []byte) error {
		ref, err := w.PutIndexBlob(ctx, segment.IndexChunk, chunk)
		if err != nil {
			return err
		}
		chunks = append(chunks, ref)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("write index: %w", err)
	}
	if len(chunks) != len(g.Chunks()) {
		return nil, fmt.Errorf("write index: %d chunk keys for %d chunks", len(chunks), len(g.Chunks()))
	}
	gref, err := w.PutIndexBlob(ctx, segment.IndexGraph, graph)
	if err != nil {
		return nil, fmt.Errorf("write index: %w", err)
	}
	st, p := g.Stats(), g.Params()
	c.indexes.put(gref.Key, g)
	return &segment.IndexRef{
		Graph: gref, Chunks: chunks,
		Dimension: p.Dim, Distance: p.Distance.String(), M: p.M, EfConstruction: p.EfConstruction, EfSearch: p.EfSearch,
		Vectors: st.Vectors, Tombstones: st.Tombstones, Dropped: st.Dropped,
	}, nil
}

// buildFullIndex builds a graph of every record of m, read from its
// blocks and deltas; inserted, when set, is called with the vectors
// inserted so far after each batch. It returns at a batch boundary with
// ctx's error when ctx ends.
func (c *Compactor) buildFullIndex(ctx context.Context, p vindex.Params, m *segment.Manifest, threads int, inserted func(n int)) (*vindex.Graph, error) {
	g, err := vindex.New(p)
	if err != nil {
		return nil, fmt.Errorf("build the index: %w", err)
	}
	var ids []string
	var vecs [][]float32
	flush := func() error {
		if len(ids) == 0 {
			return nil
		}
		if err := g.InsertBatch(ids, vecs, threads); err != nil {
			return fmt.Errorf("build the index: %w", err)
		}
		ids, vecs = ids[:0], vecs[:0]
		if inserted != nil {
			inserted(g.Len())
		}
		return nil
	}
	var ferr error
	err = c.seg.ScanUncached(ctx, m, func(r materialize.Record) bool {
		if len(r.Embedding) == 0 {
			return true
		}
		// Not copied: the record is this scan's own (an uncached read),
		// and InsertBatch copies the vector into the graph's chunks.
		ids = append(ids, r.ID)
		vecs = append(vecs, r.Embedding)
		if len(ids) >= 4*indexBatch {
			ferr = flush()
		}
		return ferr == nil && ctx.Err() == nil
	})
	if err == nil {
		err = cmp.Or(ferr, ctx.Err())
	}
	if err == nil {
		err = flush()
	}
	if err != nil {
		return nil, fmt.Errorf("build the index from the blocks: %w", err)
	}
	return g, nil
}

// indexCache holds decoded graphs by their graph blob key (immutable: a
// key names one graph for good), least recently used first out, within a
// byte budget; the most recent entry stays whatever its size. An entry
// evicted, or dropped because a commit superseded its version (drop), is
// only weakly held: while a reader still holds it (a query of that
// version), open finds it again instead of decoding a second copy, and
// once no reader does, the collector frees it. A successor's graph shares
// its base's vector chunks, untouched pages and id map, so a superseded
// base held by a reader costs only what its successor does not share: the
// pages the change rewrote, its per-node slices, the metadata a filtered
// query loaded into its entry.
type indexCache struct {
	budget int64
	mu     sync.Mutex
	used   int64
	lru    *list.List // of *indexEntry, most recent at the front
	byKey  map[string]*list.Element
	weak   map[string]weak.Pointer[indexEntry] // evicted or dropped entries, while alive
	// loading serialises the decode of one key, so that concurrent
	// queries of a new version decode it once.
	loading map[string]*sync.Mutex
}

func newIndexCache() *indexCache {
	return &indexCache{budget: DefaultIndexCacheBytes, lru: list.New(), byKey: map[string]*list.Element{},
		weak: map[string]weak.Pointer[indexEntry]{}, loading: map[string]*sync.Mutex{}}
}

// indexEntry is one cached graph and, once a filtered query loaded it, the
// metadata of its version's records.
type indexEntry struct {
	key   string
	g     *vindex.Graph
	bytes int64

	metaMu sync.Mutex
	// meta is the metadata of each live record of g by its node slot
	// (vindex SlotOf; an empty map for a record without metadata, nil for
	// a slot not live): a filtered scan reads it for every record, which a
	// map by id would make a hash lookup each. nil until loaded.
	meta  []map[string]any
	stats *where.Stats
}

// graphBytes estimates a graph's memory: vectors and layer-0 links.
func graphBytes(g *vindex.Graph) int64 {
	st, p := g.Stats(), g.Params()
	return int64(st.Slots) * int64(4*p.Dim+4*(2*p.M+1)+48)
}

// get returns the entry of key: a cached one (now the most recent), or
// one evicted or dropped that a reader still holds (left out of the LRU);
// nil when neither.
func (ic *indexCache) get(key string) *indexEntry {
	ic.mu.Lock()
	defer ic.mu.Unlock()
	if el, ok := ic.byKey[key]; ok {
		ic.lru.MoveToFront(el)
		return el.Value.(*indexEntry)
	}
	if wp, ok := ic.weak[key]; ok {
		if e := wp.Value(); e != nil {
			return e
		}
		delete(ic.weak, key)
	}
	return nil
}

func (ic *indexCache) put(key string, g *vindex.Graph) *indexEntry {
	ic.mu.Lock()
	defer ic.mu.Unlock()
	if el, ok := ic.byKey[key]; ok {
		ic.lru.MoveToFront(el)
		return el.Value.(*indexEntry)
	}
	e := &indexEntry{key: key, g: g, bytes: graphBytes(g)}
	delete(ic.weak, key)
	ic.byKey[key] = ic.lru.PushFront(e)
	ic.used += e.bytes
	for ic.used > ic.budget && ic.lru.Len() > 1 {
		ic.evict(ic.lru.Back())
	}
	return e
}

// evict moves el's entry from the LRU to the weakly held entries (under
// ic.mu), pruning those the collector has freed.
func (ic *indexCache) evict(el *list.Element) {
	e := el.Value.(*indexEntry)
	ic.lru.Remove(el)
	delete(ic.byKey, e.key)
	ic.used -= e.bytes
	for k, wp := range ic.weak {
		if wp.Value() == nil {
			delete(ic.weak, k)
		}
	}
	ic.weak[e.key] = weak.Make(e)
}

// drop evicts the entry of key, if cached: the commit of a new version
// superseded the version whose graph it is (new queries open the new
// version; the next compaction builds on it).
func (ic *indexCache) drop(key string) {
	ic.mu.Lock()
	defer ic.mu.Unlock()
	if el, ok := ic.byKey[key]; ok {
		ic.evict(el)
	}
}

// open returns the cached graph of ref, decoding it from its blobs when
// it is not cached. Errors: a missing blob is a *segment.MissingError of
// KindIndex; bad bytes a *segment.CorruptError of KindIndex naming the
// blob; storage errors.
func (ic *indexCache) open(ctx context.Context, seg *segment.Store, ref *segment.IndexRef) (*indexEntry, error) {
	if e := ic.get(ref.Graph.Key); e != nil {
		return e, nil
	}
	ic.mu.Lock()
	l, ok := ic.loading[ref.Graph.Key]
	if !ok {
		l = &sync.Mutex{}
		ic.loading[ref.Graph.Key] = l
	}
	ic.mu.Unlock()
	l.Lock()
	defer func() {
		l.Unlock()
		ic.mu.Lock()
		delete(ic.loading, ref.Graph.Key)
		ic.mu.Unlock()
	}()
	if e := ic.get(ref.Graph.Key); e != nil {
		return e, nil
	}
	g, err := decodeIndex(ctx, seg, ref)
	if err != nil {
		return nil, err
	}
	return ic.put(ref.Graph.Key, g), nil
}

// decodeIndex reads and decodes the graph of ref.
func decodeIndex(ctx context.Context, seg *segment.Store, ref *segment.IndexRef) (*vindex.Graph, error) {
	graph, err := seg.ReadIndexBlob(ctx, ref.Graph)
	if err != nil {
		return nil, err
	}
	at := -1 // the chunk being decoded; -1: the graph blob
	g, err := vindex.Decode(graph, func(i int, _ vindex.ChunkRef) ([]byte, error) {
		if i >= len(ref.Chunks) {
			return nil, segment.CorruptIndex(ref.Graph.Key, fmt.Errorf("graph lists chunk %d, the manifest %d chunks", i, len(ref.Chunks)))
		}
		at = i
		return seg.ReadIndexBlob(ctx, ref.Chunks[i])
	})
	if err == nil && len(g.Chunks()) != len(ref.Chunks) {
		return nil, segment.CorruptIndex(ref.Graph.Key, fmt.Errorf("graph lists %d chunks, the manifest %d", len(g.Chunks()), len(ref.Chunks)))
	}
	if err == nil && g.Params().Dim != ref.Dimension {
		return nil, segment.CorruptIndex(ref.Graph.Key, fmt.Errorf("graph of dimension %d, the manifest says %d", g.Params().Dim, ref.Dimension))
	}
	if err != nil && errors.Is(err, vindex.ErrCorrupt) {
		key := ref.Graph.Key
		if at >= 0 {
			key = ref.Chunks[at].Key
		}
		return nil, segment.CorruptIndex(key, err)
	}
	return g, err
}

// storedIndexes is the IndexSource of the indexes compactions write: it
// opens a version's graph from the blob store through the Compactor's
// cache.
type storedIndexes struct{ c *Compactor }

func (s storedIndexes) Index(ctx context.Context, coll catalog.Collection, m *segment.Manifest) (Searcher, error) {
	if m == nil || m.Index == nil {
		return nil, nil
	}
	e, err := s.c.indexes.open(ctx, s.c.seg, m.Index)
	if err != nil {
		return nil, fmt.Errorf("open the vector index of version %d: %w", m.Version, err)
	}
	return &versionIndex{e: e, seg: s.c.seg, m: m}, nil
}

// versionIndex is a cached graph as one query uses it: a Searcher with the
// graph's scan cost model and, once loadMetadata ran, a MetadataSearcher,
// SelectivityEstimator and indexScanner over the version's records.
type versionIndex struct {
	e   *indexEntry
	seg *segment.Store
	m   *segment.Manifest
	// meta and stats are e's, taken by loadMetadata (read without a lock
	// after it: the query's goroutine loaded them).
	meta  []map[string]any
	stats *where.Stats
}

func (v *versionIndex) Search(q []float32, k, ef int, allow func(id string) bool) ([]Hit, error) {
	return v.e.g.Search(q, k, ef, allow)
}

// ScanWhere is the graph's exact scan of the records f accepts that are
// not in skip (after loadMetadata).
func (v *versionIndex) ScanWhere(qs [][]float32, k int, f *where.Filter, skip map[string]bool) ([][]Hit, error) {
	meta := v.meta
	return v.e.g.ScanBatch(qs, k, func(slot int, id string) bool {
		md := meta[slot]
		return md != nil && !skip[id] && f.Match(md)
	})
}

func (v *versionIndex) Len() int                            { return v.e.g.Len() }
func (v *versionIndex) BetweenDistances() bool              { return v.e.g.BetweenDistances() }
func (v *versionIndex) ScanCheaper(allowed, k, ef int) bool { return v.e.g.ScanCheaper(allowed, k, ef) }

// loadMetadata reads the metadata of the version's records (once per
// cached graph) for Metadata, ScanWhere and Selectivity: the statistics of
// every record, the metadata of those in the graph.
func (v *versionIndex) loadMetadata(ctx context.Context) error {
	e := v.e
	e.metaMu.Lock()
	defer e.metaMu.Unlock()
	if e.meta != nil {
		v.meta, v.stats = e.meta, e.stats
		return nil
	}
	meta := make([]map[string]any, e.g.Stats().Slots)
	none := map[string]any{} // shared by the records without metadata; never written
	stats := &where.Stats{}
	err := v.seg.ScanUncached(ctx, v.m, func(r materialize.Record) bool {
		md := map[string]any(r.Metadata)
		stats.Add(md)
		if slot, ok := e.g.SlotOf(r.ID); ok {
			if md == nil {
				md = none
			}
			meta[slot] = md
		}
		return ctx.Err() == nil
	})
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		return fmt.Errorf("read the metadata of version %d for a filtered search: %w", v.m.Version, err)
	}
	e.meta, e.stats = meta, stats
	v.meta, v.stats = meta, stats
	return nil
}

// metadataLoaded reports whether loadMetadata has nothing to read (it
// still has to run, to take the metadata for this query).
func (v *versionIndex) metadataLoaded() bool {
	v.e.metaMu.Lock()
	defer v.e.metaMu.Unlock()
	return v.e.meta != nil
}

// Metadata returns the metadata of record id (after loadMetadata); ok
// false when id is not in the graph (a record without an embedding).
func (v *versionIndex) Metadata(id string) (map[string]any, bool) {
	slot, ok := v.e.g.SlotOf(id)
	if !ok || v.meta[slot] == nil {
		return nil, false
	}
	if md := v.meta[slot]; len(md) > 0 {
		return md, true
	}
	return nil, true
}

// Selectivity estimates the fraction of the version's records f matches
// (after loadMetadata).
func (v *versionIndex) Selectivity(f *where.Filter) (float64, bool) {
	if v.stats == nil || v.stats.Records == 0 {
		return 0, false
	}
	return f.Selectivity(v.stats), true
}

// metadataLoader is an index whose metadata is read on demand, before the
// first filtered search.
type metadataLoader interface {
	metadataLoaded() bool
	loadMetadata(ctx context.Context) error
}

var (
	_ MetadataSearcher     = (*versionIndex)(nil)
	_ SelectivityEstimator = (*versionIndex)(nil)
	_ scanCostModel        = (*versionIndex)(nil)
	_ DistanceSearcher     = (*versionIndex)(nil)
	_ metadataLoader       = (*versionIndex)(nil)
	_ indexScanner         = (*versionIndex)(nil)
)

// has reports whether the graph of blob key is cached, or still held by a
// reader (without touching its recency): an estimate's test of whether the
// next build reads it.
func (ic *indexCache) has(key string) bool {
	ic.mu.Lock()
	defer ic.mu.Unlock()
	if _, ok := ic.byKey[key]; ok {
		return true
	}
	wp, ok := ic.weak[key]
	return ok && wp.Value() != nil
}

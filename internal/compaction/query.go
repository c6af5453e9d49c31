package compaction

import (
	"cmp"
	"container/heap"
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/materialize"
	"github.com/compactorhq/compactor/internal/segment"
	"github.com/compactorhq/compactor/internal/vindex"
	"github.com/compactorhq/compactor/internal/where"
)

// Bounds of one query.
const (
	MaxQueryK          = 1_000  // results per query embedding
	MaxQueryEmbeddings = 100    // query embeddings in one QueryRecords
	MaxQueryEf         = 10_000 // candidate list size of an index search
	MaxQueryIDs        = MaxReadIDs
)

// Hit is one candidate of an index search: a record id of the indexed
// version and its distance to the query.
type Hit = vindex.Hit

// Searcher is a segment version's vector index as a query uses it.
//
// Search returns up to k ids of the version nearest q (of the collection's
// dimension) by the collection's distance, nearest first, ties by id,
// among the ids allow accepts; it never returns an id allow rejects.
// ef (>= k) is the candidate list size: larger finds more of the true
// nearest at more cost. allow is called during the traversal (the filter
// applies while searching, not after it), from the calling goroutine only;
// nil accepts every id. Errors: a query the index cannot take (its
// dimension). It must be safe for concurrent Search calls.
// *vindex.Graph satisfies it.
type Searcher interface {
	Search(q []float32, k, ef int, allow func(id string) bool) ([]Hit, error)
}

// DistanceSearcher is a Searcher that can tell whether the distances it
// returns are, bit for bit, those Distance.Between computes from the
// query and the record's embedding (what an exact scan computes), so that
// a hit ranks the same whichever plan found it without reading its
// embedding again. *vindex.Graph satisfies it (see BetweenDistances).
type DistanceSearcher interface {
	Searcher
	BetweenDistances() bool
}

// MetadataSearcher is a Searcher that also knows the metadata of each
// indexed record, so that a where filter can be evaluated during the
// search. A Searcher without it serves unfiltered queries only; a filtered
// query then scans.
type MetadataSearcher interface {
	Searcher
	// Metadata returns the metadata of the indexed record id (nil when it
	// has none); ok false when id is not in the index.
	Metadata(id string) (md map[string]any, ok bool)
}

// SelectivityEstimator is implemented by an index that keeps metadata
// statistics of its version: the fraction (0..1) of its records that f
// matches, estimated; ok false when it cannot tell. The statistics are a
// where.Stats (additive, so a compaction keeps them by adding the records
// it writes and removing those it replaces), and the estimate is
// f.Selectivity(stats).
type SelectivityEstimator interface {
	Selectivity(f *where.Filter) (fraction float64, ok bool)
}

// IndexSource opens the vector index of a committed segment version.
// Index returns nil (and no error) when the version has none (built before
// indexing, with indexing disabled, or not built yet); a damaged index is
// an error CorruptKind recognises, so the query answers DATA_LOSS naming
// the blob. The Searcher stays valid while the caller holds the version's
// pin.
type IndexSource interface {
	Index(ctx context.Context, coll catalog.Collection, m *segment.Manifest) (Searcher, error)
}

// WithIndexSource makes queries use the indexes src opens. Without it
// queries use the indexes compactions write (see writeIndex).
func WithIndexSource(src IndexSource) Option {
	return func(c *Compactor) { c.index = src }
}

// MaxConcurrentScans bounds the exact query scans of the whole collection's
// blocks (and the first read of a version's metadata for filters) that run
// at once in a process: each decodes every block, so unbounded they would
// take the CPU from compactions and from each other. A query beyond it
// waits for a slot as long as its context allows. A scan of the index's
// memory takes no slot, as a graph search takes none.
const MaxConcurrentScans = 4

// acquireScan waits for a scan slot; the returned func frees it.
func (c *Compactor) acquireScan(ctx context.Context) (func(), error) {
	select {
	case c.scans <- struct{}{}:
		return func() { <-c.scans }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("wait for one of the %d scan slots (queries that scan run at most that many at once): %w", MaxConcurrentScans, ctx.Err())
	}
}

// MinIndexSelectivity is the estimated fraction of matching records below
// which a filtered query scans the matching records exactly instead of
// searching the graph with the filter (a graph search that rejects most
// nodes walks far to find k accepted ones, and loses recall doing so),
// for an index without a cost model of its own (see scanCostModel).
const MinIndexSelectivity = 0.01

// Query is one QueryRecords request, validated by the caller for shape (k,
// ef and counts in bounds); QueryRecords checks the dimensions.
type Query struct {
	// Embeddings are the query vectors, each of the collection's
	// dimension.
	Embeddings [][]float32
	// K is the results per embedding, 1..MaxQueryK.
	K int
	// Where selects the records searched; nil: every record.
	Where *where.Filter
	// IDs restricts the search to these record ids; nil: every record.
	IDs []string
	// Ef is the candidate list size of an index search; 0: the
	// collection's EfSearch.
	Ef int
	// Exact scans the matching records in the blocks instead of using the
	// index: the ground truth of the index's answers.
	Exact bool
	// Version, when > 0, queries that kept version alone (its index and
	// blocks, without the log tail); 0: the current view.
	Version int64
	// NoEmbeddings leaves the embeddings out of the hits' records
	// (Record.Embedding nil): the caller will not return them. It does not
	// change which records are found, their distances or their order; it
	// lets an index search whose distances are the scan's
	// (DistanceSearcher) read its hits' ids, documents and metadata alone
	// (segment.Store.GetLight) instead of their whole rows.
	NoEmbeddings bool
}

// QueryHit is one result: a materialized record and its distance.
type QueryHit struct {
	Record   materialize.Record
	Distance float32
}

// QueryResult is the answer of QueryRecords.
type QueryResult struct {
	// Hits holds, per query embedding, at most K records nearest first,
	// ties by id.
	Hits [][]QueryHit
	// SegmentVersion and LogPosition say what the query reflects: that
	// segment version plus the log up to that offset.
	SegmentVersion int64
	LogPosition    int64
	// Exact: the matching records were scanned, in the blocks or in the
	// index's memory (the same answer); false: found by a graph search.
	Exact bool
}

// QueryError is a query that cannot be answered as asked; it matches
// catalog.ErrInvalidArgument. Field names the request field
// ("embeddings[2]", "k").
type QueryError struct {
	Field   string
	Problem string
}

func (e *QueryError) Error() string { return e.Field + ": " + e.Problem }

// Is makes errors.Is(err, catalog.ErrInvalidArgument) hold.
func (e *QueryError) Is(target error) bool { return target == catalog.ErrInvalidArgument }

// queryMetrics are the query's metrics; nil fields without WithRegisterer.
type queryMetrics struct {
	duration *prometheus.HistogramVec
}

// query plans, the plan label of compactor_query_duration_seconds.
const (
	planExact = "exact"
	planIndex = "index"
)

func newQueryMetrics(reg prometheus.Registerer) queryMetrics {
	d := promauto.With(reg).NewHistogramVec(prometheus.HistogramOpts{
		Name:    "compactor_query_duration_seconds",
		Help:    "Duration of QueryRecords calls that succeeded, by plan: exact (a scan of the matching records) or index (a vector index search merged with the log tail).",
		Buckets: []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10},
	}, []string{"plan"})
	d.WithLabelValues(planExact)
	d.WithLabelValues(planIndex)
	return queryMetrics{duration: d}
}

// QueryRecords returns, for each of q.Embeddings, the q.K records of
// collectionID's materialized view nearest to it by the collection's
// distance, that q.Where and q.IDs accept: nearest first, ties by id.
//
// With q.Version set, it searches that kept version alone (its index and
// blocks, no log tail), as GetRecordsAt reads it; errors then also include
// a *catalog.VersionNotFoundError naming the kept versions.
//
// It reads what GetRecords reads: in one catalog snapshot, the collection's
// row and its uncompacted log tail, then the segment version current at
// that snapshot (pinned), and applies the tail with the materialization
// rules, so a query sees every record appended before it, and a tail
// update or delete shadows the segment's record.
//
// Plan: an exact scan of segment blocks, deltas and tail when q.Exact, when
// the collection's index is disabled or the version has none, when q.IDs is
// set (the records are read by id), or when q.Where is set and the index
// cannot filter during the search. When q.Where is set and the index
// estimates so few matching records that a scan of them is cheaper than a
// filtered walk (its ScanCheaper, or fewer than MinIndexSelectivity), the
// scan is of the index's memory when it can answer exactly as the blocks
// would (an indexScanner with metadata whose distances are the scan's,
// BetweenDistances): q.Where is evaluated on each indexed record's
// metadata, the accepted ones get their exact distance from the index's
// vector, and only the k nearest per embedding are read from the blocks;
// else it is a scan of the blocks. Otherwise the index is searched with a
// filter that rejects ids the tail shadows and records q.Where rejects.
// Either use of the index merges its candidates with the exact results of
// the tail's records, and the two exact plans give the same answer.
//
// Errors: catalog.ErrNotFound; a *QueryError (matching
// catalog.ErrInvalidArgument) for an embedding of another dimension than
// the collection's or a bound exceeded; storage errors; damaged stored data
// is an error CorruptKind recognises.
func (c *Compactor) QueryRecords(ctx context.Context, collectionID string, q Query) (QueryResult, error) {
	if err := checkQuery(q); err != nil {
		return QueryResult{}, err
	}
	start := time.Now()
	var res QueryResult
	var err error
	if q.Version > 0 {
		// A version read is not retried on another version: a blob gone
		// means the version was collected (NOT_FOUND) or data loss.
		res, err = c.queryRecords(ctx, collectionID, q)
		err = c.versionGone(ctx, collectionID, q.Version, err)
	} else {
		_, err = c.retryRead(ctx, collectionID, func() (ReadResult, error) {
			var err error
			res, err = c.queryRecords(ctx, collectionID, q)
			return ReadResult{}, err
		})
	}
	c.noteCorrupt("query", collectionID, err)
	if err != nil {
		return QueryResult{}, err
	}
	if c.query.duration != nil {
		plan := planIndex
		if res.Exact {
			plan = planExact
		}
		c.query.duration.WithLabelValues(plan).Observe(time.Since(start).Seconds())
	}
	return res, nil
}

func checkQuery(q Query) error {
	switch {
	case len(q.Embeddings) == 0:
		return &QueryError{"embeddings", "give at least one query embedding"}
	case len(q.Embeddings) > MaxQueryEmbeddings:
		return &QueryError{"embeddings", fmt.Sprintf("%d query embeddings, more than the limit of %d", len(q.Embeddings), MaxQueryEmbeddings)}
	case q.K < 1 || q.K > MaxQueryK:
		return &QueryError{"k", fmt.Sprintf("%d is outside 1..%d", q.K, MaxQueryK)}
	case q.Ef < 0 || q.Ef > MaxQueryEf:
		return &QueryError{"ef", fmt.Sprintf("%d is outside 0..%d (0: the collection's ef_search)", q.Ef, MaxQueryEf)}
	case q.Version < 0:
		return &QueryError{"version", fmt.Sprintf("%d: versions start at 1 (0: the current view)", q.Version)}
	case len(q.IDs) > MaxQueryIDs:
		return &QueryError{"ids", fmt.Sprintf("%d ids, more than the limit of %d", len(q.IDs), MaxQueryIDs)}
	}
	for i, id := range q.IDs {
		if id == "" {
			return &QueryError{fmt.Sprintf("ids[%d]", i), "is empty: record ids are never empty"}
		}
	}
	for i, e := range q.Embeddings {
		if len(e) == 0 {
			return &QueryError{fmt.Sprintf("embeddings[%d]", i), "is empty"}
		}
		if len(e) != len(q.Embeddings[0]) {
			return &QueryError{fmt.Sprintf("embeddings[%d]", i), fmt.Sprintf("has %d dimensions, embeddings[0] has %d", len(e), len(q.Embeddings[0]))}
		}
		for j, v := range e {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return &QueryError{fmt.Sprintf("embeddings[%d][%d]", i, j), fmt.Sprintf("%v is not a finite number", v)}
			}
		}
	}
	return nil
}

func (c *Compactor) queryRecords(ctx context.Context, collectionID string, q Query) (QueryResult, error) {
	ids := q.IDs
	if ids != nil {
		ids = slices.Clone(ids)
		slices.Sort(ids)
		ids = slices.Compact(ids)
	}
	var (
		tail    catalog.Tail
		coll    catalog.Collection
		m       *segment.Manifest
		release func()
		err     error
	)
	if q.Version > 0 {
		// One kept version alone: no tail.
		if coll, m, release, err = c.openVersion(ctx, collectionID, q.Version); err != nil {
			return QueryResult{}, fmt.Errorf("query records of %s at version %d: %w", collectionID, q.Version, err)
		}
		defer release()
	} else {
		// The tail and the row in one snapshot, as GetRecords reads them.
		if ids != nil {
			tail, err = c.cat.ReadTailIDs(ctx, collectionID, ids)
		} else {
			tail, err = c.cat.ReadTailRange(ctx, collectionID, catalog.TailRange{Unbounded: true})
		}
		if err != nil {
			return QueryResult{}, fmt.Errorf("query records of %s: %w", collectionID, err)
		}
		coll = tail.Collection
		// The version was current at the snapshot, so it was not retired
		// then (see getRecords).
		release = c.pins.pin(collectionID, coll.ManifestKey, false)
		defer release()
	}
	if dim := coll.Dimension; dim > 0 && len(q.Embeddings[0]) != dim {
		return QueryResult{}, &QueryError{"embeddings[0]", fmt.Sprintf("has %d dimensions, the collection's dimension is %d", len(q.Embeddings[0]), dim)}
	}
	if q.Version == 0 {
		if m, err = c.manifest(ctx, coll); err != nil {
			return QueryResult{}, fmt.Errorf("query records of %s: %w", collectionID, err)
		}
	}
	res := QueryResult{SegmentVersion: coll.SegmentVersion, LogPosition: coll.LogPosition, Exact: true}
	s := newSearch(q, coll.Index.Distance)
	if coll.Dimension == 0 {
		// Nothing was ever written with an embedding: no record.
		res.Hits = s.results()
		return res, nil
	}
	switch {
	case ids != nil:
		err = c.scanIDs(ctx, m, ids, tail.Ops, s)
	default:
		idx, plan, perr := c.planIndex(ctx, coll, m, q)
		if perr != nil {
			return QueryResult{}, fmt.Errorf("query records of %s: %w", collectionID, perr)
		}
		switch plan {
		case searchGraph:
			res.Exact = false
			err = c.searchIndex(ctx, coll, m, idx, tail.Ops, q, s, false)
		case scanIndex:
			// In memory, like a graph search: no scan slot.
			err = c.searchIndex(ctx, coll, m, idx, tail.Ops, q, s, true)
		default:
			var release func()
			if release, err = c.acquireScan(ctx); err == nil {
				err = c.scanAll(ctx, m, tail.Ops, s)
				release()
			}
		}
	}
	if err != nil {
		return QueryResult{}, fmt.Errorf("query records of %s: %w", collectionID, err)
	}
	res.Hits = s.results()
	return res, nil
}

// queryPlan is how a query without an id restriction is answered.
type queryPlan int

const (
	// scanBlocks offers every record of the view, read from the blocks,
	// to the search (scanAll).
	scanBlocks queryPlan = iota
	// searchGraph walks the index's graph with the filter (searchIndex).
	searchGraph
	// scanIndex computes the exact distance of every record of the index
	// the filter accepts, from the vectors and metadata the index holds in
	// memory (searchIndex with an indexScanner): the answer of scanBlocks
	// for a selective filter, reading only the hits' rows.
	scanIndex
)

// indexScanner is an index that can answer a filtered query exactly from
// memory: ScanWhere returns, per query embedding, the k nearest of its
// records whose metadata f accepts, skipping the ids in skip, by distance
// then id (an exact scan: f is evaluated on every record). With
// BetweenDistances (DistanceSearcher) it gives, with the tail merged, the
// answer of a scan of the blocks. versionIndex is one (over
// vindex.Graph.ScanBatch).
type indexScanner interface {
	ScanWhere(qs [][]float32, k int, f *where.Filter, skip map[string]bool) ([][]Hit, error)
}

// planIndex returns the plan of q and, unless it scans the blocks, the
// index it uses.
func (c *Compactor) planIndex(ctx context.Context, coll catalog.Collection, m *segment.Manifest, q Query) (Searcher, queryPlan, error) {
	if q.Exact || c.index == nil || coll.Index.Disabled || m == nil {
		return nil, scanBlocks, nil
	}
	idx, err := c.index.Index(ctx, coll, m)
	if err != nil || idx == nil {
		return nil, scanBlocks, err
	}
	if !q.Where.MatchAll() {
		if _, ok := idx.(MetadataSearcher); !ok {
			return nil, scanBlocks, nil
		}
		if l, ok := idx.(metadataLoader); ok {
			// The first filtered query of a version reads its records'
			// metadata: a whole-collection scan, so it takes a scan slot.
			release := func() {}
			if !l.metadataLoaded() {
				var err error
				if release, err = c.acquireScan(ctx); err != nil {
					return nil, scanBlocks, err
				}
			}
			err := l.loadMetadata(ctx)
			release()
			if err != nil {
				return nil, scanBlocks, err
			}
		}
		if est, ok := idx.(SelectivityEstimator); ok {
			if f, ok := est.Selectivity(q.Where); ok && scanCheaper(idx, f, q, coll.Index.EfSearch) {
				if scansExactly(idx) {
					return idx, scanIndex, nil
				}
				return nil, scanBlocks, nil
			}
		}
	}
	return idx, searchGraph, nil
}

// scansExactly reports whether idx (a MetadataSearcher) answers a
// filtered query from memory as a scan of the blocks would: an
// indexScanner whose distances are the scan's to the bit. A cosine index
// whose vectors another kernel normalised does not (its stored vectors
// are not those Between normalises), and its filtered queries scan the
// blocks until the next full build.
func scansExactly(idx Searcher) bool {
	_, ok := idx.(indexScanner)
	ds, between := idx.(DistanceSearcher)
	return ok && between && ds.BetweenDistances()
}

// scanCostModel is an index that prices a filtered walk against a scan of
// the records its filter accepts (*vindex.Graph: ScanCheaper).
type scanCostModel interface {
	Len() int
	ScanCheaper(allowed, k, ef int) bool
}

// scanCheaper reports whether a filtered query that fraction of the
// version's records match scans rather than searches: by the index's own
// cost model when it has one, else below MinIndexSelectivity.
func scanCheaper(idx Searcher, fraction float64, q Query, efSearch int) bool {
	if m, ok := idx.(scanCostModel); ok {
		ef := q.Ef
		if ef == 0 {
			ef = efSearch
		}
		return m.ScanCheaper(int(math.Ceil(fraction*float64(m.Len()))), q.K, ef)
	}
	return fraction < MinIndexSelectivity
}

// scanAll offers every record of the view (segment with its deltas,
// merged in id order with the tail's operations) to s.
func (c *Compactor) scanAll(ctx context.Context, m *segment.Manifest, ops []materialize.OperationRecord, s *search) error {
	// ops are sorted by id then offset; each segment record meets the tail
	// operations of its id, and tail-only ids are applied to nothing.
	flushBefore := func(id string, inclusive bool) {
		for len(ops) > 0 && (ops[0].ID < id || inclusive) {
			n := runOf(ops)
			if r := materialize.Apply(nil, ops[:n]); r != nil {
				s.offer(r)
			}
			ops = ops[n:]
		}
	}
	err := c.seg.Scan(ctx, m, "", func(r materialize.Record) bool {
		flushBefore(r.ID, false)
		if len(ops) > 0 && ops[0].ID == r.ID {
			n := runOf(ops)
			if v := materialize.Apply(&r, ops[:n]); v != nil {
				s.offer(v)
			}
			ops = ops[n:]
			return true
		}
		s.offer(&r)
		return true
	})
	if err != nil {
		return err
	}
	flushBefore("", true)
	return ctx.Err()
}

// scanIDs offers the records of ids (sorted, unique) to s.
func (c *Compactor) scanIDs(ctx context.Context, m *segment.Manifest, ids []string, ops []materialize.OperationRecord, s *search) error {
	base, err := c.seg.Get(ctx, m, ids)
	if err != nil {
		return err
	}
	viewOfIDs(ids, base, ops, s.offer)
	return nil
}

// searchIndex asks idx for candidates per query embedding, with a filter
// that rejects the ids the tail shadows and the records q.Where rejects,
// reads the candidates' records, and merges them with the tail's records,
// searched exactly. The candidates come from a graph search, or with scan
// from the exact in-memory scan of an indexScanner (planIndex checked
// that idx is one whose distances are the scan's): the k nearest accepted
// records of the version that the tail leaves alone, which with the
// tail's records hold the k nearest of the view.
func (c *Compactor) searchIndex(ctx context.Context, coll catalog.Collection, m *segment.Manifest, idx Searcher, ops []materialize.OperationRecord, q Query, s *search, scan bool) error {
	shadowed := make(map[string]bool)
	var tailIDs []string
	for i := 0; i < len(ops); {
		n := runOf(ops[i:])
		shadowed[ops[i].ID] = true
		tailIDs = append(tailIDs, ops[i].ID)
		i += n
	}
	var allow func(string) bool // nil: every live record (no call per node)
	if len(shadowed) > 0 {
		allow = func(id string) bool { return !shadowed[id] }
	}
	if !q.Where.MatchAll() {
		ms := idx.(MetadataSearcher) // planIndex checked it
		allow = func(id string) bool {
			if shadowed[id] {
				return false
			}
			md, ok := ms.Metadata(id)
			return ok && q.Where.Match(md)
		}
	}
	ef := q.Ef
	if ef == 0 {
		ef = coll.Index.EfSearch
	}
	ef = max(ef, q.K)
	// Candidates of every query embedding, read once.
	hits := make([][]Hit, len(q.Embeddings))
	if scan {
		var err error
		if hits, err = idx.(indexScanner).ScanWhere(q.Embeddings, q.K, q.Where, shadowed); err != nil {
			return fmt.Errorf("scan the index of version %d: %w", coll.SegmentVersion, err)
		}
	} else {
		for i, e := range q.Embeddings {
			h, err := idx.Search(e, q.K, ef, allow)
			if err != nil {
				return fmt.Errorf("search the index of version %d: %w", coll.SegmentVersion, err)
			}
			hits[i] = h
		}
	}
	want := make(map[string]bool)
	for i := range hits {
		for _, h := range hits[i] {
			want[h.ID] = true
		}
	}
	// The tail's records: their segment values with the tail applied.
	if err := c.scanIDs(ctx, m, tailIDs, ops, s); err != nil {
		return err
	}
	if len(want) == 0 {
		return nil
	}
	cand := make([]string, 0, len(want))
	for id := range want {
		cand = append(cand, id)
	}
	slices.Sort(cand)
	// Without embeddings to return, the index's distances (when they are
	// the scan's) spare reading the hits' embeddings.
	ds, ok := idx.(DistanceSearcher)
	light := q.NoEmbeddings && ok && ds.BetweenDistances()
	read := c.seg.Get
	if light {
		read = c.seg.GetLight
	}
	recs, err := read(ctx, m, cand)
	if err != nil {
		return err
	}
	for i := range q.Embeddings {
		for _, h := range hits[i] {
			r, ok := recs[h.ID]
			if !ok {
				// The index names a record its version does not hold.
				return fmt.Errorf("index of version %d returned record %q, which the version does not hold: %w", coll.SegmentVersion, h.ID, segment.ErrCorrupt)
			}
			if light {
				s.offerHit(i, &r, h.Distance)
			} else {
				s.offerOne(i, &r)
			}
		}
	}
	return nil
}

// runOf returns the number of leading operations of ops with ops[0]'s id.
func runOf(ops []materialize.OperationRecord) int {
	n := 1
	for n < len(ops) && ops[n].ID == ops[0].ID {
		n++
	}
	return n
}

// search keeps, per query embedding, the k nearest records offered that
// its filter accepts.
type search struct {
	q     Query
	dist  vindex.Distance
	heaps []hitHeap
}

func newSearch(q Query, d vindex.Distance) *search {
	if d == vindex.DistanceUnspecified {
		d = vindex.DefaultDistance
	}
	s := &search{q: q, dist: d, heaps: make([]hitHeap, len(q.Embeddings))}
	for i := range s.heaps {
		s.heaps[i] = make(hitHeap, 0, q.K+1)
	}
	return s
}

// offer considers r (a materialized record) for every query embedding.
func (s *search) offer(r *materialize.Record) {
	if !s.q.Where.Match(r.Metadata) || len(r.Embedding) != len(s.q.Embeddings[0]) {
		return
	}
	for i, e := range s.q.Embeddings {
		s.push(i, r, s.dist.Between(e, r.Embedding))
	}
}

// offerOne considers r for query embedding i only. The distance is
// computed again, as the scan computes it, so that a record ranks the same
// whichever plan found it.
func (s *search) offerOne(i int, r *materialize.Record) {
	if !s.q.Where.Match(r.Metadata) || len(r.Embedding) != len(s.q.Embeddings[i]) {
		return
	}
	s.push(i, r, s.dist.Between(s.q.Embeddings[i], r.Embedding))
}

// offerHit considers r, found by the index at distance d (the scan's
// distance: DistanceSearcher), for query embedding i only; r may lack its
// embedding.
func (s *search) offerHit(i int, r *materialize.Record, d float32) {
	if !s.q.Where.Match(r.Metadata) {
		return
	}
	s.push(i, r, d)
}

func (s *search) push(i int, r *materialize.Record, d float32) {
	h := &s.heaps[i]
	if len(*h) == s.q.K {
		worst := (*h)[0]
		if !nearer(d, r.ID, worst.Distance, worst.Record.ID) {
			return
		}
		heap.Pop(h)
	}
	heap.Push(h, QueryHit{Record: *r, Distance: d})
}

// results returns the hits per query embedding, nearest first, ties by id;
// without their embeddings when the query said NoEmbeddings.
func (s *search) results() [][]QueryHit {
	out := make([][]QueryHit, len(s.heaps))
	for i, h := range s.heaps {
		hits := []QueryHit(h)
		if s.q.NoEmbeddings {
			for j := range hits {
				hits[j].Record.Embedding = nil
			}
		}
		slices.SortFunc(hits, func(a, b QueryHit) int {
			return cmp.Or(cmp.Compare(a.Distance, b.Distance), strings.Compare(a.Record.ID, b.Record.ID))
		})
		out[i] = hits
	}
	return out
}

// nearer orders results: by distance, then by id.
func nearer(d float32, id string, d2 float32, id2 string) bool {
	if d != d2 {
		return d < d2
	}
	return id < id2
}

// hitHeap is a max-heap of the k nearest so far: the farthest on top.
type hitHeap []QueryHit

func (h hitHeap) Len() int { return len(h) }
func (h hitHeap) Less(i, j int) bool {
	return nearer(h[j].Distance, h[j].Record.ID, h[i].Distance, h[i].Record.ID)
}
func (h hitHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *hitHeap) Push(x any)   { *h = append(*h, x.(QueryHit)) }
func (h *hitHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

var _ DistanceSearcher = (*vindex.Graph)(nil)

var _ scanCostModel = (*vindex.Graph)(nil)

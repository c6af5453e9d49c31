package compaction

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/jobtype"
	"github.com/compactorhq/compactor/internal/segment"
	"github.com/compactorhq/compactor/internal/vindex"
)

// An index rebuild (a job of kind jobtype.KindIndexRebuild) builds a fresh
// vector index from every record of the collection's current version, read
// from its blocks and deltas (never from the previous index, so a damaged
// index is repaired by it), optionally with new HNSW parameters, and
// commits a new version whose manifest lists the same blocks and deltas
// and the new index. The commit is the compactions' compare-and-swap on the
// segment version (with the compaction offset unchanged): the queue runs one
// job of a collection at a time, so a version committed meanwhile means
// another writer raced it, and the rebuild fails with the transient
// catalog.ErrConflict rather than committing an index of an older version
// (queue it again). On cancel or failure the blobs it wrote (the new
// index's) are removed and the previous version stays current with its
// index; nothing live is deleted.

// ErrIndexDisabled: the collection was created without a vector index
// (indexing off), so there is nothing to rebuild.
var ErrIndexDisabled = errors.New("the collection has indexing off")

// Notes of an index rebuild that committed nothing.
const (
	NoteNothingToIndex = "nothing to rebuild: the collection has no segment version with vectors yet"
)

// RebuildOptions are the settings of one index rebuild.
type RebuildOptions struct {
	// Params are the HNSW parameters of the new index (0: the
	// collection's); on commit they become the collection's.
	Params jobtype.IndexRebuildParams
	// Progress, when set, is called from the calling goroutine: once in
	// jobtype.PhaseIndexing with the plan and VectorsTotal (the version's
	// records), after every batch of vectors inserted, and once in
	// jobtype.PhaseCommitting.
	Progress func(jobtype.Progress)
	// JobID is the id of the job the rebuild runs as, recorded with the
	// index ("" for none).
	JobID string
}

// RebuildSettings returns the index settings coll has after a rebuild
// with p: its own with p's non-zero M and EfConstruction. Errors: a
// *catalog.IndexSettingsError (matching catalog.ErrInvalidArgument) for
// parameters out of bounds, ErrIndexDisabled for a collection without an
// index.
func RebuildSettings(coll catalog.Collection, p jobtype.IndexRebuildParams) (catalog.IndexSettings, error) {
	if coll.Index.Disabled {
		return catalog.IndexSettings{}, fmt.Errorf("collection %s: %w: create it with an index to query it by one", coll.ID, ErrIndexDisabled)
	}
	s := coll.Index.WithDefaults()
	if p.M > 0 {
		s.M = p.M
	}
	if p.EfConstruction > 0 {
		s.EfConstruction = p.EfConstruction
	} else if s.EfConstruction < s.M {
		s.EfConstruction = s.M // a new M above the collection's ef_construction raises it
	}
	if err := s.Validate(); err != nil {
		return catalog.IndexSettings{}, err
	}
	return s, nil
}

// PrepareRebuild runs an index rebuild of collectionID up to its commit:
// the new index's blobs and the new version's manifest are written, the
// catalog is not touched. A collection without a version with vectors has
// nothing to rebuild: the Result has Note NoteNothingToIndex and Commit
// commits nothing (the settings stay as they are). Errors:
// catalog.ErrNotFound, ErrIndexDisabled, catalog.ErrInvalidArgument
// (parameters out of bounds), a context error when ctx ends (checked for
// every record read and every batch inserted), storage errors (transient
// ones match ErrTransient), damaged blocks (not transient); after an error
// the blobs written are removed and the returned *Prepared has ended.
func (c *Compactor) PrepareRebuild(ctx context.Context, collectionID string, opts RebuildOptions) (out *Prepared, err error) {
	onDone := func(err error) error {
		c.noteCorrupt("index rebuild", collectionID, err)
		return err
	}
	var res Result
	defer func() {
		err = c.missingBlob(ctx, "rebuild the index of", collectionID, err)
		onDone(err)
		if err != nil {
			out = &Prepared{res: res}
		}
	}()
	report := func(p jobtype.Progress) {
		if opts.Progress != nil {
			opts.Progress(p)
		}
	}
	_, span := startSpan(ctx, "rebuild index")
	defer func() { endSpan(span, err) }()
	coll, err := c.cat.GetCollection(ctx, collectionID)
	if err != nil {
		return nil, fmt.Errorf("rebuild the index of %s: %w", collectionID, err)
	}
	settings, err := RebuildSettings(coll, opts.Params)
	if err != nil {
		return nil, fmt.Errorf("rebuild the index of %s: %w", collectionID, err)
	}
	unpin := c.pins.pin(collectionID, coll.ManifestKey, true)
	defer func() {
		if err != nil {
			unpin()
		}
	}()
	res = Result{
		CollectionID: collectionID, OffsetStart: coll.CompactionOffset, OffsetEnd: coll.CompactionOffset,
		VersionBefore: coll.SegmentVersion, VersionAfter: coll.SegmentVersion, RecordCount: coll.RecordCount,
	}
	nothing := func() (*Prepared, error) {
		res.Note = NoteNothingToIndex
		return &Prepared{c: c, res: res, unpin: unpin, onDone: onDone, what: "rebuild the index of"}, nil
	}
	if coll.SegmentVersion == 0 {
		return nothing()
	}
	base, err := c.seg.ReadManifest(ctx, coll.ManifestKey)
	if err != nil {
		return nil, fmt.Errorf("rebuild the index of %s: read manifest of version %d: %w", collectionID, coll.SegmentVersion, classifyRead(err))
	}
	dim := cmp.Or(coll.Dimension, base.Dimension)
	if dim == 0 || base.RecordCount == 0 {
		return nothing()
	}
	p := jobtype.Progress{Phase: jobtype.PhaseIndexing, Planned: true, OffsetStart: coll.CompactionOffset, OffsetEnd: coll.CompactionOffset,
		VersionBefore: coll.SegmentVersion, VectorsTotal: base.RecordCount}
	report(p)
	start := time.Now()
	params := vindex.Params{Dim: dim, Distance: settings.Distance, M: settings.M, EfConstruction: settings.EfConstruction, EfSearch: settings.EfSearch}
	g, err := c.buildFullIndex(ctx, params, base, max(1, runtime.GOMAXPROCS(0)), func(n int) {
		p.VectorsIndexed = int64(n)
		report(p)
	})
	if err != nil {
		return nil, fmt.Errorf("rebuild the index of %s: %w", collectionID, classifyRead(err))
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("rebuild the index of %s: %w", collectionID, err)
	}
	w := c.seg.NewWriter(collectionID, base)
	defer func() {
		if err != nil {
			c.abortWriter(ctx, w, collectionID)
		}
	}()
	ref, err := c.putIndex(ctx, w, g, nil)
	if err != nil {
		return nil, fmt.Errorf("rebuild the index of %s: %w", collectionID, classifyWrite(ctx, err))
	}
	m := *base // the same blocks and deltas
	m.Version = base.Version + 1
	m.CreatedAt = c.seg.Now().UTC().Round(0) // the clock of every manifest the store writes
	spent := time.Since(start)
	ref.Build, ref.BuiltAt, ref.BuildSeconds, ref.Job = buildRebuild, m.CreatedAt, spent.Seconds(), opts.JobID
	m.Index = ref
	if m.FormatVersion < 1 {
		m.FormatVersion = 1
	}
	key, msize, err := w.WriteManifest(ctx, &m)
	if err != nil {
		return nil, fmt.Errorf("rebuild the index of %s: write manifest: %w", collectionID, classifyWrite(ctx, err))
	}
	c.indexm.observe(collectionID, buildRebuild, spent, g.Len(), g.Stats())
	res.BytesWritten = ref.Bytes() + msize
	res.RecordCount = m.RecordCount
	p.Phase, p.BytesWritten = jobtype.PhaseCommitting, res.BytesWritten
	report(p)
	// The last point where cancellation is honoured: what remains is the
	// commit, which is not interrupted.
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("rebuild the index of %s: before commit: %w", collectionID, err)
	}
	res.VersionAfter = m.Version
	// The version row as a compaction's: the digest of the same records
	// included.
	cm := commitOf(collectionID, coll.SegmentVersion, &m, key, coll.CompactionOffset)
	cm.Index = &settings
	return &Prepared{c: c, res: res, w: w, unpin: unpin, onDone: onDone, what: "rebuild the index of", cm: cm, supersedes: supersededIndex(base, &m)}, nil
}

// CurrentIndex returns the vector index of coll's current version as its
// manifest lists it (one manifest read); nil before the first version, with
// indexing off, or for a version without one. Errors: the manifest's read.
func (c *Compactor) CurrentIndex(ctx context.Context, coll catalog.Collection) (*segment.IndexRef, error) {
	if coll.SegmentVersion == 0 || coll.Index.Disabled {
		return nil, nil
	}
	m, err := c.seg.ReadManifest(ctx, coll.ManifestKey)
	if err != nil {
		return nil, fmt.Errorf("collection %s: read manifest of version %d: %w", coll.ID, coll.SegmentVersion, classifyRead(err))
	}
	return m.Index, nil
}

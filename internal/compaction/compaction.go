// Package compaction runs one compaction of one collection (DESIGN.md §2, §7):
// read the log slice after the compaction offset, materialize it against the
// current segment with the rules of package materialize, write the changed
// blocks and a new manifest (copy-on-write), and commit in one catalog
// transaction (compare-and-swap on the segment version, advance of the
// compaction offset, the job's end); the log rows no kept version needs are
// purged afterwards, off the job's critical path. The log slice is streamed: sorted
// runs of operation records (spilled to disk past Config.MemoryBytes) are
// merged by record id and merge-joined with the base blocks, one at a time,
// into blocks encoded in parallel.
//
// It also holds the read path (segment + uncompacted log tail, materialized
// with the same rules, so a read returns the same records before and after a
// compaction; or one kept version alone), the version history and rollback
// (versions.go), and the garbage collection of superseded versions and
// orphan blocks.
package compaction

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/spf13/pflag"
	"go.opentelemetry.io/otel/trace"

	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/jobtype"
	"github.com/compactorhq/compactor/internal/materialize"
	"github.com/compactorhq/compactor/internal/metric"
	"github.com/compactorhq/compactor/internal/segment"
)

// Config tunes compactions.
type Config struct {
	// MaxRecords is the most log records one compaction reads
	// (max_compaction_size); the rest is left for a follow-up job. Memory
	// does not grow with it (MemoryBytes bounds a compaction's), so the
	// default (10,000,000) lets one job take a large backlog whole: chained
	// jobs each rewrite the blocks the previous one wrote.
	MaxRecords int
	// BatchRecords is how many log records are read per batch; cancellation
	// is honoured between batches.
	BatchRecords int
	// MemoryBytes bounds the memory of one compaction, in bytes: a quarter
	// of it holds the sorted runs of operation records read from the log;
	// past that, runs spill to temporary files in SpillDir. The rest is the
	// run being filled, the writer's window and encoders, and the garbage
	// collector's headroom (Go's heap grows to about twice what is live).
	MemoryBytes int64
	// SpillDir is the directory of the spilled runs (default os.TempDir()).
	// The files are unlinked as soon as they are created: nothing is left
	// behind, even by a crash.
	SpillDir string
	// VersionsToKeep is how many segment versions GC retains (>= 1; the
	// current one is always kept).
	VersionsToKeep int
	// GCGrace is how long GC waits, after a segment version leaves the
	// retained set, before it deletes the version's blobs: the longest a
	// read may take (at least MinGCGrace). Orphan blobs (no version
	// references them) must be this old too, and are spared while a
	// compaction of their collection runs.
	GCGrace time.Duration
	// CommitTimeout bounds the steps of a compaction that cancellation and
	// shutdown do not interrupt: the commit transaction (compare-and-swap,
	// offset advance, the job row), the purge of the compacted log rows
	// after it, and, after a failure, the removal of the blobs it wrote. It
	// is a safety net
	// against a catalog or blob store that hangs, not a performance target:
	// a commit may also wait for the catalog's single writer while another
	// compaction commits, so the default (10 min) is far above what a
	// maximum-size commit takes on a busy machine (seconds).
	CommitTimeout time.Duration
	// IndexCacheBytes bounds, in bytes (estimated: vectors and links), the
	// decoded vector indexes kept in process for queries and the next
	// compaction, least recently used out first; the index used last stays
	// even when it alone is over the bound. 0 keeps only that one.
	IndexCacheBytes int64
}

// DefaultConfig returns the defaults documented on the flags.
func DefaultConfig() Config {
	return Config{MaxRecords: 10_000_000, BatchRecords: 10_000, MemoryBytes: 256 << 20, SpillDir: os.TempDir(),
		VersionsToKeep: 2, GCGrace: time.Hour, CommitTimeout: 10 * time.Minute, IndexCacheBytes: DefaultIndexCacheBytes}
}

// RegisterFlags registers the compaction flags on fs with c's values as
// defaults.
func (c *Config) RegisterFlags(fs *pflag.FlagSet) {
	fs.IntVar(&c.MaxRecords, "max-compaction-size", c.MaxRecords, "most log records one compaction job reads; a larger backlog continues in follow-up jobs")
	fs.IntVar(&c.BatchRecords, "log-batch-size", c.BatchRecords, "log records read per batch (cancellation is honoured between batches)")
	fs.Var((*byteSize)(&c.MemoryBytes), "compaction-memory", "memory one compaction may use (e.g. 256MiB): a quarter holds sorted runs of log records, the rest is the writer's and the garbage collector's headroom; larger slices spill to --compaction-spill-dir")
	fs.StringVar(&c.SpillDir, "compaction-spill-dir", c.SpillDir, "directory for the sorted runs a compaction spills past --compaction-memory (unlinked at once)")
	fs.IntVar(&c.VersionsToKeep, "versions-to-keep", c.VersionsToKeep, "segment versions retained per collection by GC")
	fs.DurationVar(&c.GCGrace, "gc-grace", c.GCGrace, fmt.Sprintf("how long GC waits after a segment version stops being retained before deleting its blobs: the longest a read may take (at least %s)", MinGCGrace))
	fs.DurationVar(&c.CommitTimeout, "commit-timeout", c.CommitTimeout, "longest a compaction's commit (and the clean-up after a failed one) may take; neither cancel nor shutdown interrupts it")
	fs.Var((*byteSize)(&c.IndexCacheBytes), "index-cache-bytes", "bytes (estimated: vectors and links) of decoded vector indexes kept in memory for queries and the next compaction, e.g. 1GiB; least recently used out first, the last one used always kept")
}

// Validate rejects zero or negative sizes and a GC grace under MinGCGrace.
func (c Config) Validate() error {
	switch {
	case c.MaxRecords <= 0:
		return fmt.Errorf("--max-compaction-size must be positive, got %d", c.MaxRecords)
	case c.BatchRecords <= 0:
		return fmt.Errorf("--log-batch-size must be positive, got %d", c.BatchRecords)
	case c.MemoryBytes < minMemoryBytes:
		return fmt.Errorf("--compaction-memory must be at least %s, got %s", humanize.IBytes(minMemoryBytes), humanize.IBytes(uint64(max(c.MemoryBytes, 0))))
	case c.SpillDir == "":
		return errors.New("--compaction-spill-dir must not be empty")
	case c.VersionsToKeep < 1:
		return fmt.Errorf("--versions-to-keep must be at least 1, got %d", c.VersionsToKeep)
	case c.GCGrace < MinGCGrace:
		return fmt.Errorf("--gc-grace must be at least %s (GC may delete a superseded version's blocks that long after it stops being retained, so it bounds how long a read may take), got %s", MinGCGrace, c.GCGrace)
	case c.CommitTimeout <= 0:
		return fmt.Errorf("--commit-timeout must be positive, got %s", c.CommitTimeout)
	case c.IndexCacheBytes < 0:
		return fmt.Errorf("--index-cache-bytes must not be negative, got %d", c.IndexCacheBytes)
	}
	return nil
}

// minMemoryBytes is the smallest --compaction-memory: a few MiB keep the
// runs from becoming one per batch.
const minMemoryBytes = 16 << 20

// byteSize is a pflag.Value of a size in bytes written like "256MiB" or
// "1GB" (go-humanize).
type byteSize int64

func (b *byteSize) String() string { return humanize.IBytes(uint64(*b)) }
func (b *byteSize) Type() string   { return "bytes" }
func (b *byteSize) Set(s string) error {
	n, err := humanize.ParseBytes(s)
	if err != nil {
		return fmt.Errorf("size %q: %w", s, err)
	}
	if n > math.MaxInt64 {
		return fmt.Errorf("size %q is too large", s)
	}
	*b = byteSize(n)
	return nil
}

// ErrTransient marks failures that say nothing about the collection itself
// (storage unavailable, a lost compare-and-swap, shutdown): the manager
// retries them and never dead-letters for them.
var ErrTransient = errors.New("transient")

type transientError struct{ err error }

func (e transientError) Error() string        { return e.err.Error() }
func (e transientError) Unwrap() error        { return e.err }
func (e transientError) Is(target error) bool { return target == ErrTransient }

// transient marks err as transient (nil stays nil).
func transient(err error) error {
	if err == nil {
		return nil
	}
	return transientError{err}
}

// IsTransient reports whether err is a transient failure: marked so by this
// package, a catalog ErrUnavailable, ErrConflict or ErrLeaseLost (the job
// was taken over by another replica), or a context error.
func IsTransient(err error) bool {
	return errors.Is(err, ErrTransient) || errors.Is(err, catalog.ErrUnavailable) ||
		errors.Is(err, catalog.ErrConflict) || errors.Is(err, catalog.ErrLeaseLost) || errors.Is(err, context.Canceled) ||
		errors.Is(err, context.DeadlineExceeded)
}

// Options are per-call settings of Prepare and Compact.
type Options struct {
	// Progress, when set, is called as each phase starts and after every
	// log batch and every block write, from the calling goroutine, with the
	// plan (Planned) from the first report on. BlocksTotal is 0 until
	// jobtype.PhaseWriting, then an estimate from the slice: (records of the
	// base + operation records read) / records per block, an upper bound
	// when records are updated or deleted (never below BlocksWritten), or 0
	// when the writer writes a delta; the final report, of
	// jobtype.PhaseCommitting, holds the exact count.
	Progress func(jobtype.Progress)
	// CommitJob, used by Compact only, builds the job row written in the
	// commit transaction from the result (so the job is SUCCEEDED
	// atomically with the commit). It is not called when nothing is
	// committed. Callers of Prepare pass the row to Prepared.Commit.
	CommitJob func(Result) *catalog.Job
	// JobID is the id of the job the compaction runs as, recorded with the
	// vector index it builds ("" for none).
	JobID string
	// OnEstimate, when set, is called once with the estimate of this
	// compaction, the figures Estimate gives, from the calling goroutine
	// after the log slice is read and before anything is written: Prepare
	// prices the slice from the rows it reads itself instead of a second
	// scan (a compaction that rebuilds a version which failed verification
	// calls Estimate first; an empty backlog is priced as Estimate prices
	// it). It is not called when the read fails, or when the estimate does
	// (the compaction goes on without one).
	OnEstimate func(jobtype.Estimate)
}

// Catalog is what a Compactor uses of the catalog: a *catalog.Catalog, or
// one wrapped (internal/storetrace traces each call).
type Catalog interface {
	GetCollection(ctx context.Context, id string) (catalog.Collection, error)
	CreateCollection(ctx context.Context, name string, dimension int) (catalog.Collection, error)
	CreateCollectionSpec(ctx context.Context, spec catalog.CollectionSpec) (catalog.Collection, error)
	DeleteCollection(ctx context.Context, id string) (catalog.Collection, error)
	AppendLog(ctx context.Context, id string, ops []materialize.OperationRecord, lim catalog.AppendLimits) (first, last int64, err error)
	ReadLog(ctx context.Context, id string, after, upTo int64, limit int) ([]materialize.OperationRecord, error)
	ScanLog(ctx context.Context, id string, after, upTo int64, limit int, fn func(offset int64, record []byte) error) (int, error)
	ScanKeptLog(ctx context.Context, id string, after, upTo int64, limit int, fn func(offset int64, record []byte) error) (int, error)
	ReadTailIDs(ctx context.Context, id string, ids []string) (catalog.Tail, error)
	ReadTailRange(ctx context.Context, id string, r catalog.TailRange) (catalog.Tail, error)
	PurgeLog(ctx context.Context, id string) (int64, error)
	CommitCompaction(ctx context.Context, cm catalog.Commit) error
	ListVersions(ctx context.Context, id string) ([]catalog.Version, error)
	GetVersion(ctx context.Context, id string, version int64) (catalog.Version, error)
	CommitRollback(ctx context.Context, rb catalog.Rollback) error
	RetireVersions(ctx context.Context, id string, keep int, grace time.Duration) (catalog.Retention, error)
	DeleteVersions(ctx context.Context, id string, versions []int64) error
	RecordVerification(ctx context.Context, id string, version int64, problem string) error
	ListJobs(ctx context.Context, f catalog.JobFilter) ([]catalog.Job, error)
}

// Result holds the figures of one compaction.
type Result struct {
	CollectionID   string
	OffsetStart    int64 // compaction offset before; log records (OffsetStart, OffsetEnd] were compacted
	OffsetEnd      int64
	OpRecordsRead  int64 // operation records read from the log
	RecordsWritten int64 // materialized records in the blocks written
	BytesWritten   int64 // bytes of blocks and manifest written
	BlocksWritten  int
	BlocksReused   int
	VersionBefore  int64
	// VersionAfter is the version committed, == VersionBefore when nothing
	// was; of a Prepared, the version its Commit makes current.
	VersionAfter int64
	RecordCount  int64 // records in the collection after the compaction
	// Blob store calls and bytes read, counted when the segment store's
	// blobs are wrapped by CountBlobs (0 otherwise), and the index phase.
	BytesRead      int64
	BlobBytes      int64 // bytes put to the blob store, the index's included
	BlobGets       int64
	BlobPuts       int64
	DeltasWritten  int
	VectorsIndexed int64
	IndexSeconds   float64
	IndexBuild     string // "full", "incremental", "repaired"; "" without index
	// Remaining is the backlog (records) the snapshot held beyond OffsetEnd:
	// when positive, another compaction should follow at once.
	Remaining int64
	Note      string // "nothing to compact" when the backlog was empty
	// WriteKind is what the writer wrote: segment.WroteBlocks or
	// segment.WroteDelta; empty when nothing was written.
	WriteKind segment.WriteKind
}

// Outcome is r in the vocabulary of jobs.
func (r Result) Outcome() jobtype.Outcome {
	return jobtype.Outcome{
		OffsetStart:    r.OffsetStart,
		OffsetEnd:      r.OffsetEnd,
		OpRecordsRead:  r.OpRecordsRead,
		RecordsWritten: r.RecordsWritten,
		BytesWritten:   r.BytesWritten,
		VersionBefore:  r.VersionBefore,
		VersionAfter:   r.VersionAfter,
		Remaining:      r.Remaining,
		Note:           r.Note,
		Actual: &jobtype.Actual{
			BytesRead: r.BytesRead, BytesWritten: r.BlobBytes, BlobGets: r.BlobGets, BlobPuts: r.BlobPuts,
			BlocksWritten: int64(r.BlocksWritten), DeltasWritten: int64(r.DeltasWritten),
			VectorsIndexed: r.VectorsIndexed, IndexSeconds: r.IndexSeconds, IndexBuild: r.IndexBuild,
		},
	}
}

// NoteNothingToCompact is the Result.Note of a compaction with an empty backlog.
const NoteNothingToCompact = "nothing to compact"

// NoteNoChange is the Result.Note of a compaction whose operations left
// every record as it was, so that it wrote no record (the version it
// commits reuses every block): what a job reading N records and writing 0
// means.
const NoteNoChange = "no record changed: every operation read was ignored by the materialization rules " +
	"(an ADD of an id already present is ignored, the first add wins; an UPDATE or DELETE of an absent id is ignored)"

// Compactor compacts collections. It is safe for concurrent use; compactions
// of the same collection racing are resolved at commit (one wins, the others
// fail with catalog.ErrConflict and remove what they wrote).
type Compactor struct {
	cat    Catalog
	seg    *segment.Store
	cfg    Config
	logger *slog.Logger
	// corrupt counts reads and compactions that met damaged data, by
	// kind; nil without WithRegisterer.
	corrupt *prometheus.CounterVec
	// query holds the query metrics; nil fields without WithRegisterer.
	query queryMetrics
	// index opens versions' vector indexes for queries.
	index IndexSource
	// indexes caches decoded vector indexes (index.go); indexm are the
	// index build's metrics (nil without WithRegisterer).
	indexes *indexCache
	indexm  *indexMetrics
	// verifym counts verifications (verify.go); nil fields without
	// WithRegisterer.
	verifym verifyMetrics
	// scans holds a token per exact query scan running (see
	// MaxConcurrentScans).
	scans chan struct{}
	pins  *pins
	// readRetries counts reads run again on a fresh view because GC
	// collected their version (see retryRead); none is expected at accepted
	// settings.
	readRetries atomic.Int64
	// purges are the log purges running, by collection: true when another
	// was asked for while it ran (it then runs again).
	purgeMu sync.Mutex
	purges  map[string]bool
	purgeWG sync.WaitGroup
	// purgeStop ends when StopPurges is called: the running purges stop
	// at their next chunk and no new one starts.
	purgeStop      context.Context
	stopPurgesFunc context.CancelFunc
	// purgem are the purges' metrics; nil fields without WithRegisterer.
	purgem purgeMetrics
}

// purgeMetrics are the log purge's metrics.
type purgeMetrics struct {
	running prometheus.Gauge   // collections whose purge runs
	rows    prometheus.Counter // log rows purged
}

func newPurgeMetrics(reg prometheus.Registerer) purgeMetrics {
	f := promauto.With(reg)
	return purgeMetrics{
		running: metric.Gauge(f, "compactor_log_purges_running", "Collections whose compacted log rows are being deleted after a commit, off the job's critical path (0 when the catalog holds no compacted row left to delete)."),
		rows:    metric.Counter(f, "compactor_log_purged_rows_total", "Compacted log rows deleted from the catalog after their compaction committed."),
	}
}

// started moves the running gauge by d; m may hold nil fields.
func (m purgeMetrics) started(d float64) {
	if m.running != nil {
		m.running.Add(d)
	}
}

// purgeLog deletes, on a goroutine of its own, the log rows of
// collectionID that no kept version needs (catalog.PurgeLog: at or below
// the oldest kept version's compaction offset), off the job's critical
// path: the commit has already made the rows at or below the current
// offset invisible. At most one purge per collection runs; a call while one
// runs makes it run once more when done, since the bound may have moved (a
// commit, or GC retiring versions). It is bounded by Config.CommitTimeout
// and not interrupted by ctx's cancellation, only by StopPurges; failures
// are logged.
func (c *Compactor) purgeLog(ctx context.Context, collectionID string) {
	c.purgeMu.Lock()
	defer c.purgeMu.Unlock()
	if c.purgeStop.Err() != nil {
		return // stopped: the collection's next purge removes the rows
	}
	if _, running := c.purges[collectionID]; running {
		c.purges[collectionID] = true // again, once this one ends
		return
	}
	c.purges[collectionID] = false
	c.purgeWG.Add(1)
	c.purgem.started(1)
	go func() {
		defer c.purgeWG.Done()
		defer c.purgem.started(-1)
		for {
			pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.CommitTimeout)
			unhook := context.AfterFunc(c.purgeStop, cancel)
			n, err := c.cat.PurgeLog(pctx, collectionID)
			unhook()
			cancel()
			stopped := c.purgeStop.Err() != nil
			switch {
			case stopped:
				c.logger.Debug("log purge stopped; the collection's next purge removes the rest", "collection", collectionID, "rows", n)
			case err != nil && !errors.Is(err, catalog.ErrNotFound):
				c.logger.Warn("purge compacted log rows", "collection", collectionID, "err", err)
			case err == nil:
				c.logger.Debug("purged compacted log rows", "collection", collectionID, "rows", n)
				if c.purgem.rows != nil {
					c.purgem.rows.Add(float64(n))
				}
			}
			c.purgeMu.Lock()
			again := c.purges[collectionID] && err == nil && !stopped
			if !again {
				delete(c.purges, collectionID)
				c.purgeMu.Unlock()
				return
			}
			c.purges[collectionID] = false
			c.purgeMu.Unlock()
		}
	}()
}

// WaitPurges waits for the log purges started by earlier compactions
// (tests, benchmarks and shutdown use it).
func (c *Compactor) WaitPurges() { c.purgeWG.Wait() }

// StopPurges makes the running log purges stop at their next chunk of rows
// (catalog.PurgeLog honours its context between chunks, and a chunk cut
// short rolls back) and starts no new one, so that a shutdown does not wait
// for the purge of a large compaction (about two minutes for 1,000,000
// rows, paced to leave a core to foreground work). The rows left are
// compacted already, invisible to reads, and removed by the collection's
// next purge (after its next compaction), as after a crash. Call
// WaitPurges after it to wait for the purges to return.
func (c *Compactor) StopPurges() { c.stopPurgesFunc() }

// New returns a Compactor. logger nil discards logs.
func New(cat Catalog, seg *segment.Store, cfg Config, logger *slog.Logger, opts ...Option) (*Compactor, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	c := &Compactor{cat: cat, seg: seg, cfg: cfg, logger: logger, pins: newPins(), purges: make(map[string]bool),
		scans: make(chan struct{}, MaxConcurrentScans), indexes: newIndexCache()}
	c.purgeStop, c.stopPurgesFunc = context.WithCancel(context.Background())
	c.indexes.budget = cfg.IndexCacheBytes
	for _, o := range opts {
		o(c)
	}
	if c.index == nil {
		c.index = storedIndexes{c}
	}
	return c, nil
}

// Compact runs one compaction of collectionID: Prepare, then Commit (with
// the row Options.CommitJob builds). Its errors are Prepare's and Commit's. An empty backlog is not an error: the Result has Note
// NoteNothingToCompact.
func (c *Compactor) Compact(ctx context.Context, collectionID string, opts Options) (Result, error) {
	p, err := c.Prepare(ctx, collectionID, opts)
	if err != nil {
		return p.Result(), err
	}
	var job *catalog.Job
	if opts.CommitJob != nil && p.Pending() {
		job = opts.CommitJob(p.Result())
	}
	err = p.Commit(ctx, job)
	return p.Result(), err
}

// Prepared is a compaction written up to its commit: the changed blocks and
// the manifest of the new version are in the blob store, nothing is in the
// catalog yet, and this process's GC spares the base version and the blobs
// written. Exactly one of Commit and Abort ends it. It is not safe for
// concurrent use.
type Prepared struct {
	c      *Compactor
	res    Result
	cm     catalog.Commit    // the commit, without its job row; zero when nothing to commit
	w      *segment.Writer   // nil when nothing to commit
	unpin  func()            // releases the GC pins; nil once ended
	onDone func(error) error // counts damaged data met, once
	// what names the work in Commit's errors: "compact" ("" too), or
	// "rebuild the index of".
	what string
	// supersedes is the graph blob key of the base version's index ("":
	// none), dropped from the index cache once the commit took effect.
	supersedes string
}

// Result is the compaction's figures: of the prepared version until
// Commit, then of what was committed.
func (p *Prepared) Result() Result {
	if p == nil {
		return Result{}
	}
	return p.res
}

// Pending reports whether Commit has a version to commit (false for an
// empty backlog, and once ended).
func (p *Prepared) Pending() bool { return p != nil && p.w != nil && p.unpin != nil }

// Prepare runs a compaction of collectionID up to its commit: it reads at
// most Config.MaxRecords log records after the compaction offset,
// materializes them against the current segment and writes the changed
// blocks and the manifest. Errors: catalog.ErrNotFound (no such
// collection), a context error when ctx ends (checked at every log batch
// and block write, before the manifest and after it), and storage errors (transient
// ones match ErrTransient); after an error the blobs written are removed
// and the returned *Prepared has ended (its Result holds the figures so
// far). Damaged stored data (a corrupt block,
// manifest or log row, see CorruptKind) is not transient: it fails every
// compaction of the collection, so the manager dead-letters it. An empty
// backlog is not an error: the Result has Note NoteNothingToCompact, and
// Commit commits nothing.
func (c *Compactor) Prepare(ctx context.Context, collectionID string, opts Options) (out *Prepared, err error) {
	onDone := func(err error) error {
		c.noteCorrupt("compaction", collectionID, err)
		c.noteVerification(collectionID, err)
		return err
	}
	var res Result
	counts := &blobCounts{}
	uncounted := ctx // for an estimate's reads, which are not the job's
	ctx = withBlobCounts(ctx, counts)
	defer func() {
		res.BlobGets, res.BlobPuts, res.BytesRead, res.BlobBytes = counts.gets.Load(), counts.puts.Load(), counts.bytesRead.Load(), counts.bytesWritten.Load()
		if out != nil {
			out.res.BlobGets, out.res.BlobPuts, out.res.BytesRead, out.res.BlobBytes = res.BlobGets, res.BlobPuts, res.BytesRead, res.BlobBytes
		}
	}()
	defer func() {
		err = c.missingBlob(ctx, "compact", collectionID, err)
		onDone(err)
		if err != nil {
			out = &Prepared{res: res} // ended: the figures so far
		}
	}()
	report := func(p jobtype.Progress) {
		if opts.Progress != nil {
			opts.Progress(p)
		}
	}
	// Each phase (jobtype.Phase) is reported as it starts and has a span
	// named after it, a child of the caller's (the job's) span in ctx;
	// without one the spans are no-ops.
	var p jobtype.Progress
	var span trace.Span
	enter := func(ph jobtype.Phase) {
		if span != nil {
			span.End()
		}
		_, span = startSpan(ctx, string(ph))
		p.Phase = ph
		report(p)
	}
	defer func() {
		if span != nil {
			endSpan(span, err)
		}
	}()
	coll, err := c.cat.GetCollection(ctx, collectionID)
	if err != nil {
		return nil, fmt.Errorf("compact %s: %w", collectionID, err)
	}
	// Until the compaction ends (Commit or Abort), this process's GC keeps
	// the base version and the collection's orphans (the blobs it writes).
	unpin := c.pins.pin(collectionID, coll.ManifestKey, true)
	defer func() {
		if err != nil {
			unpin()
		}
	}()
	// The slice starts at the compaction offset, over the current version;
	// when the current version failed verification, at the offset of the
	// newest earlier kept version that verifies, over that version
	// (repair.go).
	from, baseKey, baseVersion, scan := coll.CompactionOffset, coll.ManifestKey, coll.SegmentVersion, c.cat.ScanLog
	rb, err := c.repairBase(ctx, coll)
	if err != nil {
		return nil, fmt.Errorf("compact %s: %w", collectionID, err)
	}
	if rb != nil {
		from, baseKey, baseVersion, scan = rb.CompactionOffset, rb.ManifestKey, rb.Version, c.cat.ScanKeptLog
		defer c.pins.pin(collectionID, rb.ManifestKey, false)()
	}
	end := min(coll.LogPosition, from+int64(c.cfg.MaxRecords))
	if end < coll.CompactionOffset {
		return nil, fmt.Errorf("compact %s: version %d failed verification; rebuilding it from version %d needs log offsets (%d, %d], more than --max-compaction-size %d records",
			collectionID, coll.SegmentVersion, baseVersion, from, coll.CompactionOffset, c.cfg.MaxRecords)
	}
	res = Result{
		CollectionID:  collectionID,
		OffsetStart:   from,
		OffsetEnd:     end,
		VersionBefore: coll.SegmentVersion,
		VersionAfter:  coll.SegmentVersion,
		RecordCount:   coll.RecordCount,
		Remaining:     coll.LogPosition - end,
	}
	total := end - from
	if total <= 0 && rb == nil {
		if opts.OnEstimate != nil {
			opts.OnEstimate(jobtype.Estimate{Indexed: !coll.Index.Disabled}) // as Estimate prices an empty backlog
		}
		res.OffsetEnd = coll.CompactionOffset
		res.Note = NoteNothingToCompact
		return &Prepared{c: c, res: res, unpin: unpin, onDone: onDone}, nil
	}

	// Reading the log: the slice in batches (a reader goroutine fetches
	// the next batch while this one sorts), its operation records grouped
	// by record id in sorted runs, spilled to disk past the memory budget.
	p = jobtype.Progress{OpRecordsTotal: total, Planned: true, OffsetStart: from, OffsetEnd: end,
		VersionBefore: coll.SegmentVersion, NoIndexing: coll.Index.Disabled}
	enter(jobtype.PhaseReading)
	base, err := c.readBase(ctx, baseVersion, baseKey)
	if err != nil {
		return nil, fmt.Errorf("compact %s: %w", collectionID, err)
	}
	// The estimate of this compaction, priced from the rows read below
	// (the slice Estimate would scan: from the compaction offset over the
	// current version), or, for a rebuild of a version that failed
	// verification, by Estimate.
	var pricer *slicePricer
	switch {
	case opts.OnEstimate == nil:
	case rb == nil:
		pricer = c.newSlicePricer(coll, base, end)
	default:
		if est, err := c.Estimate(uncounted, collectionID); err == nil {
			opts.OnEstimate(est)
		}
	}
	runs := &runSet{dir: c.cfg.SpillDir, budget: c.cfg.MemoryBytes / 4}
	defer runs.close()
	if total > 0 {
		var onRows func([]opEntry) error
		if pricer != nil {
			onRows = func(entries []opEntry) error {
				if pricer != nil && pricer.add(entries) != nil {
					pricer = nil // the compaction reports the row; the estimate is dropped
				}
				return nil
			}
		}
		err = c.readRunsFrom(ctx, scan, collectionID, from, end, runs, onRows, func(n int) {
			res.OpRecordsRead += int64(n)
			p.OpRecordsRead = res.OpRecordsRead
			report(p)
		})
	}
	if err != nil {
		return nil, fmt.Errorf("compact %s: %w", collectionID, err)
	}
	if pricer != nil {
		if est, err := pricer.estimate(); err == nil {
			opts.OnEstimate(est)
		}
		pricer = nil
	}

	// Materializing: the runs merged into one change per record id, in id
	// order, folded by the writer onto the current segment's records;
	// the writer first gathers as many as a delta may take, then decides
	// between a delta and blocks (segment.Writer.Write).
	enter(jobtype.PhaseMaterializing)
	var baseRecords int64
	if base != nil {
		baseRecords = base.RecordCount
		if rb != nil {
			// The writer numbers the new version after its base's.
			base.Version = coll.SegmentVersion
		}
	}
	ib, err := c.startIndex(ctx, coll, base)
	if err != nil {
		return nil, fmt.Errorf("compact %s: %w", collectionID, err)
	}
	if ib != nil {
		ib.job = opts.JobID
	}
	w := c.seg.NewWriter(collectionID, base)
	defer func() {
		if err != nil {
			c.abortWriter(ctx, w, collectionID)
		}
	}()
	// Writing blocks: from the writer's decision on, the changed blocks
	// (or the one delta) are written, the materializing streaming on
	// into them.
	onKind := func(k segment.WriteKind) {
		if k == segment.WroteBlocks {
			perBlock := int64(c.seg.MaxBlockRecords())
			p.BlocksTotal = (baseRecords + res.OpRecordsRead + perBlock - 1) / perBlock
		}
		enter(jobtype.PhaseWriting)
	}
	onBlock := func(n int64) {
		p.BytesWritten += n
		p.BlocksWritten++
		p.BlocksTotal = max(p.BlocksTotal, p.BlocksWritten)
		report(p)
	}
	m, stats, err := w.Write(ctx, changesOf(ctx, runs), segment.WriteOptions{
		CompactionOffset: end, Dimension: coll.Dimension, OnKind: onKind, OnBlock: onBlock, OnChange: ib.onChange()})
	if err != nil {
		return nil, fmt.Errorf("compact %s: write segment: %w", collectionID, classifyWrite(ctx, err))
	}
	// The runs are merged into the version: their memory (up to a quarter
	// of --compaction-memory) and spill files go before the index build.
	runs.close()
	res.WriteKind = stats.Kind
	if runs.spilled > 0 {
		c.logger.Debug("spilled sorted runs", "collection", collectionID, "runs", runs.spilled, "bytes", runs.spilledBytes)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("compact %s: before manifest: %w", collectionID, err)
	}
	// Indexing: the version's vector index, durable before the manifest
	// lists it.
	if ib != nil {
		enter(jobtype.PhaseIndexing)
	}
	if err := c.writeIndex(ctx, ib, w, m); err != nil {
		return nil, fmt.Errorf("compact %s: %w", collectionID, classifyWrite(ctx, err))
	}
	key, msize, err := w.WriteManifest(ctx, m)
	if err != nil {
		return nil, fmt.Errorf("compact %s: write manifest: %w", collectionID, classifyWrite(ctx, err))
	}
	res.RecordsWritten = stats.RecordsWritten
	res.BytesWritten = stats.BytesWritten + msize
	res.BlocksWritten = stats.BlocksWritten
	res.BlocksReused = stats.BlocksReused
	res.DeltasWritten = stats.DeltasWritten
	if m.Index != nil {
		res.VectorsIndexed, res.IndexSeconds, res.IndexBuild = int64(ib.inserted), m.Index.BuildSeconds, m.Index.Build
	}
	res.VersionAfter = m.Version
	res.RecordCount = m.RecordCount
	if res.OpRecordsRead > 0 && res.RecordsWritten == 0 && stats.BlocksWritten == 0 && stats.DeltasWritten == 0 && stats.BlocksDropped == 0 && res.RecordCount == baseRecords {
		res.Note = NoteNoChange
	}
	if rb != nil {
		res.Note = fmt.Sprintf("version %d failed verification: rebuilt from version %d and log offsets (%d, %d]", coll.SegmentVersion, rb.Version, from, end)
	}

	// The last point where cancellation is honoured: what remains is the
	// commit, which is not interrupted.
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("compact %s: before commit: %w", collectionID, err)
	}

	// Committing (Prepared.Commit, a span of its own): the final report
	// holds the exact counts.
	span.End()
	span = nil
	p.Phase = jobtype.PhaseCommitting
	p.BytesWritten = res.BytesWritten
	p.BlocksWritten, p.BlocksTotal = int64(stats.BlocksWritten), int64(stats.BlocksWritten)
	report(p)
	return &Prepared{c: c, res: res, w: w, unpin: unpin, onDone: onDone, cm: commitOf(collectionID, coll.SegmentVersion, m, key, end),
		supersedes: supersededIndex(base, m)}, nil
}

// supersededIndex returns the graph blob key of base's index when the new
// version m does not list the same graph ("": nothing superseded).
func supersededIndex(base, m *segment.Manifest) string {
	if base == nil || base.Index == nil || (m.Index != nil && m.Index.Graph.Key == base.Index.Graph.Key) {
		return ""
	}
	return base.Index.Graph.Key
}

// commitOf is the commit of version m, whose manifest is at key, over
// baseVersion, with compaction offset offset: the one place a version's
// catalog row is filled from its manifest (record count, storage figures,
// digest), for compactions and index rebuilds alike.
func commitOf(collectionID string, baseVersion int64, m *segment.Manifest, key string, offset int64) catalog.Commit {
	return catalog.Commit{
		CollectionID:     collectionID,
		BaseVersion:      baseVersion,
		NewVersion:       m.Version,
		ManifestKey:      key,
		CompactionOffset: offset,
		RecordCount:      m.RecordCount,
		SegmentBytes:     blockBytes(m),
		BlockCount:       len(m.Blocks),
		Digest:           m.Digest,
	}
}

// missingBlob classifies err, the end of work (what: "compact", "rebuild
// the index of") on collectionID, when it says a blob of the base version
// is missing: data loss when that version is still current (an error
// saying so, not transient), else transient (another compaction committed
// meanwhile, and this one would lose its compare-and-swap). Any other err
// is returned as it is. The check reads the catalog with a context of its
// own, bounded by Config.CommitTimeout (ctx may have ended).
func (c *Compactor) missingBlob(ctx context.Context, what, collectionID string, err error) error {
	if err == nil || !errors.Is(err, segment.ErrNotExist) {
		return err
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.CommitTimeout)
	defer cancel()
	if lost, ok := c.dataLoss(rctx, collectionID, err); ok {
		return fmt.Errorf("%s %s: %w", what, collectionID, lost)
	}
	if !IsTransient(err) {
		return transient(err)
	}
	return err
}

// readBase reads the manifest key of segment version, the base of a
// compaction; nil for version 0 (before the first compaction). A blob read
// failure is transient unless the manifest is missing or damaged
// (classifyRead).
func (c *Compactor) readBase(ctx context.Context, version int64, key string) (*segment.Manifest, error) {
	if version == 0 {
		return nil, nil
	}
	m, err := c.seg.ReadManifest(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("read manifest of version %d: %w", version, classifyRead(err))
	}
	return m, nil
}

// Commit commits the prepared version in one catalog transaction:
// compare-and-swap on the segment version, advance of the compaction
// offset, and, when job is not nil, the job's row (fenced by its
// LeaseOwner: only the lease holder commits). It is not interrupted by
// ctx's end: once started it runs to completion or fails as a whole,
// within Config.CommitTimeout. With nothing to commit it writes nothing and
// returns nil. Errors: catalog.ErrConflict (another compaction committed
// first), catalog.ErrLeaseLost, catalog.ErrNotFound (the collection was
// deleted), storage errors; after an error the blobs written are removed,
// unless the commit took effect although the call failed (then it returns
// nil). Calling it on an ended Prepared is an error.
func (p *Prepared) Commit(ctx context.Context, job *catalog.Job) (err error) {
	if p == nil || p.unpin == nil {
		return errors.New("commit of a compaction that has ended")
	}
	c, id := p.c, p.res.CollectionID
	defer p.end()
	if p.w == nil {
		return nil // nothing to commit
	}
	defer func() { p.onDone(err) }()
	_, span := startSpan(ctx, string(jobtype.PhaseCommitting))
	defer func() { endSpan(span, err) }()
	defer func() {
		if err != nil {
			p.res.VersionAfter = p.res.VersionBefore
			c.abortWriter(ctx, p.w, id)
		}
	}()
	cm := p.cm
	if job != nil {
		cm.Job = job
		cm.LeaseOwner = job.LeaseOwner // fenced: only the lease holder commits
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.CommitTimeout)
	defer cancel()
	if err := c.cat.CommitCompaction(cctx, cm); err != nil {
		if cctx.Err() != nil {
			err = fmt.Errorf("not done within --commit-timeout %s: %w", c.cfg.CommitTimeout, err)
		}
		// Checked with a context of its own: cctx may have expired.
		gctx, gcancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.CommitTimeout)
		defer gcancel()
		if c.committed(gctx, err, id, cm.NewVersion, cm.ManifestKey) {
			// The transaction committed although the call failed (the
			// connection dropped after COMMIT): the blobs are the current
			// version and must stay.
			c.logger.Warn("commit reported an error but took effect", "collection", id, "version", cm.NewVersion, "err", err)
			return nil
		}
		return fmt.Errorf("%s %s: commit version %d: %w", cmp.Or(p.what, "compact"), id, cm.NewVersion, err)
	}
	if p.supersedes != "" {
		c.indexes.drop(p.supersedes)
	}
	c.purgeLog(ctx, id)
	c.logger.Debug("compacted", "collection", id, "offset", cm.CompactionOffset, "version", cm.NewVersion,
		"records_read", p.res.OpRecordsRead, "wrote", p.res.WriteKind, "blocks_written", p.res.BlocksWritten, "blocks_reused", p.res.BlocksReused)
	return nil
}

// Abort ends the compaction without committing: the blobs written are
// removed (with a context of its own, bounded by Config.CommitTimeout: ctx
// may have been cancelled). Aborting an ended Prepared does nothing. The
// error is the blob store's.
func (p *Prepared) Abort(ctx context.Context) error {
	if p == nil || p.unpin == nil {
		return nil
	}
	defer p.end()
	p.res.VersionAfter = p.res.VersionBefore
	if p.w == nil {
		return nil
	}
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.c.cfg.CommitTimeout)
	defer cancel()
	return p.w.Abort(actx)
}

// end releases the GC pins of an ended compaction.
func (p *Prepared) end() {
	p.unpin()
	p.unpin = nil
}

// abortWriter removes the blobs w wrote, a must-finish cleanup with a
// context of its own (ctx may be cancelled); a failure is logged.
func (c *Compactor) abortWriter(ctx context.Context, w *segment.Writer, collectionID string) {
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.CommitTimeout)
	defer cancel()
	if aerr := w.Abort(actx); aerr != nil {
		c.logger.Warn("remove blobs of failed compaction", "collection", collectionID, "err", aerr)
	}
}

// committed reports whether a commit that returned err took effect anyway:
// for an error other than a definite refusal (conflict, invalid argument,
// missing collection), the collection is read again, and the commit took
// effect when it names version and manifest key.
func (c *Compactor) committed(ctx context.Context, err error, collectionID string, version int64, key string) bool {
	if errors.Is(err, catalog.ErrConflict) || errors.Is(err, catalog.ErrInvalidArgument) || errors.Is(err, catalog.ErrNotFound) ||
		errors.Is(err, catalog.ErrLeaseLost) {
		return false
	}
	coll, gerr := c.cat.GetCollection(ctx, collectionID)
	return gerr == nil && coll.SegmentVersion == version && coll.ManifestKey == key
}

// blockBytes is the size of m's blocks, in bytes.
func blockBytes(m *segment.Manifest) int64 {
	var n int64
	for _, b := range m.Blocks {
		n += b.Bytes
	}
	return n
}

// classifyRead marks blob read failures transient unless the blob is missing
// (Prepare then decides whether that is data loss) or cannot be decoded: a
// damaged segment, which retrying does not mend.
func classifyRead(err error) error {
	if errors.Is(err, segment.ErrNotExist) || errors.Is(err, segment.ErrCorrupt) {
		return err
	}
	return transient(err)
}

// classifyWrite marks blob write failures transient (storage unavailable);
// context errors pass through as they are.
func classifyWrite(ctx context.Context, err error) error {
	if ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return err
	}
	if _, ok := CorruptKind(err); ok || errors.Is(err, segment.ErrBlockTooLarge) || errors.Is(err, segment.ErrVerification) {
		// Write reads the blocks it rewrites; a block too large to be
		// read back fails again at every attempt; a write that fails its
		// verification (blobs that do not read back as written, or
		// records lost or altered) is not retried blindly.
		return err
	}
	return transient(err)
}

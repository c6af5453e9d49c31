package storetrace

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/materialize"
)

// Catalog is a *catalog.Catalog whose calls made by RPCs and jobs each get
// a span named "catalog <Method>" (with the collection or job id), and
// whose other methods (opening, closing, health checks, the migrations'
// and maintenance's) pass through untraced.
type Catalog struct{ *catalog.Catalog }

// NewCatalog wraps c.
func NewCatalog(c *catalog.Catalog) Catalog { return Catalog{Catalog: c} }

func coll(id string) attribute.KeyValue { return attribute.String("compactor.collection.id", id) }
func job(id string) attribute.KeyValue  { return attribute.String("compactor.job.id", id) }

// Collections.

func (t Catalog) GetCollection(ctx context.Context, id string) (catalog.Collection, error) {
	return call(ctx, "catalog GetCollection", func(ctx context.Context) (catalog.Collection, error) { return t.Catalog.GetCollection(ctx, id) }, coll(id))
}

func (t Catalog) ListCollections(ctx context.Context) ([]catalog.Collection, error) {
	return call(ctx, "catalog ListCollections", t.Catalog.ListCollections)
}

func (t Catalog) ListCollectionsPage(ctx context.Context, after string, limit int) ([]catalog.Collection, error) {
	return call(ctx, "catalog ListCollectionsPage", func(ctx context.Context) ([]catalog.Collection, error) {
		return t.Catalog.ListCollectionsPage(ctx, after, limit)
	})
}

func (t Catalog) CreateCollection(ctx context.Context, name string, dimension int) (catalog.Collection, error) {
	return call(ctx, "catalog CreateCollection", func(ctx context.Context) (catalog.Collection, error) {
		return t.Catalog.CreateCollection(ctx, name, dimension)
	})
}

func (t Catalog) CreateCollectionSpec(ctx context.Context, spec catalog.CollectionSpec) (catalog.Collection, error) {
	return call(ctx, "catalog CreateCollection", func(ctx context.Context) (catalog.Collection, error) {
		return t.Catalog.CreateCollectionSpec(ctx, spec)
	})
}

func (t Catalog) DeleteCollection(ctx context.Context, id string) (catalog.Collection, error) {
	return call(ctx, "catalog DeleteCollection", func(ctx context.Context) (catalog.Collection, error) { return t.Catalog.DeleteCollection(ctx, id) }, coll(id))
}

// The log.

func (t Catalog) AppendLog(ctx context.Context, id string, ops []materialize.OperationRecord, lim catalog.AppendLimits) (first, last int64, err error) {
	ctx, span := start(ctx, "catalog AppendLog", coll(id), attribute.Int("compactor.records", len(ops)))
	first, last, err = t.Catalog.AppendLog(ctx, id, ops, lim)
	end(span, err)
	return first, last, err
}

func (t Catalog) AppendLogKeyed(ctx context.Context, id, key string, ops []materialize.OperationRecord, lim catalog.AppendLimits) (first, last int64, replayed bool, err error) {
	ctx, span := start(ctx, "catalog AppendLog", coll(id), attribute.Int("compactor.records", len(ops)))
	first, last, replayed, err = t.Catalog.AppendLogKeyed(ctx, id, key, ops, lim)
	end(span, err)
	return first, last, replayed, err
}

func (t Catalog) ReadLog(ctx context.Context, id string, after, upTo int64, limit int) ([]materialize.OperationRecord, error) {
	return call(ctx, "catalog ReadLog", func(ctx context.Context) ([]materialize.OperationRecord, error) {
		return t.Catalog.ReadLog(ctx, id, after, upTo, limit)
	}, coll(id))
}

func (t Catalog) RecordVerification(ctx context.Context, id string, version int64, problem string) error {
	return call0(ctx, "catalog RecordVerification", func(ctx context.Context) error { return t.Catalog.RecordVerification(ctx, id, version, problem) }, coll(id))
}

func (t Catalog) ScanKeptLog(ctx context.Context, id string, after, upTo int64, limit int, fn func(offset int64, record []byte) error) (int, error) {
	return call(ctx, "catalog ScanKeptLog", func(ctx context.Context) (int, error) { return t.Catalog.ScanKeptLog(ctx, id, after, upTo, limit, fn) }, coll(id))
}

func (t Catalog) ScanLog(ctx context.Context, id string, after, upTo int64, limit int, fn func(offset int64, record []byte) error) (int, error) {
	return call(ctx, "catalog ScanLog", func(ctx context.Context) (int, error) { return t.Catalog.ScanLog(ctx, id, after, upTo, limit, fn) }, coll(id))
}

func (t Catalog) ReadTailIDs(ctx context.Context, id string, ids []string) (catalog.Tail, error) {
	return call(ctx, "catalog ReadTail", func(ctx context.Context) (catalog.Tail, error) { return t.Catalog.ReadTailIDs(ctx, id, ids) }, coll(id))
}

func (t Catalog) ReadTailRange(ctx context.Context, id string, r catalog.TailRange) (catalog.Tail, error) {
	return call(ctx, "catalog ReadTail", func(ctx context.Context) (catalog.Tail, error) { return t.Catalog.ReadTailRange(ctx, id, r) }, coll(id))
}

func (t Catalog) PurgeLog(ctx context.Context, id string) (int64, error) {
	return call(ctx, "catalog PurgeLog", func(ctx context.Context) (int64, error) { return t.Catalog.PurgeLog(ctx, id) }, coll(id))
}

// Versions.

func (t Catalog) CommitCompaction(ctx context.Context, cm catalog.Commit) error {
	return call0(ctx, "catalog CommitCompaction", func(ctx context.Context) error { return t.Catalog.CommitCompaction(ctx, cm) },
		coll(cm.CollectionID), attribute.Int64("compactor.segment.version", cm.NewVersion))
}

func (t Catalog) ListVersions(ctx context.Context, id string) ([]catalog.Version, error) {
	return call(ctx, "catalog ListVersions", func(ctx context.Context) ([]catalog.Version, error) { return t.Catalog.ListVersions(ctx, id) }, coll(id))
}

func (t Catalog) GetVersion(ctx context.Context, id string, version int64) (catalog.Version, error) {
	return call(ctx, "catalog GetVersion", func(ctx context.Context) (catalog.Version, error) { return t.Catalog.GetVersion(ctx, id, version) },
		coll(id), attribute.Int64("compactor.segment.version", version))
}

func (t Catalog) CommitRollback(ctx context.Context, rb catalog.Rollback) error {
	return call0(ctx, "catalog CommitRollback", func(ctx context.Context) error { return t.Catalog.CommitRollback(ctx, rb) },
		coll(rb.CollectionID), attribute.Int64("compactor.segment.version", rb.NewVersion))
}

func (t Catalog) RetireVersions(ctx context.Context, id string, keep int, grace time.Duration) (catalog.Retention, error) {
	return call(ctx, "catalog RetireVersions", func(ctx context.Context) (catalog.Retention, error) {
		return t.Catalog.RetireVersions(ctx, id, keep, grace)
	}, coll(id))
}

func (t Catalog) DeleteVersions(ctx context.Context, id string, versions []int64) error {
	return call0(ctx, "catalog DeleteVersions", func(ctx context.Context) error { return t.Catalog.DeleteVersions(ctx, id, versions) }, coll(id))
}

// Jobs and the queue.

func (t Catalog) GetJob(ctx context.Context, id string) (catalog.Job, error) {
	return call(ctx, "catalog GetJob", func(ctx context.Context) (catalog.Job, error) { return t.Catalog.GetJob(ctx, id) }, job(id))
}

func (t Catalog) JobIDsWithPrefix(ctx context.Context, prefix string, limit int) ([]string, error) {
	return call(ctx, "catalog JobIDsWithPrefix", func(ctx context.Context) ([]string, error) { return t.Catalog.JobIDsWithPrefix(ctx, prefix, limit) })
}

func (t Catalog) ListJobs(ctx context.Context, f catalog.JobFilter) ([]catalog.Job, error) {
	return call(ctx, "catalog ListJobs", func(ctx context.Context) ([]catalog.Job, error) { return t.Catalog.ListJobs(ctx, f) })
}

func (t Catalog) ListQueue(ctx context.Context, limit int) ([]catalog.Job, error) {
	return call(ctx, "catalog ListQueue", func(ctx context.Context) ([]catalog.Job, error) { return t.Catalog.ListQueue(ctx, limit) })
}

func (t Catalog) EnqueueJob(ctx context.Context, r catalog.JobRequest) (catalog.Job, bool, error) {
	ctx, span := start(ctx, "catalog EnqueueJob", coll(r.CollectionID))
	j, created, err := t.Catalog.EnqueueJob(ctx, r)
	end(span, err)
	return j, created, err
}

func (t Catalog) EnqueueJobs(ctx context.Context, calls []catalog.EnqueueCall) ([]catalog.EnqueueOutcome, error) {
	return call(ctx, "catalog EnqueueJobs", func(ctx context.Context) ([]catalog.EnqueueOutcome, error) { return t.Catalog.EnqueueJobs(ctx, calls) })
}

func (t Catalog) ClaimJob(ctx context.Context, node string, lease time.Duration) (catalog.Job, error) {
	return call(ctx, "catalog ClaimJob", func(ctx context.Context) (catalog.Job, error) { return t.Catalog.ClaimJob(ctx, node, lease) })
}

func (t Catalog) RenewLease(ctx context.Context, jobID, node string, lease time.Duration, p catalog.JobProgress) (bool, error) {
	return call(ctx, "catalog RenewLease", func(ctx context.Context) (bool, error) { return t.Catalog.RenewLease(ctx, jobID, node, lease, p) }, job(jobID))
}

func (t Catalog) FinishJob(ctx context.Context, node string, j catalog.Job) error {
	return call0(ctx, "catalog FinishJob", func(ctx context.Context) error { return t.Catalog.FinishJob(ctx, node, j) }, job(j.ID))
}

func (t Catalog) CancelJob(ctx context.Context, jobID, note string) (catalog.Job, error) {
	return call(ctx, "catalog CancelJob", func(ctx context.Context) (catalog.Job, error) { return t.Catalog.CancelJob(ctx, jobID, note) }, job(jobID))
}

// Failure and retry state.

func (t Catalog) SetRetry(ctx context.Context, id string, retries int, retryAfter time.Time) error {
	return call0(ctx, "catalog SetRetry", func(ctx context.Context) error { return t.Catalog.SetRetry(ctx, id, retries, retryAfter) }, coll(id))
}

func (t Catalog) RecordFailure(ctx context.Context, id string, deadLetterAfter int) (int, bool, error) {
	ctx, span := start(ctx, "catalog RecordFailure", coll(id))
	n, dead, err := t.Catalog.RecordFailure(ctx, id, deadLetterAfter)
	end(span, err)
	return n, dead, err
}

func (t Catalog) RecordSuccess(ctx context.Context, id string) error {
	return call0(ctx, "catalog RecordSuccess", func(ctx context.Context) error { return t.Catalog.RecordSuccess(ctx, id) }, coll(id))
}

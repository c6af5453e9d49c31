package catalog

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/compactorhq/compactor/internal/audit"
	"github.com/compactorhq/compactor/internal/jobtype"
)

// The job queue in the catalog (DESIGN.md §7a). The jobs table is the queue
// and the database keeps its invariants for every replica at once: partial
// unique indexes allow at most one QUEUED job per collection and kind, and
// one RUNNING job per collection of any kind;
// a worker claims the next job in one transaction (passing over rows locked
// by others on PostgreSQL, the single write transaction on SQLite) with a
// job lease it renews while the job runs; a job's terminal update and its
// compaction commit are fenced by the job lease, so a node that lost it
// cannot commit. (The leader lease of the scheduler is another thing: see
// leader.go.) The
// shape follows River's claim/rescue split and Mimir's compactor scheduler
// (job tracker, lease manager).

// Queue errors; they match with errors.Is.
var (
	// ErrNoJob: no QUEUED job can be claimed now.
	ErrNoJob = errors.New("no job to claim")
	// ErrLeaseLost: the node does not hold the lease of the RUNNING job
	// (it expired and another replica took the job over, or the job ended).
	ErrLeaseLost = errors.New("job lease lost")
	// ErrJobFinished: the job to cancel has already finished.
	ErrJobFinished = errors.New("job already finished")
)

// Claim priorities as stored in jobs.priority: a lower value is claimed
// first. Job.Expedited is the Go side.
const (
	priorityExpedited = 0
	priorityNormal    = 1
)

// Interrupted notes. A job that ends this way failed transiently: the
// failure says nothing about its collection.
const (
	interruptedLease = "interrupted: lease of node %s expired"
)

// neverTime sorts after every real time in the claim order (an unknown
// oldest record is claimed last among equals).
const neverTime = int64(1<<63 - 1)

// JobProgress is the progress of a RUNNING job as its owner last persisted
// it with RenewLease. With Planned set, RenewLease also stores the plan in
// the job's own columns (offset_start, offset_end, version_before, and
// version_after = version_before until a commit; records_read), so that a
// job interrupted by a crash or a lost lease keeps what was known.
type JobProgress = jobtype.Progress

// JobRequest asks EnqueueJob for a QUEUED job.
type JobRequest struct {
	ID           string // optional; a new UUID when empty
	CollectionID string
	// Kind of the job; "" is a compaction. Deduplication is per
	// collection and kind.
	Kind JobKind
	// Params of the job (Job.Params), kept by the job it creates, not by
	// one that was queued already.
	Params  string
	Trigger Trigger
	Reason  string
	// OldestAt is the append time of the collection's oldest uncompacted
	// record (claim order: the oldest backlog first); zero when unknown.
	OldestAt time.Time
	// Continues is the id of the job this one continues; "" for none.
	Continues string
	// TraceParent is the W3C traceparent of the request that asked for the
	// job (its trace links to it); "" for none. Kept by the job it creates,
	// not by one that was queued already.
	TraceParent string
	// StartAfter and StartBefore bound when a scheduled job may be claimed
	// (its compaction window); zero: no bound. Kept by the job it creates.
	StartAfter, StartBefore time.Time
	// TriggeredBy is the principal who asked for the job ("" for the
	// scheduler); kept like TraceParent.
	TriggeredBy string
}

// EnqueueJob queues a job of kind r.Kind for r.CollectionID unless one of
// that kind is queued already: then it returns that job and created=false
// (a queued job of another kind is a different job); a ONE_OFF request raises a
// queued scheduled job to one-off priority (the operator's request runs
// first). The job's Attempt is the collection's consecutive failures + 1.
// The collection row is locked for the transaction, so concurrent enqueues
// on several replicas see each other. Errors: ErrInvalidArgument (empty
// collection id, unknown trigger), ErrNotFound (no such collection),
// ErrUnavailable.
func (c *Catalog) EnqueueJob(ctx context.Context, r JobRequest) (job Job, created bool, err error) {
	if err := checkJobRequest(r); err != nil {
		return Job{}, false, fmt.Errorf("enqueue job: %w", err)
	}
	var out []Enqueued
	err = c.writeTx(ctx, func(tx *sql.Tx) error {
		var err error
		out, err = c.execEnqueue(ctx, tx, EnqueueCall{Requests: []JobRequest{r}}, fromMs(ms(c.now())))
		return err
	})
	if err != nil {
		return Job{}, false, c.wrap(err, "enqueue job for collection %s", r.CollectionID)
	}
	return out[0].Job, out[0].Created, nil
}

// EnqueueCall is one caller's request to EnqueueJobs: a job for each of
// its collections, all or none.
type EnqueueCall struct {
	Requests []JobRequest // one per collection and kind; a pair at most once
	// SkipMissing leaves out the collections that do not exist instead of
	// failing the call (compact all: deleted since they were listed).
	SkipMissing bool
	// Actor, when set, is the operator who asked: every job of the call
	// (queued, or found queued) gets an audit event (audit.ActionCompact)
	// in the batch's transaction. A field rather than the context's actor,
	// because one batch holds the calls of several callers.
	Actor *audit.Actor
}

// Enqueued is one job of an EnqueueCall: the job queued, or the one that
// was queued already (Created false).
type Enqueued = jobtype.Enqueued[Job]

// EnqueueOutcome is the result of one EnqueueCall: its jobs in the order of
// its requests (missing collections left out with SkipMissing), or its
// error, in which case nothing of the call was enqueued.
type EnqueueOutcome struct {
	Jobs []Enqueued
	Err  error
}

// MissingCollectionsError names every collection of an EnqueueCall that
// does not exist; it matches ErrNotFound.
type MissingCollectionsError struct{ IDs []string }

func (e *MissingCollectionsError) Error() string {
	if len(e.IDs) == 1 {
		return fmt.Sprintf("collection %s: %s", e.IDs[0], ErrNotFound)
	}
	return fmt.Sprintf("collections %s: %s", strings.Join(e.IDs, ", "), ErrNotFound)
}

// Is reports whether target is ErrNotFound.
func (e *MissingCollectionsError) Is(target error) bool { return target == ErrNotFound }

// EnqueueJobs runs the EnqueueJob of every request of every call in one
// write transaction (a group commit: one commit, so one fsync on SQLite,
// for many concurrent callers), each call all or nothing: a call naming a
// collection that does not exist fails with *MissingCollectionsError
// (unless SkipMissing) and enqueues nothing, without affecting the other
// calls; an invalid request fails its call with ErrInvalidArgument. The
// collections of every call are locked and read with their queued jobs in
// a few queries for the whole batch; a later call for a collection gets
// the job an earlier call of the batch queued. The semantics per request
// are EnqueueJob's. The returned error is the transaction's (any database
// error): then no call enqueued anything. Outcomes are in the order of
// calls.
func (c *Catalog) EnqueueJobs(ctx context.Context, calls []EnqueueCall) ([]EnqueueOutcome, error) {
	out := make([]EnqueueOutcome, len(calls))
	for i, call := range calls {
		for _, r := range call.Requests {
			if err := checkJobRequest(r); err != nil {
				out[i].Err = fmt.Errorf("enqueue jobs: %w", err)
				break
			}
		}
	}
	now := fromMs(ms(c.now()))
	err := c.writeTx(ctx, func(tx *sql.Tx) error {
		var ids []string
		for i, call := range calls {
			if out[i].Err == nil {
				for _, r := range call.Requests {
					ids = append(ids, r.CollectionID)
				}
			}
		}
		colls, queued, err := c.lockForEnqueue(ctx, tx, ids)
		if err != nil {
			return err
		}
		for i, call := range calls {
			if out[i].Err != nil {
				continue
			}
			jobs, err := c.execEnqueueLocked(ctx, tx, call, now, colls, queued)
			if errors.As(err, new(*MissingCollectionsError)) {
				out[i].Err = err
				continue
			}
			if err != nil {
				return err
			}
			out[i].Jobs = jobs
		}
		return nil
	})
	if err != nil {
		return nil, c.wrap(err, "enqueue jobs of %d calls", len(calls))
	}
	return out, nil
}

// checkJobRequest validates r and gives it an id when it has none.
func checkJobRequest(r JobRequest) error {
	switch {
	case r.CollectionID == "":
		return fmt.Errorf("collection id must not be empty: %w", ErrInvalidArgument)
	case r.Trigger != TriggerScheduled && r.Trigger != TriggerOneOff:
		return fmt.Errorf("collection %s: unknown trigger %q: %w", r.CollectionID, r.Trigger, ErrInvalidArgument)
	}
	if err := checkKind(r.Kind); err != nil {
		return fmt.Errorf("collection %s: %w", r.CollectionID, err)
	}
	return nil
}

// enqueueChunk bounds the ids of one IN (...) list of execEnqueue, well
// under the bound parameters a statement may have (SQLite 32766,
// PostgreSQL 65535).
const enqueueChunk = 500

// lockCollectionsQuery reads (id, name, retry_count) of n collections by
// id and locks their rows, in id order, so that concurrent calls on several
// replicas cannot deadlock on each other's rows.
func (c *Catalog) lockCollectionsQuery(n int) string {
	return `SELECT id, name, retry_count FROM collections WHERE id IN (` + placeholders(n) + `) ORDER BY id` + c.d.forUpdate
}

// queuedOfCollectionsQuery reads the QUEUED jobs (state, then n collection
// ids).
func queuedOfCollectionsQuery(n int) string {
	return `SELECT ` + jobReadColumns + ` FROM jobs j WHERE j.state = ? AND j.collection_id IN (` + placeholders(n) + `)`
}

// enqueueColl is what enqueueing reads of a collection.
type enqueueColl struct {
	name    string
	retries int
}

// execEnqueue runs the requests of call in tx (EnqueueJob). Errors:
// *MissingCollectionsError (nothing written), or the database's.
func (c *Catalog) execEnqueue(ctx context.Context, tx *sql.Tx, call EnqueueCall, now time.Time) ([]Enqueued, error) {
	ids := make([]string, len(call.Requests))
	for i, r := range call.Requests {
		ids[i] = r.CollectionID
	}
	colls, queued, err := c.lockForEnqueue(ctx, tx, ids)
	if err != nil {
		return nil, err
	}
	return c.execEnqueueLocked(ctx, tx, call, now, colls, queued)
}

// queueKey identifies the one QUEUED job a collection may have of a kind.
type queueKey struct {
	collection string
	kind       JobKind
}

// keyOf is the queue key of job j.
func keyOf(j Job) queueKey { return queueKey{j.CollectionID, kindOrDefault(j.Kind)} }

// lockForEnqueue locks the rows of the collections ids (duplicates
// allowed) and reads them and their QUEUED jobs (of every kind): a query
// of each sort per enqueueChunk collections, not per collection.
// Collections that do not exist are absent from colls.
func (c *Catalog) lockForEnqueue(ctx context.Context, tx *sql.Tx, ids []string) (colls map[string]enqueueColl, queued map[queueKey]Job, err error) {
	ids = slices.Clone(ids)
	slices.Sort(ids) // locked in id order, so that replicas cannot deadlock
	ids = slices.Compact(ids)
	colls = make(map[string]enqueueColl, len(ids))
	queued = make(map[queueKey]Job, len(ids))
	for lo := 0; lo < len(ids); lo += enqueueChunk {
		part := ids[lo:min(lo+enqueueChunk, len(ids))]
		args := make([]any, 0, len(part)+1)
		for _, id := range part {
			args = append(args, id)
		}
		rows, err := c.txQuery(ctx, tx, c.lockCollectionsQuery(len(part)), args...)
		if err != nil {
			return nil, nil, fmt.Errorf("lock collections: %w", err)
		}
		for rows.Next() {
			var (
				id string
				ci enqueueColl
			)
			if err := rows.Scan(&id, &ci.name, &ci.retries); err != nil {
				rows.Close()
				return nil, nil, fmt.Errorf("lock collections: %w", err)
			}
			colls[id] = ci
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, nil, fmt.Errorf("lock collections: %w", err)
		}
		jobs, err := scanJobs(c.txQuery(ctx, tx, queuedOfCollectionsQuery(len(part)), append([]any{string(JobQueued)}, args...)...))
		if err != nil {
			return nil, nil, fmt.Errorf("read queued jobs: %w", err)
		}
		for _, j := range jobs {
			queued[keyOf(j)] = j
		}
	}
	return colls, queued, nil
}

// execEnqueueLocked runs the requests of call on collections read by
// lockForEnqueue, and records the jobs it queues or expedites in queued.
// Errors: *MissingCollectionsError (nothing written), or the database's.
func (c *Catalog) execEnqueueLocked(ctx context.Context, tx *sql.Tx, call EnqueueCall, now time.Time, colls map[string]enqueueColl, queued map[queueKey]Job) ([]Enqueued, error) {
	var missing []string
	for _, r := range call.Requests {
		if _, ok := colls[r.CollectionID]; !ok {
			missing = append(missing, r.CollectionID)
		}
	}
	if len(missing) > 0 && !call.SkipMissing {
		return nil, &MissingCollectionsError{IDs: missing}
	}
	out := make([]Enqueued, 0, len(call.Requests))
	for _, r := range call.Requests {
		ci, ok := colls[r.CollectionID]
		if !ok {
			continue
		}
		key := queueKey{r.CollectionID, kindOrDefault(r.Kind)}
		if job, ok := queued[key]; ok {
			if r.Trigger == TriggerOneOff && priorityOf(job) != priorityExpedited {
				if _, err := tx.ExecContext(ctx, c.d.q(`UPDATE jobs SET priority = ? WHERE id = ?`), priorityExpedited, job.ID); err != nil {
					return nil, fmt.Errorf("expedite job %s: %w", job.ID, err)
				}
				job.Expedited = true
			}
			queued[key] = job
			out = append(out, Enqueued{Job: job})
			if err := c.auditEnqueue(ctx, tx, call, r, job, false); err != nil {
				return nil, err
			}
			continue
		}
		id := r.ID
		if id == "" {
			id = uuid.NewString()
		}
		job := Job{
			ID: id, CollectionID: r.CollectionID, CollectionName: ci.name, Kind: key.kind, Trigger: r.Trigger, State: JobQueued, Reason: r.Reason,
			Attempt: ci.retries + 1, CreatedAt: now, Continues: r.Continues, OldestAt: fromMs(ms(r.OldestAt)),
			TraceParent: r.TraceParent, Params: r.Params, TriggeredBy: r.TriggeredBy, StartAfter: fromMs(ms(r.StartAfter)), StartBefore: fromMs(ms(r.StartBefore)),
		}
		if r.Trigger == TriggerOneOff {
			job.StartAfter, job.StartBefore = time.Time{}, time.Time{}
		}
		if err := c.execInsertJob(ctx, tx, job); err != nil {
			return nil, err
		}
		queued[key] = job
		out = append(out, Enqueued{Job: job, Created: true})
		if err := c.auditEnqueue(ctx, tx, call, r, job, true); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// auditEnqueue appends the audit event of request r of call, answered by
// job (created, or queued already), when the call has an actor: action
// audit.ActionCompact for a compaction, the job's kind for another kind.
func (c *Catalog) auditEnqueue(ctx context.Context, tx *sql.Tx, call EnqueueCall, r JobRequest, job Job, created bool) error {
	if call.Actor == nil {
		return nil
	}
	// A compaction is "compact"; a job of another kind is named by its
	// kind ("verify", "index_rebuild").
	action := audit.ActionCompact
	if k := kindOrDefault(job.Kind); k != jobtype.KindCompaction {
		action = string(k)
	}
	_, err := c.AppendAuditEvent(ctx, tx, *call.Actor, AuditEntry{
		Action: action, CollectionID: r.CollectionID, Target: r.CollectionID, Reason: r.Reason, JobID: job.ID,
		After: map[string]any{"job_id": job.ID, "kind": kindOrDefault(job.Kind), "created": created, "trigger": job.Trigger, "expedited": job.Expedited},
	})
	return err
}

// ClaimJob makes the next runnable QUEUED job RUNNING under owner's lease,
// which ends lease from now by the database's clock (see
// Config.DatabaseClock) unless renewed, and returns it. owner is the
// node's name, optionally followed by "/" and a token unique to the
// process (so that two processes given one name by mistake never share a
// lease); the job's Node is the name. Claim order (claimOrder): one-offs
// (and expedited jobs) first; then the aged priority rank; then the
// freshness debt, largest first; then the oldest uncompacted record, then
// enqueue order.
//
// The aged rank of a job is its collection's class rank (critical 0,
// normal 1, low 2) minus the whole Config.PriorityAging steps it has waited
// (from its creation, or from its StartAfter when later), and may go below
// zero; so a job of rank r waiting since t is never passed by a job whose
// wait began at t + (r−r'+1)·aging or later (r' its rank). Bound: under any
// load, a low job that stays runnable is claimed within
// 3·aging + ⌈(Q−1)/W⌉·D, where Q is the collections with a queued job at
// that point (each has one at most), W the workers of every replica and D
// the longest job (see docs/semantics.md, "Priorities").
//
// The freshness debt is how close the collection is to breaking its
// freshness objective: the larger of the age of the job's oldest record
// over the age objective and the backlog over the backlog objective (1 and
// more: broken); 0 without objectives.
//
// A job is runnable when its collection has no RUNNING job and, for a
// scheduled job (not expedited), the collection's retry backoff has passed
// and now is within [StartAfter, StartBefore) where set. Errors: ErrNoJob
// when nothing is runnable, ErrInvalidArgument for an empty node or a
// non-positive lease, ErrUnavailable.
func (c *Catalog) ClaimJob(ctx context.Context, node string, lease time.Duration) (Job, error) {
	if node == "" || lease <= 0 {
		return Job{}, fmt.Errorf("claim job: node %q and lease %s must be set: %w", node, lease, ErrInvalidArgument)
	}
	now := fromMs(ms(c.now()))
	// Idle workers of every replica poll: a read, which takes no write
	// lock, answers the common "nothing queued" case.
	var one int
	err := c.r.QueryRowContext(ctx, c.d.q(`SELECT 1 FROM jobs WHERE state = ? LIMIT 1`), string(JobQueued)).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return Job{}, ErrNoJob
	}
	if err != nil {
		return Job{}, c.wrap(err, "claim job on node %s", node)
	}
	var job Job
	err = c.writeTx(ctx, func(tx *sql.Tx) error {
		// The order reads every queued job: its id first, from the
		// covering indexes of the columns the order reads (jobs_claim_scan,
		// collections_claim), then that one job's row.
		var id string
		err := tx.QueryRowContext(ctx, c.d.q(`SELECT j.id FROM jobs j JOIN `+c.d.claimCollections+` ON c.id = j.collection_id
			WHERE j.state = ?
			  AND NOT EXISTS (SELECT 1 FROM jobs r WHERE r.collection_id = j.collection_id AND r.state = ?)
			  AND (j.priority = ? OR ((c.retry_after IS NULL OR c.retry_after <= ?)
			    AND (j.start_after IS NULL OR j.start_after <= ?) AND (j.start_before IS NULL OR j.start_before > ?)))
			ORDER BY `+claimOrder+` LIMIT 1`+c.d.skipLocked),
			append([]any{string(JobQueued), string(JobRunning), priorityExpedited, ms(now), ms(now), ms(now)}, c.claimOrderArgs(now)...)...).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			return ErrNoJob
		}
		if err != nil {
			return err
		}
		jobs, err := c.queryJobs(ctx, tx, `SELECT `+jobReadColumns+` FROM jobs j WHERE j.id = ?`, id)
		if err != nil {
			return err
		}
		if len(jobs) == 0 {
			return ErrNoJob
		}
		job = jobs[0]
		name, _, _ := strings.Cut(node, "/")
		job.State, job.StartedAt, job.Node = JobRunning, now, name
		job.LeaseOwner = node
		job.Progress = JobProgress{Phase: jobtype.PhaseStarting, UpdatedAt: now}
		var expires int64
		err = tx.QueryRowContext(ctx, c.d.q(`UPDATE jobs SET state = ?, started_at = ?, node = ?, lease_owner = ?, lease_expires_at = `+c.d.clockMs+` + ?,
				cancel_requested = 0, progress_phase = ?, progress_read = 0, progress_total = 0, progress_bytes = 0, progress_at = ?
			WHERE id = ? AND state = ?
			RETURNING lease_expires_at`),
			string(JobRunning), ms(now), name, node, c.dbNow(), lease.Milliseconds(), string(job.Progress.Phase), ms(now), job.ID, string(JobQueued)).Scan(&expires)
		if c.d.kind(err) == kindUnique || errors.Is(err, sql.ErrNoRows) {
			// Another replica started a job of this collection after this
			// transaction's snapshot (PostgreSQL), or claimed this one:
			// nothing to claim here now.
			return ErrNoJob
		}
		if err != nil {
			return err
		}
		job.LeaseExpiresAt = fromMs(expires)
		return nil
	})
	if errors.Is(err, ErrNoJob) {
		return Job{}, ErrNoJob
	}
	if err != nil {
		return Job{}, c.wrap(err, "claim job on node %s", node)
	}
	return job, nil
}

// claimOrder is the ORDER BY of the queue (table aliases j for the job, c
// for its collection), written once: ClaimJob and ListQueue use it, so what
// surfaces show as the run order is the order jobs are claimed in. Its
// placeholders are claimOrderArgs's (see ClaimJob for the order).
const claimOrder = `j.priority,
	c.priority_class - (CASE WHEN CAST(? AS BIGINT) > ` + waitStart + ` THEN (CAST(? AS BIGINT) - ` + waitStart + `) / CAST(? AS BIGINT) ELSE 0 END),
	(CASE WHEN ` + ageDebt + ` > ` + backlogDebt + ` THEN ` + ageDebt + ` ELSE ` + backlogDebt + ` END) DESC,
	COALESCE(j.oldest_at, ?), j.queue_seq, j.id`

// waitStart is when a queued job began to wait: its creation, or its
// StartAfter when later (a job waiting for its window does not age).
const waitStart = `(CASE WHEN j.start_after IS NOT NULL AND j.start_after > j.created_at THEN j.start_after ELSE j.created_at END)`

// ageDebt and backlogDebt are the freshness debts of a job's collection:
// the age of the job's oldest record over the age objective, the backlog
// over the backlog objective; 0 without the objective. Their placeholders
// are the time now, twice, in ageDebt.
const (
	ageDebt = `(CASE WHEN c.objective_max_age_ms > 0 AND j.oldest_at IS NOT NULL AND CAST(? AS BIGINT) > j.oldest_at
		THEN (CAST(? AS BIGINT) - j.oldest_at) * 1.0 / c.objective_max_age_ms ELSE 0 END)`
	backlogDebt = `(CASE WHEN c.objective_max_backlog > 0 THEN (c.log_position - c.compaction_offset) * 1.0 / c.objective_max_backlog ELSE 0 END)`
)

// claimOrderArgs are the values of claimOrder's placeholders at now.
func (c *Catalog) claimOrderArgs(now time.Time) []any {
	t := ms(now)
	return []any{t, t, c.aging.Milliseconds(), t, t, t, t, neverTime}
}

// RenewLease extends the lease of RUNNING job jobID held by node to lease
// from now by the database's clock, and persists its progress. It reports whether an operator asked
// to cancel the job (CancelJob on any replica). Errors: ErrLeaseLost when
// node does not hold the job's lease (expired and taken over, cancelled
// while queued, or finished), ErrUnavailable.
func (c *Catalog) RenewLease(ctx context.Context, jobID, node string, lease time.Duration, p JobProgress) (cancelRequested bool, err error) {
	now, dbNow := ms(c.now()), c.dbNow()
	var cancel int
	plan, args := "", []any{dbNow, lease.Milliseconds(), string(p.Phase), p.OpRecordsRead, p.OpRecordsTotal, p.BytesWritten, now,
		p.Fraction, etaOrNull(p), p.BlocksWritten, p.BlocksTotal, p.VectorsIndexed, p.VectorsTotal}
	if p.Planned {
		plan = `, offset_start = ?, offset_end = ?, version_before = ?, version_after = ?, records_read = ?`
		args = append(args, p.OffsetStart, p.OffsetEnd, p.VersionBefore, p.VersionBefore, p.OpRecordsRead)
	}
	args = append(args, jobID, string(JobRunning), node, dbNow)
	err = c.writeTx(ctx, func(tx *sql.Tx) error {
		return tx.QueryRowContext(ctx, c.d.q(`UPDATE jobs SET lease_expires_at = `+c.d.clockMs+` + ?,
				progress_phase = ?, progress_read = ?, progress_total = ?, progress_bytes = ?, progress_at = ?,
				progress_fraction = ?, progress_eta_ms = ?, progress_blocks_written = ?, progress_blocks_total = ?,
				progress_vectors = ?, progress_vectors_total = ?`+plan+`
			WHERE id = ? AND state = ? AND lease_owner = ? AND lease_expires_at >= `+c.d.clockMs+`
			RETURNING cancel_requested`), args...).Scan(&cancel)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return false, fmt.Errorf("renew lease of job %s on node %s: %w", jobID, node, ErrLeaseLost)
	}
	if err != nil {
		return false, c.wrap(err, "renew lease of job %s on node %s", jobID, node)
	}
	return cancel != 0, nil
}

// FinishJob writes the terminal state of job j (SUCCEEDED, FAILED or
// CANCELLED, with its figures) if node still holds its lease, and releases
// the lease. A compaction that commits writes its job through
// Commit.LeaseOwner instead, fenced the same way. Errors:
// ErrInvalidArgument (j not terminal), ErrLeaseLost, ErrUnavailable.
func (c *Catalog) FinishJob(ctx context.Context, node string, j Job) error {
	if !j.State.Finished() {
		return fmt.Errorf("finish job %s: state %s is not terminal: %w", j.ID, j.State, ErrInvalidArgument)
	}
	if err := validateJob(j); err != nil {
		return fmt.Errorf("finish job %s: %w", j.ID, err)
	}
	err := c.writeTx(ctx, func(tx *sql.Tx) error { return c.execFinishJob(ctx, tx, node, j) })
	return c.wrap(err, "finish job %s on node %s", j.ID, node)
}

// execFinishJob is the fenced terminal update of FinishJob and of a
// compaction commit: ErrLeaseLost unless the job is RUNNING under node's
// unexpired lease, by the database's clock. An expired lease never commits, even before a replica
// took the job over, so the outcome does not depend on who looks first.
func (c *Catalog) execFinishJob(ctx context.Context, tx *sql.Tx, node string, j Job) error {
	res, err := tx.ExecContext(ctx, c.d.q(`UPDATE jobs SET
			state = ?, attempt = ?, started_at = ?, finished_at = ?,
			offset_start = ?, offset_end = ?, records_read = ?, records_written = ?, bytes_written = ?,
			version_before = ?, version_after = ?, error_text = ?, note = ?,
			failure_class = ?, actual = ?,
			lease_owner = '', lease_expires_at = NULL, progress_at = NULL
		WHERE id = ? AND state = ? AND lease_owner = ? AND lease_expires_at >= `+c.d.clockMs),
		string(j.State), j.Attempt, msOrNull(j.StartedAt), msOrNull(j.FinishedAt),
		j.OffsetStart, j.OffsetEnd, j.RecordsRead, j.RecordsWritten, j.BytesWritten,
		j.VersionBefore, j.VersionAfter, j.Error, j.Note,
		string(j.FailureClass), encodeJSON(j.Actual),
		j.ID, string(JobRunning), node, c.dbNow())
	return oneRow(res, err, ErrLeaseLost)
}

// CancelJob cancels job jobID: a QUEUED job ends CANCELLED at once with
// note; for a RUNNING job it sets the cancel request that the owner sees at
// its next lease renewal (RenewLease), and the job is returned still
// RUNNING with CancelRequested. Errors: ErrNotFound, ErrJobFinished,
// ErrUnavailable.
func (c *Catalog) CancelJob(ctx context.Context, jobID, note string) (Job, error) {
	now := fromMs(ms(c.now()))
	var job Job
	err := c.writeTx(ctx, func(tx *sql.Tx) error {
		jobs, err := c.queryJobs(ctx, tx, `SELECT `+jobReadColumns+` FROM jobs j WHERE j.id = ?`+c.d.forUpdate, jobID)
		if err != nil {
			return err
		}
		if len(jobs) == 0 {
			return ErrNotFound
		}
		job = jobs[0]
		switch job.State {
		case JobQueued:
			job.State, job.FinishedAt, job.Note = JobCancelled, now, note
			_, err = tx.ExecContext(ctx, c.d.q(`UPDATE jobs SET state = ?, finished_at = ?, note = ? WHERE id = ?`),
				string(job.State), ms(now), note, job.ID)
		case JobRunning:
			job.CancelRequested = true
			_, err = tx.ExecContext(ctx, c.d.q(`UPDATE jobs SET cancel_requested = 1 WHERE id = ?`), job.ID)
		default:
			return ErrJobFinished
		}
		if err != nil {
			return err
		}
		return c.auditFromContext(ctx, tx, AuditEntry{
			Action: audit.ActionCancel, CollectionID: job.CollectionID, Target: job.ID, JobID: job.ID, Reason: note,
			Before: map[string]any{"state": jobs[0].State},
			After:  map[string]any{"state": job.State, "cancel_requested": job.CancelRequested},
		})
	})
	if err != nil {
		return Job{}, c.wrap(err, "cancel job %s", jobID)
	}
	return job, nil
}

// ExpireLeases takes over the RUNNING jobs whose lease has expired by the
// database's clock (or that have none: rows of a version without leases),
// except those whose ids are in renewing: the caller's own running jobs,
// whose leases it is renewing, and which its lease keeper stops by the
// monotonic clock if it cannot (a process never expires a lease it is
// renewing). Each ends FAILED "interrupted: lease of node X expired",
// keeping the figures its owner persisted, and a follow-up job of the same
// kind and trigger is queued for its collection unless one of that kind is
// queued already. It
// returns the expired jobs as stored after the change, oldest first. Any
// replica may call it; on PostgreSQL, rows another replica is expiring at
// the same time are skipped.
func (c *Catalog) ExpireLeases(ctx context.Context, renewing []string) ([]Job, error) {
	now := fromMs(ms(c.now()))
	expired := `j.state = ? AND (j.lease_expires_at IS NULL OR j.lease_expires_at < ` + c.d.clockMs + `)`
	args := []any{string(JobRunning), c.dbNow()}
	if len(renewing) > 0 {
		expired += ` AND j.id NOT IN (` + placeholders(len(renewing)) + `)`
		for _, id := range renewing {
			args = append(args, id)
		}
	}
	var one int
	err := c.r.QueryRowContext(ctx, c.d.q(`SELECT 1 FROM jobs j WHERE `+expired+` LIMIT 1`), args...).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil // the common case, answered without a write lock
	}
	if err != nil {
		return nil, c.wrap(err, "expire job leases")
	}
	var jobs []Job
	err = c.writeTx(ctx, func(tx *sql.Tx) error {
		var err error
		jobs, err = c.queryJobs(ctx, tx, `SELECT `+jobReadColumns+` FROM jobs j
			WHERE `+expired+` ORDER BY j.created_at, j.id`+c.d.skipLocked, args...)
		if err != nil {
			return err
		}
		return c.interruptJobs(ctx, tx, jobs, now, func(j *Job) string {
			return fmt.Sprintf(interruptedLease, cmp.Or(j.Node, j.LeaseOwner))
		})
	})
	if err != nil {
		return nil, c.wrap(err, "expire job leases")
	}
	// Not logged here: the caller (the manager) logs each job it gets.
	return jobs, nil
}

// interruptJobs ends each of jobs (RUNNING, read in tx) FAILED at now with
// the error text why gives it (execInterrupt, which also queues its
// follow-up), and updates jobs to what was written: no lease, the figures
// its owner persisted.
func (c *Catalog) interruptJobs(ctx context.Context, tx *sql.Tx, jobs []Job, now time.Time, why func(*Job) string) error {
	for i := range jobs {
		j := &jobs[i]
		j.State, j.FinishedAt, j.Error = JobFailed, now, why(j)
		if err := c.execInterrupt(ctx, tx, *j); err != nil {
			return err
		}
		j.VersionAfter, j.RecordsRead = j.VersionBefore, max(j.RecordsRead, j.Progress.OpRecordsRead)
		j.LeaseOwner, j.LeaseExpiresAt = "", time.Time{}
	}
	return nil
}

// ReleaseNode ends, as a process starts, the RUNNING jobs that a previous
// process left behind: they cannot be running any more. On a catalog this
// process holds exclusively (Config.Exclusive on SQLite: the process lock
// proves every other process that used it is gone) that is every RUNNING
// job; on a shared catalog, the jobs leased by node under any process token
// (owner "node" or "node/<token>", as ClaimJob writes it), which a process
// restarting under the same --node name knows to be its previous
// incarnation's. Each ends FAILED "interrupted: the process stopped while
// the job ran" (a transient failure, keeping the figures its owner
// persisted), and a follow-up is queued for each, like ExpireLeases. Call it
// before this process claims any job. Jobs of other nodes are left to their
// leases.
func (c *Catalog) ReleaseNode(ctx context.Context, node string) ([]Job, error) {
	now := fromMs(ms(c.now()))
	query, args := `SELECT `+jobReadColumns+` FROM jobs j
			WHERE j.state = ? AND (j.lease_owner = ? OR substr(j.lease_owner, 1, ?) = ? OR (j.lease_owner = '' AND j.node = ?))
			ORDER BY j.created_at, j.id`,
		[]any{string(JobRunning), node, utf8.RuneCountInString(node) + 1, node + "/", node}
	if c.lock != nil {
		query, args = `SELECT `+jobReadColumns+` FROM jobs j WHERE j.state = ? ORDER BY j.created_at, j.id`, []any{string(JobRunning)}
	}
	var jobs []Job
	err := c.writeTx(ctx, func(tx *sql.Tx) error {
		var err error
		jobs, err = c.queryJobs(ctx, tx, query, args...)
		if err != nil {
			return err
		}
		return c.interruptJobs(ctx, tx, jobs, now, func(*Job) string { return interrupted })
	})
	if err != nil {
		return nil, c.wrap(err, "release jobs of node %s", node)
	}
	return jobs, nil
}

// execInterrupt writes an interrupted job (FAILED, its error set) and
// queues its follow-up.
func (c *Catalog) execInterrupt(ctx context.Context, tx *sql.Tx, j Job) error {
	// What the row knew is kept: a job still RUNNING committed nothing (a
	// commit writes the finished row in its own transaction). A process
	// that stopped or a lease that expired is infrastructure: it says
	// nothing about the collection (and counts toward nothing).
	_, err := tx.ExecContext(ctx, c.d.q(`UPDATE jobs SET state = ?, finished_at = ?, error_text = ?, failure_class = '`+string(jobtype.FailureInfrastructure)+`',
			lease_owner = '', lease_expires_at = NULL, version_after = version_before,
			records_read = CASE WHEN progress_read > records_read THEN progress_read ELSE records_read END
		WHERE id = ?`),
		string(j.State), ms(j.FinishedAt), j.Error, j.ID)
	if err != nil {
		return fmt.Errorf("interrupt job %s: %w", j.ID, err)
	}
	_, err = tx.ExecContext(ctx, c.d.q(`INSERT INTO jobs (id, collection_id, kind, params, trigger_type, state, reason, attempt, created_at,
			continues, priority, oldest_at, start_after, start_before, triggered_by, queue_seq)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, `+c.d.nextQueueSeq+`)
		ON CONFLICT DO NOTHING`),
		uuid.NewString(), j.CollectionID, string(kindOrDefault(j.Kind)), j.Params, string(j.Trigger), string(JobQueued), j.Reason, j.Attempt+1, ms(j.FinishedAt),
		j.ID, priorityOf(j), msOrNull(j.OldestAt), msOrNull(j.StartAfter), msOrNull(j.StartBefore), j.TriggeredBy)
	if err != nil {
		return fmt.Errorf("queue follow-up of interrupted job %s: %w", j.ID, err)
	}
	return nil
}

// ListQueue returns up to limit QUEUED jobs (0: 1000) in the order ClaimJob
// takes them now (ignoring backoff, start bounds and running collections,
// which only delay a job).
func (c *Catalog) ListQueue(ctx context.Context, limit int) ([]Job, error) {
	if limit <= 0 || limit > maxListJobs {
		limit = maxListJobs
	}
	args := append([]any{string(JobQueued)}, c.claimOrderArgs(fromMs(ms(c.now())))...)
	jobs, err := c.queryJobs(ctx, c.r, `SELECT `+jobReadColumns+` FROM jobs j JOIN collections c ON c.id = j.collection_id
		WHERE j.state = ? ORDER BY `+claimOrder+` LIMIT ?`, append(args, limit)...)
	if err != nil {
		return nil, c.wrap(err, "list queue")
	}
	return jobs, nil
}

// priorityOf is the stored claim priority of j.
func priorityOf(j Job) int {
	if j.Expedited || j.Trigger == TriggerOneOff {
		return priorityExpedited
	}
	return priorityNormal
}

// prefixed qualifies each column of a comma-separated list with alias.
func prefixed(alias, columns string) string {
	cols := strings.Split(columns, ",")
	for i, col := range cols {
		cols[i] = alias + "." + strings.TrimSpace(col)
	}
	return strings.Join(cols, ", ")
}

// SetJobPrediction stores the prediction of RUNNING job jobID, made when
// node claimed it, if node still holds its lease. Errors: ErrLeaseLost,
// ErrUnavailable.
func (c *Catalog) SetJobPrediction(ctx context.Context, jobID, node string, p jobtype.Prediction) error {
	err := c.writeTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, c.d.q(`UPDATE jobs SET predicted = ? WHERE id = ? AND state = ? AND lease_owner = ?`),
			encodeJSON(&p), jobID, string(JobRunning), node)
		return oneRow(res, err, ErrLeaseLost)
	})
	return c.wrap(err, "store the prediction of job %s on node %s", jobID, node)
}

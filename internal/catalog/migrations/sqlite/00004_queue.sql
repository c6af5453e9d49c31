-- The job queue in the catalog (DESIGN.md §7a): the jobs table is the queue,
-- and the database, not a process, keeps its invariants. A worker claims the
-- next QUEUED job with a lease that it renews while the job runs (persisting
-- progress with it); any replica takes over a job whose lease expired. Retry
-- state, nodes and the scheduler's leader lease are rows here too, shared by
-- every replica.

-- +goose Up
ALTER TABLE jobs ADD COLUMN priority INTEGER NOT NULL DEFAULT 1;        -- claim order: 0 one-off, 1 scheduled
ALTER TABLE jobs ADD COLUMN oldest_at INTEGER;                          -- oldest uncompacted record at enqueue; NULL: unknown, claimed last
ALTER TABLE jobs ADD COLUMN queue_seq INTEGER NOT NULL DEFAULT 0;       -- enqueue order, the last tie-break
ALTER TABLE jobs ADD COLUMN lease_owner TEXT NOT NULL DEFAULT '';       -- node holding the lease of a RUNNING job
ALTER TABLE jobs ADD COLUMN lease_expires_at INTEGER;                   -- the lease ends then unless renewed
ALTER TABLE jobs ADD COLUMN cancel_requested INTEGER NOT NULL DEFAULT 0; -- 1: an operator asked to cancel the RUNNING job
ALTER TABLE jobs ADD COLUMN progress_phase TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN progress_read INTEGER NOT NULL DEFAULT 0;   -- log records read so far
ALTER TABLE jobs ADD COLUMN progress_total INTEGER NOT NULL DEFAULT 0;  -- log records the job reads
ALTER TABLE jobs ADD COLUMN progress_bytes INTEGER NOT NULL DEFAULT 0;  -- bytes written so far
ALTER TABLE jobs ADD COLUMN progress_at INTEGER;                        -- when the progress was persisted

-- At most one QUEUED and one RUNNING job per collection.
CREATE UNIQUE INDEX jobs_one_queued ON jobs (collection_id) WHERE state = 'QUEUED';
CREATE UNIQUE INDEX jobs_one_running ON jobs (collection_id) WHERE state = 'RUNNING';
CREATE INDEX jobs_claim_order ON jobs (priority, oldest_at, queue_seq) WHERE state = 'QUEUED';
CREATE INDEX jobs_lease_expiry ON jobs (lease_expires_at) WHERE state = 'RUNNING';
CREATE INDEX jobs_queue_seq ON jobs (queue_seq); -- the next queue_seq is MAX + 1 under the write lock

-- Retry state: consecutive failures, transient ones included (the backoff
-- counts them; failure_count, for the dead-letter state, does not), and the
-- time before which no scheduled job of the collection is claimed.
ALTER TABLE collections ADD COLUMN retry_count INTEGER NOT NULL DEFAULT 0;
ALTER TABLE collections ADD COLUMN retry_after INTEGER;

-- Replicas: each registers and heartbeats.
CREATE TABLE nodes (
    name         TEXT    NOT NULL PRIMARY KEY,
    address      TEXT    NOT NULL DEFAULT '',
    version      TEXT    NOT NULL DEFAULT '',
    started_at   INTEGER NOT NULL,
    heartbeat_at INTEGER NOT NULL
);

-- Named leases (the scheduler's leader lease): held by owner until expires_at.
CREATE TABLE leases (
    name       TEXT    NOT NULL PRIMARY KEY,
    owner      TEXT    NOT NULL,
    expires_at INTEGER NOT NULL
);

-- +goose Down
DROP TABLE leases;
DROP TABLE nodes;
DROP INDEX jobs_queue_seq;
DROP INDEX jobs_lease_expiry;
DROP INDEX jobs_claim_order;
DROP INDEX jobs_one_running;
DROP INDEX jobs_one_queued;
ALTER TABLE collections DROP COLUMN retry_after;
ALTER TABLE collections DROP COLUMN retry_count;
ALTER TABLE jobs DROP COLUMN progress_at;
ALTER TABLE jobs DROP COLUMN progress_bytes;
ALTER TABLE jobs DROP COLUMN progress_total;
ALTER TABLE jobs DROP COLUMN progress_read;
ALTER TABLE jobs DROP COLUMN progress_phase;
ALTER TABLE jobs DROP COLUMN cancel_requested;
ALTER TABLE jobs DROP COLUMN lease_expires_at;
ALTER TABLE jobs DROP COLUMN lease_owner;
ALTER TABLE jobs DROP COLUMN queue_seq;
ALTER TABLE jobs DROP COLUMN oldest_at;
ALTER TABLE jobs DROP COLUMN priority;

-- The audit log (README "Security"): every operator action, written in the
-- transaction of the action, hash-chained so that an edit or a deletion of
-- an event is detectable (docs/operations.md "Audit log"); and who
-- triggered each job.

-- +goose Up
-- One row per event; id is the event's position in the chain (1, 2, ...
-- without gaps), prev_hash the hash of event id-1 (64 zeros for the first),
-- hash the SHA-256 of the chain label, prev_hash and the event's canonical
-- encoding (package internal/audit). Never updated, never pruned, and kept
-- when a collection is deleted.
CREATE TABLE audit_events (
    id            INTEGER NOT NULL PRIMARY KEY,
    created_at    INTEGER NOT NULL,
    principal     TEXT NOT NULL,
    role          TEXT NOT NULL,
    source        TEXT NOT NULL,
    action        TEXT NOT NULL,
    collection_id TEXT NOT NULL,
    target        TEXT NOT NULL,
    reason        TEXT NOT NULL,
    before_state  TEXT NOT NULL,
    after_state   TEXT NOT NULL,
    job_id        TEXT NOT NULL,
    prev_hash     TEXT NOT NULL,
    hash          TEXT NOT NULL
);

CREATE INDEX audit_events_collection ON audit_events (collection_id, id);
CREATE INDEX audit_events_created ON audit_events (created_at);

-- The head of the chain: the last event's id and hash, in one row that
-- every append locks and rewrites, so that appends are serialized (no two
-- events take one id or chain to one predecessor) and a deletion of the
-- last events is detectable.
CREATE TABLE audit_head (
    singleton INTEGER NOT NULL PRIMARY KEY CHECK (singleton = 1),
    last_id   INTEGER NOT NULL,
    last_hash TEXT NOT NULL
);
INSERT INTO audit_head (singleton, last_id, last_hash)
    VALUES (1, 0, '0000000000000000000000000000000000000000000000000000000000000000');

-- Who asked for a job: the principal of a one-off compaction ("anonymous"
-- without authentication); '' for jobs the scheduler queued. Continuation
-- jobs keep the value of the job they continue.
ALTER TABLE jobs ADD COLUMN triggered_by TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE jobs DROP COLUMN triggered_by;
DROP TABLE audit_head;
DROP TABLE audit_events;

-- The catalog schema (DESIGN.md §7). Times are unix milliseconds UTC;
-- optional times are NULL when unset.

-- +goose Up
CREATE TABLE collections (
    id                TEXT    NOT NULL PRIMARY KEY,           -- UUID
    name              TEXT    NOT NULL UNIQUE,
    dimension         INTEGER NOT NULL DEFAULT 0,             -- 0: not fixed yet
    log_position      INTEGER NOT NULL DEFAULT 0,             -- last appended offset
    compaction_offset INTEGER NOT NULL DEFAULT 0,             -- last compacted offset
    segment_version   INTEGER NOT NULL DEFAULT 0,
    manifest_key      TEXT    NOT NULL DEFAULT '',
    record_count      INTEGER NOT NULL DEFAULT 0,
    failure_count     INTEGER NOT NULL DEFAULT 0,
    dead_lettered_at  INTEGER,
    last_compacted_at INTEGER,
    created_at        INTEGER NOT NULL,
    updated_at        INTEGER NOT NULL,
    CHECK (compaction_offset >= 0 AND compaction_offset <= log_position)
);

-- The write-ahead log: one row per operation record, dense offsets per
-- collection starting at 1. Rows at or below the compaction offset are
-- purged by the commit of a compaction.
CREATE TABLE log (
    collection_id TEXT    NOT NULL REFERENCES collections (id) ON DELETE CASCADE,
    log_offset    INTEGER NOT NULL,
    appended_at   INTEGER NOT NULL,
    record        BLOB    NOT NULL,                           -- materialize.OperationRecord.MarshalBinary
    PRIMARY KEY (collection_id, log_offset)
);

CREATE TABLE versions (
    collection_id     TEXT    NOT NULL REFERENCES collections (id) ON DELETE CASCADE,
    version           INTEGER NOT NULL,
    manifest_key      TEXT    NOT NULL,
    compaction_offset INTEGER NOT NULL,
    record_count      INTEGER NOT NULL,
    created_at        INTEGER NOT NULL,
    PRIMARY KEY (collection_id, version)
);

CREATE TABLE jobs (
    id              TEXT    NOT NULL PRIMARY KEY,             -- UUID
    collection_id   TEXT    NOT NULL REFERENCES collections (id) ON DELETE CASCADE,
    trigger_type    TEXT    NOT NULL,                         -- SCHEDULED | ONE_OFF
    state           TEXT    NOT NULL,                         -- QUEUED | RUNNING | SUCCEEDED | FAILED | CANCELLED
    reason          TEXT    NOT NULL DEFAULT '',
    attempt         INTEGER NOT NULL DEFAULT 0,
    created_at      INTEGER NOT NULL,
    started_at      INTEGER,
    finished_at     INTEGER,
    offset_start    INTEGER NOT NULL DEFAULT 0,
    offset_end      INTEGER NOT NULL DEFAULT 0,
    records_read    INTEGER NOT NULL DEFAULT 0,
    records_written INTEGER NOT NULL DEFAULT 0,
    bytes_written   INTEGER NOT NULL DEFAULT 0,
    version_before  INTEGER NOT NULL DEFAULT 0,
    version_after   INTEGER NOT NULL DEFAULT 0,
    error_text      TEXT    NOT NULL DEFAULT '',
    note            TEXT    NOT NULL DEFAULT '',
    continues       TEXT    NOT NULL DEFAULT '', -- id of the job this one continues
    node            TEXT    NOT NULL DEFAULT ''
);

CREATE INDEX jobs_created ON jobs (created_at, id);
CREATE INDEX jobs_collection_created ON jobs (collection_id, created_at, id);
CREATE INDEX jobs_state_created ON jobs (state, created_at, id);

-- +goose Down
DROP TABLE jobs;
DROP TABLE versions;
DROP TABLE log;
DROP TABLE collections;

-- The catalog schema (DESIGN.md §7), PostgreSQL. Times are unix milliseconds
-- UTC; optional times are NULL when unset. Text keys use the "C" collation so
-- that ORDER BY name and (created_at, id) compare bytes, as SQLite does.

-- +goose Up
CREATE TABLE collections (
    id                TEXT    COLLATE "C" NOT NULL PRIMARY KEY, -- UUID
    name              TEXT    COLLATE "C" NOT NULL UNIQUE,
    dimension         BIGINT  NOT NULL DEFAULT 0,             -- 0: not fixed yet
    log_position      BIGINT  NOT NULL DEFAULT 0,             -- last appended offset
    compaction_offset BIGINT  NOT NULL DEFAULT 0,             -- last compacted offset
    segment_version   BIGINT  NOT NULL DEFAULT 0,
    manifest_key      TEXT    NOT NULL DEFAULT '',
    record_count      BIGINT  NOT NULL DEFAULT 0,
    failure_count     BIGINT  NOT NULL DEFAULT 0,
    dead_lettered_at  BIGINT,
    last_compacted_at BIGINT,
    created_at        BIGINT  NOT NULL,
    updated_at        BIGINT  NOT NULL,
    CHECK (compaction_offset >= 0 AND compaction_offset <= log_position)
);

-- The write-ahead log: one row per operation record, dense offsets per
-- collection starting at 1. Rows at or below the compaction offset are
-- purged by the commit of a compaction.
CREATE TABLE log (
    collection_id TEXT    COLLATE "C" NOT NULL REFERENCES collections (id) ON DELETE CASCADE,
    log_offset    BIGINT  NOT NULL,
    appended_at   BIGINT  NOT NULL,
    record        BYTEA   NOT NULL,                           -- materialize.OperationRecord.MarshalBinary
    PRIMARY KEY (collection_id, log_offset)
);

CREATE TABLE versions (
    collection_id     TEXT    COLLATE "C" NOT NULL REFERENCES collections (id) ON DELETE CASCADE,
    version           BIGINT  NOT NULL,
    manifest_key      TEXT    NOT NULL,
    compaction_offset BIGINT  NOT NULL,
    record_count      BIGINT  NOT NULL,
    created_at        BIGINT  NOT NULL,
    PRIMARY KEY (collection_id, version)
);

CREATE TABLE jobs (
    id              TEXT    COLLATE "C" NOT NULL PRIMARY KEY, -- UUID
    collection_id   TEXT    COLLATE "C" NOT NULL REFERENCES collections (id) ON DELETE CASCADE,
    trigger_type    TEXT    NOT NULL,                         -- SCHEDULED | ONE_OFF
    state           TEXT    NOT NULL,                         -- QUEUED | RUNNING | SUCCEEDED | FAILED | CANCELLED
    reason          TEXT    NOT NULL DEFAULT '',
    attempt         BIGINT  NOT NULL DEFAULT 0,
    created_at      BIGINT  NOT NULL,
    started_at      BIGINT,
    finished_at     BIGINT,
    offset_start    BIGINT  NOT NULL DEFAULT 0,
    offset_end      BIGINT  NOT NULL DEFAULT 0,
    records_read    BIGINT  NOT NULL DEFAULT 0,
    records_written BIGINT  NOT NULL DEFAULT 0,
    bytes_written   BIGINT  NOT NULL DEFAULT 0,
    version_before  BIGINT  NOT NULL DEFAULT 0,
    version_after   BIGINT  NOT NULL DEFAULT 0,
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

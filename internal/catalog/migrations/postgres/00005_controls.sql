-- Operator controls (issue: pause, per-collection settings, run-time
-- settings), persisted so that they survive restarts and hold for every
-- replica.

-- +goose Up
-- A paused collection is skipped by the scheduler (one-off compactions still
-- run): when, why and by whom it was paused; NULL paused_at: not paused.
ALTER TABLE collections ADD COLUMN paused_at BIGINT;
ALTER TABLE collections ADD COLUMN pause_reason TEXT NOT NULL DEFAULT '';
ALTER TABLE collections ADD COLUMN paused_by TEXT NOT NULL DEFAULT '';
-- Per-collection overrides of the scheduler's thresholds; NULL: the server's.
ALTER TABLE collections ADD COLUMN min_compaction_size BIGINT;     -- records
ALTER TABLE collections ADD COLUMN max_uncompacted_age_ms BIGINT;  -- milliseconds

-- Cluster-wide settings changed at run time (the global pause, the
-- throughput cap): one row per setting, with who changed it, when and why.
CREATE TABLE settings (
    name       TEXT    COLLATE "C" NOT NULL PRIMARY KEY,
    value      TEXT    NOT NULL,
    reason     TEXT    NOT NULL DEFAULT '',
    updated_by TEXT    NOT NULL DEFAULT '',
    updated_at BIGINT NOT NULL
);

-- +goose Down
DROP TABLE settings;
ALTER TABLE collections DROP COLUMN max_uncompacted_age_ms;
ALTER TABLE collections DROP COLUMN min_compaction_size;
ALTER TABLE collections DROP COLUMN paused_by;
ALTER TABLE collections DROP COLUMN pause_reason;
ALTER TABLE collections DROP COLUMN paused_at;

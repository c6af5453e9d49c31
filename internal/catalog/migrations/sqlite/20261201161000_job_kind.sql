-- The kind of a job (jobtype.Kind): 'compaction' (every job before this
-- migration), 'index_rebuild', 'verify'. The queue keeps at most one QUEUED
-- job per collection and kind (a queued compaction and a queued index
-- rebuild of one collection are two jobs), and still at most one RUNNING
-- job per collection, whatever its kind: every kind commits segment
-- versions of its collection.

-- +goose Up
ALTER TABLE jobs ADD COLUMN kind TEXT NOT NULL DEFAULT 'compaction';
DROP INDEX jobs_one_queued;
CREATE UNIQUE INDEX jobs_one_queued ON jobs (collection_id, kind) WHERE state = 'QUEUED';

-- +goose Down
-- Fails when a collection has queued jobs of two kinds: cancel one first.
DROP INDEX jobs_one_queued;
CREATE UNIQUE INDEX jobs_one_queued ON jobs (collection_id) WHERE state = 'QUEUED';
ALTER TABLE jobs DROP COLUMN kind;

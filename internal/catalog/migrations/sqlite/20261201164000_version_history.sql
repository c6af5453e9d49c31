-- The history of a collection's versions (README "Versions and rollback"):
-- the job that wrote a version ('' for a rollback, and for versions
-- committed before this migration), the compaction offset it was built
-- from (its log offsets covered are (offset_start, compaction_offset]; NULL
-- before this migration), and, for a version made by a rollback, the
-- version whose segment it restores (NULL otherwise), the operator's reason
-- and who asked for it.

-- +goose Up
ALTER TABLE versions ADD COLUMN job_id TEXT NOT NULL DEFAULT '';
ALTER TABLE versions ADD COLUMN offset_start INTEGER;
ALTER TABLE versions ADD COLUMN rollback_of INTEGER;
ALTER TABLE versions ADD COLUMN reason TEXT NOT NULL DEFAULT '';
ALTER TABLE versions ADD COLUMN created_by TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE versions DROP COLUMN created_by;
ALTER TABLE versions DROP COLUMN reason;
ALTER TABLE versions DROP COLUMN rollback_of;
ALTER TABLE versions DROP COLUMN offset_start;
ALTER TABLE versions DROP COLUMN job_id;

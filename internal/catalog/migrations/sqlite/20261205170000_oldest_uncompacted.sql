-- The append time of a collection's first uncompacted log record, kept on
-- the collection row by the writes that move its log position (an append
-- to an empty backlog), its compaction offset (a commit, a rollback), so
-- that a list of every collection reads no log row. NULL: no backlog.

-- +goose Up
ALTER TABLE collections ADD COLUMN oldest_uncompacted_at INTEGER;
UPDATE collections SET oldest_uncompacted_at = (
    SELECT l.appended_at FROM log l
    WHERE l.collection_id = collections.id AND l.log_offset = collections.compaction_offset + 1);

-- +goose Down
ALTER TABLE collections DROP COLUMN oldest_uncompacted_at;

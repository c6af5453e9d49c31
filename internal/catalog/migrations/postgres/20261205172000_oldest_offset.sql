-- The compaction offset that collections.oldest_uncompacted_at was written
-- for: the time is used only while the offset is still that one, so that a
-- catalog also written by a build that does not keep the time (a rolling
-- upgrade, a downgrade) reads the log row instead of a stale time. Both are
-- filled in afresh.

-- +goose Up
ALTER TABLE collections ADD COLUMN oldest_offset BIGINT;
UPDATE collections SET oldest_offset = compaction_offset, oldest_uncompacted_at = (
    SELECT l.appended_at FROM log l
    WHERE l.collection_id = collections.id AND l.log_offset = collections.compaction_offset + 1);

-- +goose Down
ALTER TABLE collections DROP COLUMN oldest_offset;

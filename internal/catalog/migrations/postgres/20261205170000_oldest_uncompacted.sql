-- The append time of a collection's first uncompacted log record, kept on
-- the collection row with the compaction offset it was written for by the
-- writes that move its log position (an append) or its compaction offset (a
-- commit, a rollback), so that a list of every collection reads no log row.
-- The time is used only while the offset is still that one: a catalog also
-- written by a build that does not keep it (a rolling upgrade, a downgrade)
-- reads the log row instead of a stale time. NULL time: no backlog.

-- +goose Up
ALTER TABLE collections ADD COLUMN oldest_uncompacted_at BIGINT;
ALTER TABLE collections ADD COLUMN oldest_offset BIGINT;
UPDATE collections SET oldest_offset = compaction_offset, oldest_uncompacted_at = (
    SELECT l.appended_at FROM log l
    WHERE l.collection_id = collections.id AND l.log_offset = collections.compaction_offset + 1);

-- +goose Down
ALTER TABLE collections DROP COLUMN oldest_offset;
ALTER TABLE collections DROP COLUMN oldest_uncompacted_at;

-- Scheduling policy: a collection's priority class, its compaction windows
-- and its freshness objectives; and the times a queued scheduled job may
-- start in (its compaction window), which every replica's claim honours.

-- +goose Up
-- Claim rank of the collection's scheduled jobs: 0 critical, 1 normal, 2 low.
ALTER TABLE collections ADD COLUMN priority_class INTEGER NOT NULL DEFAULT 1;
-- Compaction windows of the collection, one per line ("Mon-Fri 01:00-05:00
-- Europe/Berlin"); '': the server's --compaction-window.
ALTER TABLE collections ADD COLUMN compaction_windows TEXT NOT NULL DEFAULT '';
-- Freshness objectives; NULL: none.
ALTER TABLE collections ADD COLUMN objective_max_age_ms INTEGER;   -- milliseconds
ALTER TABLE collections ADD COLUMN objective_max_backlog INTEGER;  -- records
-- A scheduled job is claimed only from start_after and before start_before
-- (milliseconds; NULL: no bound); one-off and expedited jobs ignore both.
ALTER TABLE jobs ADD COLUMN start_after INTEGER;
ALTER TABLE jobs ADD COLUMN start_before INTEGER;

-- +goose Down
ALTER TABLE jobs DROP COLUMN start_before;
ALTER TABLE jobs DROP COLUMN start_after;
ALTER TABLE collections DROP COLUMN objective_max_backlog;
ALTER TABLE collections DROP COLUMN objective_max_age_ms;
ALTER TABLE collections DROP COLUMN compaction_windows;
ALTER TABLE collections DROP COLUMN priority_class;

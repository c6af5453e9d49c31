-- The W3C traceparent of the request that queued a job (a Compact call),
-- so that the job's trace links to the request's; '' for jobs queued by
-- the scheduler, by a follow-up, or before this migration.

-- +goose Up
ALTER TABLE jobs ADD COLUMN trace_parent TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE jobs DROP COLUMN trace_parent;

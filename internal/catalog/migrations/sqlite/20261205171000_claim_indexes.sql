-- Covering indexes of the columns a claim orders the queue by, so that
-- ordering every queued job reads index entries, not a job row and a
-- collection row each (ClaimJob reads the winner's row afterwards).

-- +goose Up
CREATE INDEX jobs_claim_scan ON jobs (state, priority, collection_id, created_at, start_after, start_before, oldest_at, queue_seq, id);
CREATE INDEX collections_claim ON collections (id, priority_class, retry_after, objective_max_age_ms, objective_max_backlog, log_position, compaction_offset);

-- +goose Down
DROP INDEX collections_claim;
DROP INDEX jobs_claim_scan;

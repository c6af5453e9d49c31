-- Truthful progress (README "Status page"): a RUNNING job's owner persists,
-- with its lease, the fraction of the whole job done, its ETA and the blocks
-- written of those planned, so that every replica shows them. And the
-- storage figures of each committed version (README "Status page"): the
-- bytes of its blocks and their number.

-- +goose Up
ALTER TABLE jobs ADD COLUMN progress_fraction REAL NOT NULL DEFAULT 0;   -- 0 to 1, of the whole job
ALTER TABLE jobs ADD COLUMN progress_eta_ms INTEGER;                         -- time left in ms; NULL: unknown
ALTER TABLE jobs ADD COLUMN progress_blocks_written INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN progress_blocks_total INTEGER NOT NULL DEFAULT 0; -- 0: not known yet
ALTER TABLE versions ADD COLUMN segment_bytes INTEGER NOT NULL DEFAULT 0;    -- bytes of the version's blocks; 0 for versions committed before
ALTER TABLE versions ADD COLUMN block_count INTEGER NOT NULL DEFAULT 0;      -- blocks the version's manifest lists

-- +goose Down
ALTER TABLE versions DROP COLUMN block_count;
ALTER TABLE versions DROP COLUMN segment_bytes;
ALTER TABLE jobs DROP COLUMN progress_blocks_total;
ALTER TABLE jobs DROP COLUMN progress_blocks_written;
ALTER TABLE jobs DROP COLUMN progress_eta_ms;
ALTER TABLE jobs DROP COLUMN progress_fraction;

-- What a job of a kind other than compaction is asked to do (params: a JSON
-- object of the kind's parameters, '' for none; an index rebuild's
-- {"m": 32, "ef_construction": 400}), and the vectors a running job has
-- inserted into a vector index of how many (its progress while indexing).

-- +goose Up
ALTER TABLE jobs ADD COLUMN params TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN progress_vectors BIGINT NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN progress_vectors_total BIGINT NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE jobs DROP COLUMN progress_vectors_total;
ALTER TABLE jobs DROP COLUMN progress_vectors;
ALTER TABLE jobs DROP COLUMN params;

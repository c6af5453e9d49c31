-- The distance of a collection's queries and the parameters of its vector
-- index, fixed at creation. Collections created before this migration get
-- the defaults: cosine, M 16, ef_construction 200, ef_search 100, indexed.

-- +goose Up
ALTER TABLE collections ADD COLUMN distance TEXT NOT NULL DEFAULT 'cosine';          -- l2, cosine or ip
ALTER TABLE collections ADD COLUMN index_m INTEGER NOT NULL DEFAULT 16;              -- HNSW neighbours per node and layer
ALTER TABLE collections ADD COLUMN index_ef_construction INTEGER NOT NULL DEFAULT 200;
ALTER TABLE collections ADD COLUMN index_ef_search INTEGER NOT NULL DEFAULT 100;     -- default ef of a query
ALTER TABLE collections ADD COLUMN index_disabled INTEGER NOT NULL DEFAULT 0;        -- 1: no index, queries scan

-- +goose Down
ALTER TABLE collections DROP COLUMN index_disabled;
ALTER TABLE collections DROP COLUMN index_ef_search;
ALTER TABLE collections DROP COLUMN index_ef_construction;
ALTER TABLE collections DROP COLUMN index_m;
ALTER TABLE collections DROP COLUMN distance;

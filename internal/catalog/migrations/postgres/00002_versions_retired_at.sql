-- GC retention in catalog time (README "GC"): a version that leaves the
-- retained set (beyond --versions-to-keep and not current) is marked
-- retired_at (unix milliseconds UTC) by GC; its manifest and blocks are
-- deleted only once it has been retired for longer than --gc-grace, so that
-- the grace counts from when a reader could last have picked the version,
-- not from when its blobs were written. NULL: retained.

-- +goose Up
ALTER TABLE versions ADD COLUMN retired_at BIGINT;

-- +goose Down
ALTER TABLE versions DROP COLUMN retired_at;

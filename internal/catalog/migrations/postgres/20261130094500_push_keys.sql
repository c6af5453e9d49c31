-- Idempotency keys of PushLogs (README "Retry-safe pushes"); the row the
-- readiness probe writes while the catalog is full and the log purges of
-- deleted collections (README "Disk full").

-- +goose Up
-- One row per (collection, key) pushed within the window: the SHA-256 of the
-- batch and the offsets it was given. Rows older than the window are purged
-- by the next keyed push to the collection and ignored before that.
CREATE TABLE push_keys (
    collection_id TEXT    COLLATE "C" NOT NULL REFERENCES collections (id) ON DELETE CASCADE,
    push_key      TEXT    COLLATE "C" NOT NULL,
    batch_sha256  BYTEA   NOT NULL,
    first_offset  BIGINT  NOT NULL,
    last_offset   BIGINT  NOT NULL,
    created_at    BIGINT  NOT NULL,
    PRIMARY KEY (collection_id, push_key)
);

CREATE INDEX push_keys_collection_created ON push_keys (collection_id, created_at);

-- At most one row (id 1), rewritten by each probe.
CREATE TABLE storage_probe (
    id         BIGINT  NOT NULL PRIMARY KEY,
    written_at BIGINT  NOT NULL,
    pad        BYTEA   NOT NULL
);

-- Collections deleted whose log rows are still being purged: SQLite deletes
-- the collection row in one small transaction and its log rows afterwards in
-- chunks, so that deleting needs little free space (README "Disk full").
-- Unused by PostgreSQL, which deletes in one transaction.
CREATE TABLE log_purges (
    collection_id TEXT    COLLATE "C" NOT NULL PRIMARY KEY,
    deleted_at    BIGINT NOT NULL
);

-- +goose Down
DROP TABLE log_purges;
DROP TABLE storage_probe;
DROP TABLE push_keys;

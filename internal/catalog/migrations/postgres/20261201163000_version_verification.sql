-- Verified versions (docs/semantics.md "Verified versions"): digest is the
-- version's record digest as its compaction wrote it (32 hex digits; '' for
-- versions committed before digests, or whose blocks lack them), a copy
-- beside the manifest's that a verification compares with. verified_at
-- (unix milliseconds UTC) is when a verify job or the scrub last checked the
-- version (NULL: never); verify_error is what that check found wrong ('':
-- it verified).

-- +goose Up
ALTER TABLE versions ADD COLUMN digest TEXT NOT NULL DEFAULT '';
ALTER TABLE versions ADD COLUMN verified_at BIGINT;
ALTER TABLE versions ADD COLUMN verify_error TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE versions DROP COLUMN verify_error;
ALTER TABLE versions DROP COLUMN verified_at;
ALTER TABLE versions DROP COLUMN digest;

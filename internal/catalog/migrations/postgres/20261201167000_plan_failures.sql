-- A job's prediction and actual figures (the plan that prices itself), the
-- class of a failed job, and the dead-letter history of collections.

-- +goose Up
-- failure_class: '' unless FAILED; 'infrastructure', 'data' or 'internal'.
ALTER TABLE jobs ADD COLUMN failure_class TEXT NOT NULL DEFAULT '';
-- predicted: the jobtype.Prediction made when the job was claimed, as JSON
-- ('' when none was made); actual: the jobtype.Actual of its run, as JSON.
ALTER TABLE jobs ADD COLUMN predicted TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN actual TEXT NOT NULL DEFAULT '';

-- Every change of a collection's dead-letter state, oldest first by id:
-- dead-lettered (with the build of the server that did it), redriven (by
-- the scheduler, after the cool-off or under a new build), cleared (by an
-- operator, with who and why), recovered (a compaction succeeded).
CREATE TABLE dead_letter_events (
    id            BIGSERIAL PRIMARY KEY,
    collection_id TEXT    COLLATE "C" NOT NULL REFERENCES collections (id) ON DELETE CASCADE,
    at            BIGINT  NOT NULL,
    event         TEXT    NOT NULL,
    cause         TEXT    NOT NULL DEFAULT '',
    build         TEXT    NOT NULL DEFAULT '',
    actor         TEXT    NOT NULL DEFAULT '',
    reason        TEXT    NOT NULL DEFAULT '',
    job_id        TEXT    NOT NULL DEFAULT '',
    failures      BIGINT  NOT NULL DEFAULT 0
);
CREATE INDEX dead_letter_events_collection ON dead_letter_events (collection_id, id);

-- +goose Down
DROP TABLE dead_letter_events;
ALTER TABLE jobs DROP COLUMN actual;
ALTER TABLE jobs DROP COLUMN predicted;
ALTER TABLE jobs DROP COLUMN failure_class;

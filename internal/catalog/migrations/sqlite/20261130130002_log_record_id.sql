-- The log tail indexed by record id within the collection, so that a read
-- of some ids or of an id range reads only their log rows (README
-- "Reads"; issue 10 goal 4).

-- +goose Up
-- The id of the row's operation record (materialize.OperationRecord.ID), as
-- bytes so that it sorts as segments do (byte order). Filled at append;
-- rows appended before this migration are filled at Open by the catalog
-- (decoding the stored record), and read by decoding them until then.
ALTER TABLE log ADD COLUMN record_id BLOB;

CREATE INDEX log_collection_record ON log (collection_id, record_id, log_offset);

-- The rows whose record_id is not filled yet: empty once Open has filled
-- them, so that finding them costs nothing.
CREATE INDEX log_record_id_missing ON log (collection_id, log_offset) WHERE record_id IS NULL;

-- +goose Down
DROP INDEX log_record_id_missing;
DROP INDEX log_collection_record;
ALTER TABLE log DROP COLUMN record_id;

-- A collection's throughput share: the fraction (0 < share <= 1) of the
-- throughput cap its compactions may write while other compactions write on
-- the same node; NULL: no share (the cap is shared first come, first served).

-- +goose Up
ALTER TABLE collections ADD COLUMN throughput_share REAL;

-- +goose Down
ALTER TABLE collections DROP COLUMN throughput_share;

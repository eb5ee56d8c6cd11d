-- What each delivery attempt answered, for the console and `wharf deliveries show`: the last
-- HTTP status code on the delivery row, and one history row per attempt that did not succeed
-- (a retry or the final failure). A delivery sent at its first attempt writes no history row,
-- so the steady state costs nothing; its answer is `last_status_code` and `sent_at`.
-- Partitioned by the event's inbox id like `deliveries`, and dropped with it by retention.
ALTER TABLE deliveries ADD COLUMN last_status_code smallint;

CREATE TABLE delivery_attempts (
    inbox_id uuid NOT NULL,
    delivery_id uuid NOT NULL,
    -- The attempt's number since the delivery was planned or last replayed.
    attempt integer NOT NULL,
    at timestamptz NOT NULL DEFAULT now(),
    -- `retry` (another attempt follows) or `failed` (the delivery is FAILED).
    outcome text NOT NULL,
    -- The HTTP answer's status, when there was one.
    status_code smallint,
    -- The redacted diagnostic, as `deliveries.last_error` holds it.
    diagnostic text
) PARTITION BY RANGE (inbox_id);
CREATE INDEX delivery_attempts_by_delivery ON delivery_attempts (inbox_id, delivery_id, at);
CREATE TABLE delivery_attempts_legacy PARTITION OF delivery_attempts
    FOR VALUES FROM (MINVALUE) TO (wharf_uuid_floor(date_trunc('day', now(), 'UTC') + interval '1 day'));

-- Each event's own bytes within its request's payload. A batch (SendGrid's JSON array, Adyen's
-- notificationItems) is one body stored once in webhook_payloads, shared by several inbox rows;
-- the adapter says which byte range of it is each event, so the projection, deliveries and
-- `wharf events show --payload` use that event's item instead of the whole batch.
-- Offsets count bytes from the body's first byte, start inclusive, end exclusive. NULL in
-- both: the whole body (single-event requests, and every row stored before this migration).
-- The CHECK keeps a half-set or inverted span out; that the span lies inside the body is
-- checked on acceptance (the body is another table), and processing treats a span past the
-- stored body's end as poison, like a body gone.
-- NOT VALID: every existing row has both NULL (the columns are new), so validating would only
-- scan the whole inbox under this migration's exclusive lock, stalling acceptance on a large
-- table. New and updated rows are checked all the same.
ALTER TABLE webhook_inbox
    ADD COLUMN payload_start BIGINT,
    ADD COLUMN payload_end BIGINT,
    ADD CONSTRAINT webhook_inbox_payload_span CHECK (
        (payload_start IS NULL AND payload_end IS NULL)
        -- IS NOT NULL spelled out: a comparison with one NULL is NULL, which a CHECK passes
        OR (payload_start IS NOT NULL AND payload_end IS NOT NULL
            AND 0 <= payload_start AND payload_start <= payload_end)
    ) NOT VALID;

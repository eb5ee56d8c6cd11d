-- Retention by time partitions. Every table that grows with the event rate becomes a table
-- partitioned by range of a UUIDv7 whose first 48 bits are the milliseconds it was made, so
-- expiring a day is dropping its partitions, a cost that does not grow with the table:
--   webhook_payloads  by payload_ref    processed_events  by inbox_id
--   webhook_inbox     by inbox_id       deliveries        by inbox_id (expires with its event)
--   webhook_outbox    by outbox_id
-- The host creates one partition per UTC day ahead of time and drops expired ones
-- (host/src/retention/). What existed before becomes each table's first partition, from the
-- beginning of time to the end of today (UTC): the range check scans it once, here.
--
-- What a partitioned table cannot have, and what replaces it:
-- - A unique key without the partition key: the logical-event key (provider, endpoint_id,
--   provider_event_id) is unique in each partition (an index the host creates with it), and
--   acceptance checks the partitions of the endpoint's redelivery window under a lock on the
--   key (ingest/commit.rs), so uniqueness still holds across days.
-- - processed_events was keyed by the logical key; it is now keyed by inbox_id, which is one
--   to one with it.
-- - deliveries' key becomes (delivery_id, inbox_id).
-- - Foreign keys to the inbox go: a referencing partition and its referenced one are dropped
--   together, and checking references on every drop would cost what partitions save.

-- The smallest UUIDv7 of a moment: every id made at or after it sorts at or after it.
CREATE FUNCTION wharf_uuid_floor(at TIMESTAMPTZ) RETURNS UUID
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT (lpad(to_hex(floor(extract(epoch FROM at) * 1000)::bigint), 12, '0')
            || '70008000000000000000')::uuid
$$;

ALTER TABLE webhook_outbox DROP CONSTRAINT webhook_outbox_inbox_id_fkey;
ALTER TABLE processed_events DROP CONSTRAINT processed_events_inbox_id_fkey;
ALTER TABLE deliveries DROP CONSTRAINT deliveries_inbox_id_fkey;

-- payloads
ALTER TABLE webhook_payloads RENAME TO webhook_payloads_legacy;
ALTER INDEX webhook_payloads_pkey RENAME TO webhook_payloads_legacy_pkey;
CREATE TABLE webhook_payloads (LIKE webhook_payloads_legacy INCLUDING ALL EXCLUDING INDEXES)
    PARTITION BY RANGE (payload_ref);
ALTER TABLE webhook_payloads ADD PRIMARY KEY (payload_ref);
ALTER TABLE webhook_payloads ATTACH PARTITION webhook_payloads_legacy
    FOR VALUES FROM (MINVALUE) TO (wharf_uuid_floor(date_trunc('day', now(), 'UTC') + interval '1 day'));

-- inbox
ALTER TABLE webhook_inbox RENAME TO webhook_inbox_legacy;
ALTER INDEX webhook_inbox_pkey RENAME TO webhook_inbox_legacy_pkey;
ALTER INDEX webhook_inbox_due RENAME TO webhook_inbox_legacy_due;
ALTER INDEX webhook_inbox_by_status RENAME TO webhook_inbox_legacy_by_status;
ALTER TABLE webhook_inbox_legacy
    RENAME CONSTRAINT webhook_inbox_logical_event TO webhook_inbox_legacy_logical_event;
-- The span check was added NOT VALID; a partition must carry its parent's checks valid, and
-- the range check below scans this table anyway.
ALTER TABLE webhook_inbox_legacy VALIDATE CONSTRAINT webhook_inbox_payload_span;
CREATE TABLE webhook_inbox (LIKE webhook_inbox_legacy INCLUDING ALL EXCLUDING INDEXES)
    PARTITION BY RANGE (inbox_id);
ALTER TABLE webhook_inbox ADD PRIMARY KEY (inbox_id);
CREATE INDEX webhook_inbox_due ON webhook_inbox (next_attempt_at)
    WHERE status IN ('PENDING', 'PROCESSING');
CREATE INDEX webhook_inbox_by_status ON webhook_inbox (status, received_at);
-- Where the reconciler looks: events processed since its last pass.
CREATE INDEX webhook_inbox_processed ON webhook_inbox (processed_at) WHERE status = 'PROCESSED';
ALTER TABLE webhook_inbox ATTACH PARTITION webhook_inbox_legacy
    FOR VALUES FROM (MINVALUE) TO (wharf_uuid_floor(date_trunc('day', now(), 'UTC') + interval '1 day'));

-- outbox
ALTER TABLE webhook_outbox RENAME TO webhook_outbox_legacy;
ALTER INDEX webhook_outbox_pkey RENAME TO webhook_outbox_legacy_pkey;
ALTER INDEX webhook_outbox_unpublished RENAME TO webhook_outbox_legacy_unpublished;
CREATE TABLE webhook_outbox (LIKE webhook_outbox_legacy INCLUDING ALL EXCLUDING INDEXES)
    PARTITION BY RANGE (outbox_id);
ALTER TABLE webhook_outbox ADD PRIMARY KEY (outbox_id);
CREATE INDEX webhook_outbox_unpublished ON webhook_outbox (created_at) WHERE published_at IS NULL;
ALTER TABLE webhook_outbox ATTACH PARTITION webhook_outbox_legacy
    FOR VALUES FROM (MINVALUE) TO (wharf_uuid_floor(date_trunc('day', now(), 'UTC') + interval '1 day'));

-- processed_events
ALTER TABLE processed_events RENAME TO processed_events_legacy;
-- A partition's primary key is its parent's: the old key becomes the new one.
ALTER TABLE processed_events_legacy DROP CONSTRAINT processed_events_pkey;
ALTER TABLE processed_events_legacy ADD PRIMARY KEY (inbox_id);
CREATE TABLE processed_events (LIKE processed_events_legacy INCLUDING ALL EXCLUDING INDEXES)
    PARTITION BY RANGE (inbox_id);
ALTER TABLE processed_events ADD PRIMARY KEY (inbox_id);
ALTER TABLE processed_events ATTACH PARTITION processed_events_legacy
    FOR VALUES FROM (MINVALUE) TO (wharf_uuid_floor(date_trunc('day', now(), 'UTC') + interval '1 day'));

-- deliveries
ALTER TABLE deliveries RENAME TO deliveries_legacy;
ALTER TABLE deliveries_legacy DROP CONSTRAINT deliveries_pkey;
ALTER TABLE deliveries_legacy ADD PRIMARY KEY (delivery_id, inbox_id);
ALTER INDEX deliveries_due RENAME TO deliveries_legacy_due;
ALTER INDEX deliveries_failed RENAME TO deliveries_legacy_failed;
-- The once-per-target key (leading inbox_id) serves the lookups by event.
DROP INDEX deliveries_by_inbox;
ALTER TABLE deliveries_legacy
    RENAME CONSTRAINT deliveries_once_per_target TO deliveries_legacy_once_per_target;
CREATE TABLE deliveries (LIKE deliveries_legacy INCLUDING ALL EXCLUDING INDEXES)
    PARTITION BY RANGE (inbox_id);
ALTER TABLE deliveries ADD PRIMARY KEY (delivery_id, inbox_id);
ALTER TABLE deliveries ADD CONSTRAINT deliveries_once_per_target UNIQUE (inbox_id, sink, target);
CREATE INDEX deliveries_due ON deliveries (sink, target, next_attempt_at) WHERE status = 'PENDING';
CREATE INDEX deliveries_failed ON deliveries (sink, target) WHERE status = 'FAILED';
ALTER TABLE deliveries ATTACH PARTITION deliveries_legacy
    FOR VALUES FROM (MINVALUE) TO (wharf_uuid_floor(date_trunc('day', now(), 'UTC') + interval '1 day'));

-- One acceptance batch in one round trip (host/src/ingest/commit.rs). The host sent BEGIN, the
-- keys' locks, the statement and COMMIT: four round trips per batch, each a wake-up on both
-- sides of a socket on cores that Wharf and Postgres share. Called on its own, the function
-- is its own transaction, and its two queries keep what the two statements guaranteed: a
-- VOLATILE PL/pgSQL function takes a new snapshot for each query, so the second sees the row
-- of whoever held one of the locks before.
--
-- The host builds the arguments; a change to them is a new migration that replaces this
-- function (hosts of the old version keep calling the old signature until they are replaced,
-- so a new signature is a new overload, and the old one is dropped a release later).
CREATE FUNCTION wharf_accept(
    locks bigint[],
    inbox_ids uuid[], providers text[], endpoint_ids text[], event_ids text[],
    event_types text[], object_ids text[], version_kinds text[], versions bigint[],
    created_ats timestamptz[], payload_refs uuid[], payload_hashes bytea[],
    secret_versions text[], outbox_ids uuid[], topics text[], payload_starts bigint[],
    payload_ends bigint[], received_ats timestamptz[], dedup_floors uuid[],
    trace_contexts text[], oldest_floor uuid,
    payload_ids uuid[], payload_key_ids text[], payload_bodies bytea[],
    payload_created_ats timestamptz[]
) RETURNS TABLE (row_id uuid, stored_id uuid, fresh boolean)
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    -- Sorted by the host, so concurrent batches cannot deadlock.
    PERFORM count(pg_advisory_xact_lock(k)) FROM unnest(locks) AS t(k);
    RETURN QUERY
    WITH rows AS (
        SELECT * FROM unnest(inbox_ids, providers, endpoint_ids, event_ids, event_types,
            object_ids, version_kinds, versions, created_ats, payload_refs, payload_hashes,
            secret_versions, outbox_ids, topics, payload_starts, payload_ends, received_ats,
            dedup_floors, trace_contexts)
        AS r(inbox_id, provider, endpoint_id, provider_event_id, event_type, object_id,
            object_version_kind, object_version, provider_created_at, raw_payload_ref,
            payload_hash, matched_secret_version, outbox_id, topic, payload_start,
            payload_end, received_at, dedup_floor, trace_context)
    ), existing AS (
        -- A copy stored within each event's window; the batch's oldest floor lets the
        -- executor skip the partitions before it. A lateral probe per row, so the plan is an
        -- index lookup in each partition whatever the statistics said when the session
        -- prepared it (a join planned on empty tables scanned them all). Partitions are
        -- probed oldest first: with more than one copy in the window, the oldest answers.
        SELECT r.inbox_id AS row_id, w.inbox_id
        FROM rows r
        CROSS JOIN LATERAL (
            SELECT i.inbox_id FROM webhook_inbox i
            WHERE i.provider = r.provider AND i.endpoint_id = r.endpoint_id
              AND i.provider_event_id = r.provider_event_id
              AND i.inbox_id >= r.dedup_floor AND i.inbox_id >= oldest_floor
            LIMIT 1
        ) w
    ), ins AS (
        INSERT INTO webhook_inbox AS i (inbox_id, provider, endpoint_id, provider_event_id,
            event_type, object_id, object_version_kind, object_version, provider_created_at,
            raw_payload_ref, payload_hash, matched_secret_version, payload_start,
            payload_end, received_at, trace_context)
        SELECT r.inbox_id, r.provider, r.endpoint_id, r.provider_event_id, r.event_type,
            r.object_id, r.object_version_kind, r.object_version, r.provider_created_at,
            r.raw_payload_ref, r.payload_hash, r.matched_secret_version, r.payload_start,
            r.payload_end, r.received_at, r.trace_context
        FROM rows r
        WHERE r.inbox_id NOT IN (SELECT e.row_id FROM existing e)
        -- The partition's own unique key, in case the locks were bypassed.
        ON CONFLICT DO NOTHING
        RETURNING i.inbox_id, i.raw_payload_ref
    ), outbox AS (
        INSERT INTO webhook_outbox (outbox_id, inbox_id, topic)
        SELECT r.outbox_id, r.inbox_id, r.topic FROM rows r JOIN ins ON ins.inbox_id = r.inbox_id
    ), payloads AS (
        -- Once per request, whatever number of its events (and their spans) it backs.
        INSERT INTO webhook_payloads (payload_ref, key_id, body, created_at)
        SELECT p.payload_ref, p.key_id, p.body, p.created_at
        FROM unnest(payload_ids, payload_key_ids, payload_bodies, payload_created_ats)
            AS p(payload_ref, key_id, body, created_at)
        WHERE p.payload_ref IN (SELECT ins.raw_payload_ref FROM ins)
    )
    SELECT ins.inbox_id, ins.inbox_id, true FROM ins
    UNION ALL
    SELECT e.row_id, e.inbox_id, false FROM existing e;
END
$$;

-- Each inbox row's link to its payload, authenticated (issue 30, finding 9): the id of the
-- payload key whose derived link key tagged it, and the tag (HMAC-SHA256 over the inbox id,
-- provider, endpoint, event id and type, payload ref, span and payload hash;
-- `host/src/support/payload_link.rs`). Every read of an event's body checks it, so a row
-- pointed at another event's payload (or with its span, headers or hash changed) is refused
-- rather than delivered. Rows written before have neither: they are refused unless
-- `[payloads] upgrade_legacy_rows` is on, and `wharf payloads reencrypt` with it on links them.
-- Nullable, no default: adding them rewrites no partition.
ALTER TABLE webhook_inbox ADD COLUMN payload_link_key text, ADD COLUMN payload_link bytea;

-- `wharf_accept` writing the links: a new overload, as 20261203000002 says. Hosts of the
-- previous version keep calling the 28-argument function until they are replaced; the rows
-- it writes have no link, and this version refuses them unless the upgrade setting is on.
CREATE FUNCTION wharf_accept(
    locks bigint[],
    inbox_ids uuid[], providers text[], endpoint_ids text[], event_ids text[],
    event_types text[], object_ids text[], version_kinds text[], versions bigint[],
    created_ats timestamptz[], payload_refs uuid[], payload_hashes bytea[],
    secret_versions text[], outbox_ids uuid[], topics text[], payload_starts bigint[],
    payload_ends bigint[], received_ats timestamptz[], dedup_floors uuid[],
    trace_contexts text[], oldest_floor uuid,
    payload_ids uuid[], payload_key_ids text[], payload_bodies bytea[],
    payload_created_ats timestamptz[], notices_published boolean, claim_ids uuid[],
    lease_secs double precision, link_key_ids text[], links bytea[]
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
            dedup_floors, trace_contexts, claim_ids, link_key_ids, links)
        AS r(inbox_id, provider, endpoint_id, provider_event_id, event_type, object_id,
            object_version_kind, object_version, provider_created_at, raw_payload_ref,
            payload_hash, matched_secret_version, outbox_id, topic, payload_start,
            payload_end, received_at, dedup_floor, trace_context, claim_id,
            payload_link_key, payload_link)
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
            payload_end, received_at, trace_context, status, attempt_count, claim_id,
            lease_until, next_attempt_at, payload_link_key, payload_link)
        SELECT r.inbox_id, r.provider, r.endpoint_id, r.provider_event_id, r.event_type,
            r.object_id, r.object_version_kind, r.object_version, r.provider_created_at,
            r.raw_payload_ref, r.payload_hash, r.matched_secret_version, r.payload_start,
            r.payload_end, r.received_at, r.trace_context,
            -- Leased at acceptance: what the worker's claim would have written.
            CASE WHEN r.claim_id IS NULL THEN 'PENDING' ELSE 'PROCESSING' END,
            CASE WHEN r.claim_id IS NULL THEN 0 ELSE 1 END,
            r.claim_id,
            CASE WHEN r.claim_id IS NOT NULL THEN now() + make_interval(secs => lease_secs) END,
            CASE WHEN r.claim_id IS NULL THEN now()
                 ELSE now() + make_interval(secs => lease_secs) END,
            r.payload_link_key, r.payload_link
        FROM rows r
        WHERE r.inbox_id NOT IN (SELECT e.row_id FROM existing e)
        -- The partition's own unique key, in case the locks were bypassed.
        ON CONFLICT DO NOTHING
        RETURNING i.inbox_id, i.raw_payload_ref
    ), outbox AS (
        INSERT INTO webhook_outbox (outbox_id, inbox_id, topic, published_at)
        SELECT r.outbox_id, r.inbox_id, r.topic,
            CASE WHEN notices_published THEN r.received_at END
        FROM rows r JOIN ins ON ins.inbox_id = r.inbox_id
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

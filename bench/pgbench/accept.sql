-- One acceptance transaction as Wharf commits it (host/src/ingest/store.rs): per event an
-- inbox row (ON CONFLICT DO NOTHING on the day partition's logical-event key), its outbox row and its 10 KiB
-- payload; :rows events per transaction, in multi-row statements as a group-commit writer
-- sends them. One statement, so one round trip and an implicit transaction.
--   pgbench -n -M prepared -f bench/pgbench/accept.sql -D rows=10 -c 64 -j 2 -T 20 <db>
\set p random(1, 64)
WITH ev AS (
    SELECT bench_uuid7() AS inbox_id, bench_uuid7() AS payload_ref
    FROM generate_series(1, :rows)
), ins AS (
    INSERT INTO webhook_inbox (inbox_id, provider, endpoint_id, provider_event_id, event_type,
        object_id, object_version_kind, object_version, provider_created_at, raw_payload_ref,
        payload_hash, matched_secret_version)
    SELECT ev.inbox_id, 'stripe', 'stripe-demo', 'evt_' || ev.inbox_id, 'payment_intent.succeeded',
        'pi_bench', 'created_at', extract(epoch FROM now())::bigint, now(), ev.payload_ref,
        p.hash, '2026-11'
    FROM ev, bench_payloads p WHERE p.id = :p
    ON CONFLICT DO NOTHING
    RETURNING inbox_id, raw_payload_ref
), outbox AS (
    INSERT INTO webhook_outbox (outbox_id, inbox_id, topic)
    SELECT bench_uuid7(), inbox_id, 'stripe-demo.payment_intent.succeeded' FROM ins
)
INSERT INTO webhook_payloads (payload_ref, body)
SELECT ins.raw_payload_ref, p.body FROM ins, bench_payloads p WHERE p.id = :p;

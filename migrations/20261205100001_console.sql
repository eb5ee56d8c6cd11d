-- What the operator console asks of the database (issue 32, host/src/operator/event_search.rs
-- and overview.rs), each by an index, and the per-minute request counts the receivers keep.
--
-- Indexes on the partitioned inbox propagate to every partition, existing and new (the host
-- creates each day's partition LIKE the parent, INCLUDING ALL). Each pairs its key with
-- inbox_id, the partition key and the console's order (newest first), so a filtered page is
-- a walk of the index backwards that stops at the page's end. Building them on a large inbox
-- holds acceptance's writes for the build (a partitioned index cannot be built CONCURRENTLY):
-- run this migration in a quiet hour on a big database.
CREATE INDEX webhook_inbox_by_endpoint ON webhook_inbox (endpoint_id, inbox_id);
-- text_pattern_ops: a glob's literal prefix (`customer.*`) is a range of this index whatever
-- the database's collation.
CREATE INDEX webhook_inbox_by_type ON webhook_inbox (event_type text_pattern_ops, inbox_id);
CREATE INDEX webhook_inbox_by_event_id ON webhook_inbox (provider_event_id, inbox_id);
CREATE INDEX webhook_inbox_by_object ON webhook_inbox (object_id, inbox_id)
    WHERE object_id IS NOT NULL;

-- Requests answered by the public route, per minute, endpoint and outcome, added up by every
-- receiver (host/src/ingest/stats.rs flushes its counters every 10 s as an upsert that adds).
-- Statistics only: a receiver that crashes loses its last seconds of counts, never an event.
-- `endpoint_id` is a configured endpoint or `(unknown)` (what strangers post to random paths
-- cannot grow the table); `outcome` is `accepted`, `duplicate`, `ignored`, `handshake` or an
-- error code of DESIGN.md section 6. `latency_buckets[i]` counts answers within
-- ingest::stats::BUCKET_BOUNDS_MS[i] (the last one: slower than every bound). Deleted by the
-- retention pass after `[retention] event_days`.
CREATE TABLE ingest_stats (
    minute          TIMESTAMPTZ NOT NULL,
    endpoint_id     TEXT NOT NULL,
    outcome         TEXT NOT NULL,
    count           BIGINT NOT NULL,
    latency_buckets BIGINT[] NOT NULL,
    PRIMARY KEY (minute, endpoint_id, outcome)
);

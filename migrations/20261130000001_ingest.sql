-- The ingest side: one row per accepted logical event, its publication outbox row, and the
-- raw payloads they reference.

-- Raw request bodies, kept apart from the idempotency rows so payload retention (30 days)
-- can delete them without losing the dedup keys. One body may back several events (batches).
CREATE TABLE webhook_payloads (
    payload_ref  UUID PRIMARY KEY,
    body         BYTEA NOT NULL,
    created_at   TIMESTAMPTZ NOT NULL DEFAULT now()
);

CREATE TABLE webhook_inbox (
    inbox_id               UUID PRIMARY KEY,
    provider               TEXT NOT NULL,
    endpoint_id            TEXT NOT NULL,
    provider_event_id      TEXT NOT NULL,
    event_type             TEXT NOT NULL,
    object_id              TEXT,
    -- 'sequence' (provider version) or 'created_at' (provider creation time, ties by event id)
    object_version_kind    TEXT CHECK (object_version_kind IN ('sequence', 'created_at')),
    object_version         BIGINT,
    provider_created_at    TIMESTAMPTZ,
    received_at            TIMESTAMPTZ NOT NULL DEFAULT now(),
    -- no foreign key: payload retention may delete the body and keep this row
    raw_payload_ref        UUID NOT NULL,
    payload_hash           BYTEA NOT NULL,
    matched_secret_version TEXT NOT NULL,
    status                 TEXT NOT NULL DEFAULT 'PENDING'
                           CHECK (status IN ('PENDING', 'PROCESSING', 'PROCESSED', 'FAILED')),
    attempt_count          INTEGER NOT NULL DEFAULT 0,
    next_attempt_at        TIMESTAMPTZ NOT NULL DEFAULT now(),
    lease_until            TIMESTAMPTZ,
    last_error             TEXT,
    CONSTRAINT webhook_inbox_logical_event UNIQUE (provider, endpoint_id, provider_event_id)
);

-- Workers look for due work in these two states only.
CREATE INDEX webhook_inbox_due ON webhook_inbox (next_attempt_at)
    WHERE status IN ('PENDING', 'PROCESSING');

CREATE TABLE webhook_outbox (
    outbox_id    UUID PRIMARY KEY,
    inbox_id     UUID NOT NULL REFERENCES webhook_inbox (inbox_id),
    topic        TEXT NOT NULL,
    created_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    published_at TIMESTAMPTZ
);

CREATE INDEX webhook_outbox_unpublished ON webhook_outbox (created_at) WHERE published_at IS NULL;

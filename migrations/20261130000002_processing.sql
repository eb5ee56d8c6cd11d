-- The processing side: what workers record when they apply an event, the per-object
-- projection they maintain, and the deliveries outbox the relays send from.

-- What processing concluded, for operators (`wharf events show`): applied, stale, unversioned,
-- no_object. `deliveries_planned` lets the reconciler notice deliveries rows gone missing.
ALTER TABLE webhook_inbox
    ADD COLUMN outcome TEXT
        CHECK (outcome IN ('applied', 'stale', 'unversioned', 'no_object')),
    ADD COLUMN processed_at TIMESTAMPTZ,
    ADD COLUMN deliveries_planned INTEGER;

-- Same key as the inbox: a logical event is applied at most once, whatever runs it again.
CREATE TABLE processed_events (
    provider          TEXT NOT NULL,
    endpoint_id       TEXT NOT NULL,
    provider_event_id TEXT NOT NULL,
    inbox_id          UUID NOT NULL REFERENCES webhook_inbox (inbox_id),
    outcome           TEXT NOT NULL,
    processed_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (provider, endpoint_id, provider_event_id)
);

-- The built-in business mutation: the latest state of each provider object, ordered by the
-- object version the adapter reports, never by arrival.
CREATE TABLE object_state (
    provider       TEXT NOT NULL,
    endpoint_id    TEXT NOT NULL,
    object_id      TEXT NOT NULL,
    -- 'sequence' compares versions; 'created_at' compares (version, event_id)
    version_kind   TEXT NOT NULL CHECK (version_kind IN ('sequence', 'created_at')),
    object_version BIGINT NOT NULL,
    event_id       TEXT NOT NULL,
    event_type     TEXT NOT NULL,
    -- the verified event document as received, when it is JSON
    state          JSONB,
    inbox_id       UUID NOT NULL,
    updated_at     TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (provider, endpoint_id, object_id)
);

-- Remote side effects, written in the worker's transaction and sent by a relay. Sending
-- twice is allowed (the receiver deduplicates on the inbox id); losing one is not.
CREATE TABLE deliveries (
    delivery_id     UUID PRIMARY KEY,
    inbox_id        UUID NOT NULL REFERENCES webhook_inbox (inbox_id),
    sink            TEXT NOT NULL CHECK (sink IN ('http', 'nats')),
    -- the URL or the subject
    target          TEXT NOT NULL,
    status          TEXT NOT NULL DEFAULT 'PENDING' CHECK (status IN ('PENDING', 'SENT', 'FAILED')),
    attempt_count   INTEGER NOT NULL DEFAULT 0,
    max_attempts    INTEGER NOT NULL,
    next_attempt_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    last_error      TEXT,
    created_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
    sent_at         TIMESTAMPTZ,
    CONSTRAINT deliveries_once_per_target UNIQUE (inbox_id, sink, target)
);

-- Each target's relay looks for its own due rows.
CREATE INDEX deliveries_due ON deliveries (sink, target, next_attempt_at) WHERE status = 'PENDING';
CREATE INDEX deliveries_by_inbox ON deliveries (inbox_id);
CREATE INDEX webhook_inbox_by_status ON webhook_inbox (status, received_at);

-- The operators' audit trail: who read a payload, purged events or replayed through the admin
-- API. In the database rather than only the log, because a log filter (RUST_LOG=off) or a
-- redirected stderr would drop it; the payload is shown only after its row is committed.
-- Never purged with events: the trail outlives what it describes.
CREATE TABLE operator_audit (
    audit_id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at timestamptz NOT NULL DEFAULT now(),
    action text NOT NULL,
    -- "uid 1000 (alice)" for a command run on the host; "admin-api 10.0.0.7" through the API.
    actor text NOT NULL,
    detail jsonb NOT NULL DEFAULT '{}'
);

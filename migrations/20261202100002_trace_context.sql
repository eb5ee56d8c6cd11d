-- The W3C traceparent of the request that accepted the event (only when [tracing] is
-- configured), so that processing and deliveries, later and maybe on another host, continue
-- the request's trace.
ALTER TABLE webhook_inbox ADD COLUMN trace_context TEXT;

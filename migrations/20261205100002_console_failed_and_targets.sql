-- Two more indexes for the console, found by its benchmark on ten million events
-- (docs/console-performance.md, examples/bench-console.sh).
--
-- An endpoint's FAILED events, newest first, and the overview's FAILED counts, without reading
-- rows: without it, "FAILED on github over 3 days" walked github's 200,000 rows of those days
-- (483 ms). A failure is rare, so this index costs acceptance nothing (a new row is PENDING).
CREATE INDEX IF NOT EXISTS webhook_inbox_failed ON webhook_inbox (endpoint_id, inbox_id)
    WHERE status = 'FAILED';

-- The deliveries page lists a target's deliveries in their order (created_at, delivery_id):
-- without it, a target's first page sorted all of its deliveries (847 ms for 400,000).
CREATE INDEX IF NOT EXISTS deliveries_by_target ON deliveries (target, created_at, delivery_id);

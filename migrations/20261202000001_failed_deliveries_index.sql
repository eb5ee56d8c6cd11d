-- The reconciler counts each target's FAILED deliveries for `wharf_deliveries_failed`: through
-- this index the count costs what is failed, not the size of the table.
CREATE INDEX deliveries_failed ON deliveries (sink, target) WHERE status = 'FAILED';

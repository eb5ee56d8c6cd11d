-- A sealed payload is stored in its row, not in the TOAST table, up to the size a heap page
-- takes (toast_tuple_target 8160; Postgres's default moves any value that makes the row over
-- about 2 KB out of line). The benchmark's 10 KiB bodies seal to about 3 KB: out of line each
-- was two TOAST chunks, two more heap tuples and two entries in the TOAST index to write, and
-- an index scan of it to read back. Larger payloads still go to the TOAST table (the column
-- stays EXTERNAL: encrypted bytes do not compress). Only new rows are affected.
--
-- A partitioned table has no storage options of its own in Postgres 15: they are set on each
-- partition, here on those that exist and in host/src/retention/partitions.rs on new days.
DO $$
DECLARE
    p regclass;
BEGIN
    FOR p IN SELECT inhrelid::regclass FROM pg_inherits
             WHERE inhparent = 'webhook_payloads'::regclass
    LOOP
        EXECUTE format('ALTER TABLE %s SET (toast_tuple_target = 8160)', p);
    END LOOP;
END
$$;

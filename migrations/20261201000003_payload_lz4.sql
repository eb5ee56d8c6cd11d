-- Raw payloads are compressed with lz4 instead of pglz, Postgres's default. Measured at 2,000
-- requests/s (docs/performance.md), pglz was a third of Postgres's CPU, and as much when it
-- gives up on a body that does not compress; lz4 compresses JSON about as well and gives up
-- quickly. Postgres 13 (no per-column compression) and a server built without lz4 keep pglz:
-- the setting only affects new rows, and every Postgres reads both.
DO $$
BEGIN
    IF current_setting('server_version_num')::int >= 140000 THEN
        EXECUTE 'ALTER TABLE webhook_payloads ALTER COLUMN body SET COMPRESSION lz4';
    END IF;
EXCEPTION WHEN feature_not_supported THEN
    RAISE NOTICE 'this server has no lz4; raw payloads keep pglz compression';
END
$$;

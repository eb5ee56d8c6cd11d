-- The projection's documents are compressed with lz4 instead of pglz, as raw payloads already
-- are (20261201000003): every processed event writes its object's document again, and pglz
-- spent Postgres CPU that acceptance needs. Postgres 13 and servers without lz4 keep pglz; the
-- setting only affects new rows, and every Postgres reads both.
DO $$
BEGIN
    IF current_setting('server_version_num')::int >= 140000 THEN
        EXECUTE 'ALTER TABLE object_state ALTER COLUMN state SET COMPRESSION lz4';
    END IF;
EXCEPTION WHEN feature_not_supported THEN
    RAISE NOTICE 'this server has no lz4; object documents keep pglz compression';
END
$$;

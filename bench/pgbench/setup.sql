-- Run once on a freshly migrated Wharf database before accept.sql (wharf-bench does both,
-- with payload_chunks from what Wharf stores for the benchmark's bodies: compressed, then
-- sealed). 64 random payloads of payload_chunks x 16 bytes with their SHA-256, like the hash
-- Wharf stores, so the script copies a body instead of generating one; like a sealed body,
-- nothing in them compresses.
--   psql -v payload_chunks=640 -f bench/pgbench/setup.sql <db>
CREATE TABLE bench_payloads (id int PRIMARY KEY, body bytea NOT NULL, hash bytea NOT NULL);
INSERT INTO bench_payloads (id, body, hash)
SELECT i, b, sha256(b)
FROM (
    SELECT i, (SELECT string_agg(decode(md5(random()::text || i || j), 'hex'), ''::bytea)
               FROM generate_series(1, :payload_chunks) j) AS b
    FROM generate_series(1, 64) i
) s;

-- Time-ordered ids like Wharf's UUIDv7 (Postgres 15 has no uuidv7()), so index inserts land
-- at the right-hand edge as they do for Wharf rather than at random pages.
CREATE FUNCTION bench_uuid7() RETURNS uuid LANGUAGE sql VOLATILE AS $$
    SELECT (lpad(to_hex((extract(epoch FROM clock_timestamp()) * 1000)::bigint), 12, '0')
            || '7' || substr(md5(random()::text), 1, 19))::uuid
$$;
ANALYZE bench_payloads;

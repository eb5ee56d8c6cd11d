-- Run once on a freshly migrated Wharf database before accept.sql (wharf-bench does both).
-- 64 incompressible 10 KiB payloads with their SHA-256, like the hash Wharf stores, so the
-- script copies a body instead of generating one, and Postgres' TOAST compression gets no
-- more help than it does from the load generator's bodies.
CREATE TABLE bench_payloads (id int PRIMARY KEY, body bytea NOT NULL, hash bytea NOT NULL);
INSERT INTO bench_payloads (id, body, hash)
SELECT i, b, sha256(b)
FROM (
    SELECT i, (SELECT string_agg(decode(md5(random()::text || i || j), 'hex'), ''::bytea)
               FROM generate_series(1, 640) j) AS b
    FROM generate_series(1, 64) i
) s;

-- Time-ordered ids like Wharf's UUIDv7 (Postgres 15 has no uuidv7()), so index inserts land
-- at the right-hand edge as they do for Wharf rather than at random pages.
CREATE FUNCTION bench_uuid7() RETURNS uuid LANGUAGE sql VOLATILE AS $$
    SELECT (lpad(to_hex((extract(epoch FROM clock_timestamp()) * 1000)::bigint), 12, '0')
            || '7' || substr(md5(random()::text), 1, 19))::uuid
$$;
ANALYZE bench_payloads;

#!/usr/bin/env bash
# The console's queries on ten million events (issue 32; docs/console-performance.md).
#
#   examples/bench-console.sh            # generate (about 25 minutes here), then measure
#   examples/bench-console.sh generate   # a fresh database with N events over 30 days
#   examples/bench-console.sh measure    # time each query of the console on it, EXPLAIN each
#
# Generate: a database (DB, default wharf_console_bench, dropped first), `wharf migrate`, one
# partition per UTC day over the last 31 days and the next 2 (as the retention pass makes
# them; the migration's catch-all first partition is dropped), then N inbox rows (default
# 10,000,000) evenly over 30 days in batches of BATCH (default 500,000) by INSERT ... SELECT
# generate_series: five endpoints (50/20/15/10/5 %), 6-10 types each, 0.5 % FAILED, the last
# few hundred PENDING, 80 % with an object id; deliveries for a quarter of stripe-live's events
# (about 1.25 M, three targets, 1 % FAILED); `ingest_stats` rows for every minute and endpoint.
# Payload bodies are omitted (no query of the console reads them but the reveal, by key).
# Measure: `cargo run --example console_bench` calls the functions the pages call (the
# operator module), RUNS times each (default 7), and prints p50 and max per query, then EXPLAIN
# (ANALYZE, BUFFERS) of the SQL behind each.
#
# Environment: DB, N, BATCH, RUNS, MIN_FREE_GB (stop below it, default 6), WHARF (the binary for `migrate`, default target/debug/wharf,
# built when missing). Needs Postgres on 127.0.0.1:5432 (trust auth), psql.
set -euo pipefail
cd "$(dirname "$0")/.."
phase=${1:-all}
db=${DB:-wharf_console_bench}
n=${N:-10000000}
batch=${BATCH:-500000}
url=postgres://postgres@127.0.0.1:5432/$db
wharf=${WHARF:-target/debug/wharf}
psql_db() { psql -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -U postgres -d "$db" "$@"; }
elapsed() { echo "$(( $(date +%s) - $1 )) s"; }
# Stops generating (and drops the database) before the disk Postgres writes to fills up: a
# full disk stops Postgres for everyone sharing it.
min_free_gb=${MIN_FREE_GB:-6}
check_disk() {
  local free_gb
  free_gb=$(( $(df --output=avail -k "${PGDATA_DIR:-/var/lib/postgresql}" | tail -1) / 1048576 ))
  if [ "$free_gb" -lt "$min_free_gb" ]; then
    echo "only ${free_gb} GB left on Postgres's disk (MIN_FREE_GB=$min_free_gb): stopping, dropping $db" >&2
    psql -X -q -h 127.0.0.1 -U postgres -d postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)"
    exit 1
  fi
}

generate() {
  [ -x "$wharf" ] || cargo build -q -p wharf --bin wharf
  psql -X -q -h 127.0.0.1 -U postgres -d postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" \
    -c "CREATE DATABASE $db"
  WHARF_DATABASE_URL=$url "$wharf" migrate
  local started; started=$(date +%s)
  psql_db <<'SQL'
SET TimeZone = 'UTC';
DO $$
DECLARE t text; d date; p text;
BEGIN
  FOREACH t IN ARRAY ARRAY['deliveries', 'processed_events', 'webhook_outbox', 'webhook_inbox',
                           'webhook_payloads'] LOOP
    EXECUTE format('ALTER TABLE %I DETACH PARTITION %I', t, t || '_legacy');
    EXECUTE format('DROP TABLE %I', t || '_legacy');
    FOR d IN SELECT generate_series(current_date - 31, current_date + 2, interval '1 day')::date
    LOOP
      p := t || '_p' || to_char(d, 'YYYYMMDD');
      EXECUTE format('CREATE TABLE %I (LIKE %I INCLUDING ALL)', p, t);
      IF t = 'webhook_inbox' THEN
        EXECUTE format('CREATE UNIQUE INDEX %I ON %I (provider, endpoint_id, provider_event_id)',
                       p || '_logical_event', p);
      END IF;
      EXECUTE format('ALTER TABLE %I ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)', t, p,
                     wharf_uuid_floor(d::timestamp AT TIME ZONE 'UTC'),
                     wharf_uuid_floor((d + 1)::timestamp AT TIME ZONE 'UTC'));
    END LOOP;
  END LOOP;
END
$$;
CREATE TABLE bench_endpoints (lo int, hi int, endpoint text, provider text, types text[]);
INSERT INTO bench_endpoints VALUES
  (0, 9, 'stripe-live', 'stripe', ARRAY['customer.created', 'customer.updated',
     'customer.deleted', 'invoice.paid', 'invoice.payment_failed', 'payment_intent.succeeded',
     'payment_intent.payment_failed', 'charge.refunded', 'checkout.session.completed',
     'customer.subscription.updated']),
  (10, 13, 'github', 'github', ARRAY['push', 'pull_request', 'issues', 'issue_comment',
     'workflow_run', 'release', 'check_suite', 'star']),
  (14, 16, 'shopify', 'shopify', ARRAY['orders/create', 'orders/paid', 'orders/cancelled',
     'products/update', 'customers/create', 'refunds/create']),
  (17, 18, 'twilio', 'twilio', ARRAY['message.received', 'message.delivered', 'message.failed',
     'call.completed', 'call.ringing', 'recording.completed']),
  (19, 19, 'slack', 'slack', ARRAY['message', 'app_mention', 'reaction_added', 'member_joined_channel',
     'channel_created', 'team_join']);
SQL
  echo "partitions: $(elapsed "$started")"
  local lo=1 t0 step_started
  t0=$(date +%s)
  while [ "$lo" -le "$n" ]; do
    local hi=$(( lo + batch - 1 )); [ "$hi" -gt "$n" ] && hi=$n
    check_disk
    step_started=$(date +%s)
    psql_db -v lo="$lo" -v hi="$hi" -v n="$n" <<'SQL'
SET synchronous_commit = off;
INSERT INTO webhook_inbox (inbox_id, provider, endpoint_id, provider_event_id, event_type,
    object_id, object_version_kind, object_version, provider_created_at, received_at,
    raw_payload_ref, payload_hash, matched_secret_version, status, outcome, attempt_count,
    next_attempt_at, processed_at, last_error, deliveries_planned)
SELECT s.id, e.provider, e.endpoint, 'evt_' || substr(s.h, 1, 24),
       e.types[1 + abs(hashint8(s.g + 1)) % array_length(e.types, 1)],
       CASE WHEN s.g % 5 <> 0 THEN 'obj_' || abs(hashint8(s.g + 2)) % 500000 END,
       CASE WHEN s.g % 5 <> 0 THEN 'sequence' END,
       CASE WHEN s.g % 5 <> 0 THEN s.g END,
       s.at - interval '2 seconds', s.at, s.id, decode(s.h || s.h, 'hex'), '2026-11',
       s.status,
       CASE WHEN s.status = 'PROCESSED' THEN 'applied' END,
       CASE s.status WHEN 'FAILED' THEN 8 WHEN 'PENDING' THEN 0 ELSE 1 END,
       s.at,
       CASE WHEN s.status = 'PROCESSED' THEN s.at + interval '40 milliseconds' END,
       CASE WHEN s.status = 'FAILED'
            THEN 'adapter parse: missing field `data.object.id` at line 1 column 812' END,
       CASE WHEN s.status = 'PROCESSED' AND e.endpoint = 'stripe-live' AND s.g % 4 = 0 THEN 1
            WHEN s.status = 'PROCESSED' THEN 0 END
FROM (
  SELECT g, at, h,
         (lpad(to_hex((extract(epoch FROM at) * 1000)::bigint), 12, '0') || '7'
          || substr(h, 1, 3) || '8' || substr(h, 4, 15))::uuid AS id,
         CASE WHEN g > :n - 300 THEN 'PENDING' WHEN g % 200 = 7 THEN 'FAILED'
              ELSE 'PROCESSED' END AS status
  FROM (SELECT g, now() - interval '30 days' + (interval '30 days' * g / :n) AS at,
               md5(g::text) AS h
        FROM generate_series(:lo::bigint, :hi::bigint) g) r
) s
JOIN bench_endpoints e ON s.g % 20 BETWEEN e.lo AND e.hi;
SQL
    echo "inbox rows $lo..$hi: $(elapsed "$step_started")"
    lo=$(( hi + 1 ))
  done
  echo "inbox: $(elapsed "$t0")"
  step_started=$(date +%s)
  psql_db <<'SQL'
SET synchronous_commit = off;
INSERT INTO deliveries (delivery_id, inbox_id, sink, target, status, attempt_count, max_attempts,
    next_attempt_at, last_error, created_at, sent_at)
SELECT i.inbox_id, i.inbox_id, t.sink, t.target, d.status,
       CASE d.status WHEN 'FAILED' THEN 10 WHEN 'SENT' THEN 1 ELSE 0 END, 10,
       i.received_at + interval '1 second',
       CASE WHEN d.status = 'FAILED' THEN 'http 503 from target after 10 attempts' END,
       i.received_at + interval '50 milliseconds',
       CASE WHEN d.status = 'SENT' THEN i.received_at + interval '120 milliseconds' END
FROM webhook_inbox i
CROSS JOIN LATERAL (SELECT abs(hashtext(i.provider_event_id)) AS k) k
CROSS JOIN LATERAL (SELECT CASE WHEN i.received_at > now() - interval '2 minutes' THEN 'PENDING'
                                WHEN k.k % 100 = 3 THEN 'FAILED' ELSE 'SENT' END AS status) d
JOIN (VALUES (0, 'http', 'http://billing.internal/stripe'), (1, 'http', 'http://crm.internal/hooks'),
             (2, 'nats', 'wharf.stripe')) AS t(n, sink, target) ON t.n = k.k % 3
WHERE i.endpoint_id = 'stripe-live' AND i.deliveries_planned = 1;
SQL
  echo "deliveries: $(elapsed "$step_started")"
  step_started=$(date +%s)
  psql_db <<'SQL'
-- Every minute of 30 days per endpoint: the accepted requests the rows above stand for, 2 %
-- duplicates, a refusal now and then, and strangers' requests to unknown paths.
INSERT INTO ingest_stats (minute, endpoint_id, outcome, count, latency_buckets)
SELECT m, e.endpoint, o.outcome, o.c,
       ARRAY[0, 0, o.c * 5 / 100, o.c * 55 / 100, o.c * 30 / 100,
             o.c - o.c * 5 / 100 - o.c * 55 / 100 - o.c * 30 / 100 - o.c / 100, o.c / 100,
             0, 0, 0, 0, 0, 0, 0, 0]::bigint[]
FROM generate_series(date_trunc('minute', now() - interval '30 days'), now(), interval '1 minute') m
JOIN bench_endpoints e ON true
CROSS JOIN LATERAL (VALUES ('accepted', (e.hi - e.lo + 1) * 231 / 20),
                           ('duplicate', greatest((e.hi - e.lo + 1) * 231 / 20 / 50, 1)),
                           ('invalid_signature', (abs(hashtext(m::text || e.endpoint)) % 30 = 0)::int)
                   ) AS o(outcome, c)
WHERE o.c > 0
UNION ALL
SELECT m, '(unknown)', 'unknown_endpoint', 3, ARRAY[3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]::bigint[]
FROM generate_series(date_trunc('minute', now() - interval '30 days'), now(), interval '7 minutes') m;
DROP TABLE bench_endpoints;
SQL
  echo "ingest_stats: $(elapsed "$step_started")"
  step_started=$(date +%s)
  psql_db -c "VACUUM (ANALYZE)"
  echo "vacuum analyze: $(elapsed "$step_started")"
  echo "generated in $(elapsed "$started"): $(psql_db -Atc "SELECT pg_size_pretty(pg_database_size(current_database()))")"
}

measure() {
  cargo run -q -p wharf --example console_bench -- "$url" "${RUNS:-7}"
}

case "$phase" in
  generate) generate ;;
  measure) measure ;;
  all) generate; measure ;;
  *) echo "usage: $0 [generate|measure|all]" >&2; exit 2 ;;
esac

#!/usr/bin/env bash
# What Postgres writes per event, and when the kernel writes it out (docs/performance.md,
# "What the report says is in the way"). Starts `wharf serve` with `examples/wharf.toml` on a
# database of its own, offers RATE requests/s for SECONDS with the load generator (the
# benchmark's body mix, 2% duplicates, 1% bad signatures), and prints:
#   - every relation over 1 MB: size and bytes per stored event;
#   - WAL records, full-page images, bytes and bytes per event (`pg_stat_wal`), and who wrote
#     the evicted pages (`pg_stat_bgwriter`), both reset at the start;
#   - once a second: the kernel's dirty page cache and writeback (KiB) and `nr_written`;
#   - when the server loads `pg_stat_statements` (shared_preload_libraries): Wharf's
#     statements by total time, with calls, rows, time and WAL per stored event.
#
#   cargo build --release -p wharf --bin wharf -p wharf-bench
#   examples/bench-writes.sh [RATE] [SECONDS]          # default 2000 for 40
#   SET="backend_flush_after = 32" examples/bench-writes.sh    # with a setting for the database
#   SQL="ALTER TABLE …" examples/bench-writes.sh    # statements run once wharf has migrated
#
# Environment: SET (an `ALTER DATABASE … SET` for Wharf's connections), SQL (run against the
# database once `wharf serve` is ready, before the load: storage options to compare), WHARF
# (the binary).
# Needs Postgres on 127.0.0.1:5432 (trust auth); it checkpoints the cluster first so earlier
# writes are not counted, and creates and drops its own database.
set -euo pipefail
cd "$(dirname "$0")/.."
rate=${1:-2000}
seconds=${2:-40}
port=$((20000 + $$ % 20000))
bin=target/release
wharf=${WHARF:-$bin/wharf}
. examples/bench-env.sh
bench_env writes warn
[ -n "${SET:-}" ] && psql -c "ALTER DATABASE $db SET $SET"
WHARF_LISTEN=127.0.0.1:$port WHARF_ADMIN_LISTEN=127.0.0.1:$((port + 1)) \
  "$wharf" serve --config "$dir/wharf.toml" >"$dir/wharf.log" 2>&1 &
for _ in $(seq 300); do
  [ "$(curl -s "127.0.0.1:$((port + 1))/readyz")" = ready ] && break
  sleep 0.1
done
[ "$(curl -s "127.0.0.1:$((port + 1))/readyz")" = ready ] || { echo "wharf serve is not ready on port $port" >&2; exit 1; }
[ -n "${SQL:-}" ] && psql -d "$db" -c "$SQL"
psql -c "CHECKPOINT"
sync
psql -c "SELECT pg_stat_reset_shared('bgwriter'), pg_stat_reset_shared('wal')" >/dev/null
statements=$(psql -c "SELECT 1 FROM pg_settings WHERE name = 'shared_preload_libraries'
                        AND setting LIKE '%pg_stat_statements%'")
if [ -n "$statements" ]; then
  psql -d "$db" -c "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"
  psql -d "$db" -c "SELECT pg_stat_statements_reset()" >/dev/null
fi
(
  t=0
  while sleep 1; do
    t=$((t + 1))
    echo "$t $(awk '/^Dirty:/{d=$2} /^Writeback:/{w=$2} END {print d, w}' /proc/meminfo) $(awk '/^nr_written /{print $2}' /proc/vmstat)"
  done
) >"$dir/dirty" &
sampler=$!
$bin/wharf-bench loadgen --secret "$BENCH_SECRET" --url "http://127.0.0.1:$port" --rate "$rate" --duration "$seconds" \
  --duplicates 0.02 --bad-signatures 0.01 | tail -3
sleep 2
kill "$sampler"
n=$(psql -d "$db" -c "SELECT count(*) FROM webhook_inbox")
echo "events stored: $n"
echo "relation | kind | KiB | bytes per event"
psql -d "$db" -F' | ' -c "SELECT c.relname, c.relkind, pg_relation_size(c.oid) / 1024,
                                round(pg_relation_size(c.oid)::numeric / $n)
                         FROM pg_class c
                         WHERE c.relnamespace IN ('public'::regnamespace, 'pg_toast'::regnamespace)
                           AND pg_relation_size(c.oid) > 1000000
                         ORDER BY 3 DESC"
psql -F' | ' -c "SELECT 'WAL: records ' || wal_records, 'full-page images ' || wal_fpi,
                        pg_size_pretty(wal_bytes), round(wal_bytes / $n) || ' bytes per event'
                 FROM pg_stat_wal"
psql -F' | ' -c "SELECT 'pages written: checkpointer ' || buffers_checkpoint,
                        'background writer ' || buffers_clean, 'backends ' || buffers_backend
                 FROM pg_stat_bgwriter"
if [ -n "$statements" ]; then
  echo "statement | calls | rows | ms | µs per event | WAL bytes per event"
  psql -d "$db" -F' | ' -c "SELECT regexp_replace(left(query, 70), '\s+', ' ', 'g'), calls, rows,
                                  round(total_exec_time), round(total_exec_time * 1000 / $n),
                                  round(wal_bytes / $n)
                           FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid
                           WHERE d.datname = '$db' ORDER BY total_exec_time DESC LIMIT 15"
fi
echo "second, Dirty KiB, Writeback KiB, nr_written:"
tr '\n' ';' <"$dir/dirty"
echo

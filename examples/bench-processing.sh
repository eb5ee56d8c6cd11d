#!/usr/bin/env bash
# Measures processing on this machine with the release build (docs/performance.md):
#   drain: N events accepted with no worker running, then one `wharf worker` process drains
#          them (events/s from its start until none is left unprocessed);
#   live:  N events sent while `wharf serve` runs its two workers (acknowledgements while
#          processing competes for the same cores, then the time until all are processed),
#          sampling `wharf_inbox_oldest_pending_seconds` from /metrics every second.
# Events are sent by the open-loop load generator (bench/) at RATE requests/s (default 1500),
# 10 KiB each, all about one Stripe object.
#
#   cargo build --release -p wharf --bin wharf -p wharf-bench
#   examples/bench-processing.sh drain 20000 [RATE]
#   examples/bench-processing.sh live 20000 [RATE]
#
# Environment: BATCH (`[worker]
# batch_size`, default the example's), PORT (public listener, default
# one from 20000 to 39999 by process id; admin PORT+1),
# WHARF (the binary, default target/release/wharf: compare two builds back to back).
# Needs Postgres on 127.0.0.1:5432 (trust auth); creates and drops its own database.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:?drain or live}
n=${2:-20000}
rate=${3:-1500}
port=${PORT:-$((20000 + $$ % 20000))}
bin=target/release
wharf=${WHARF:-$bin/wharf}
. examples/bench-env.sh
bench_env processing warn
[ "$mode" = drain ] && sed -i 's|^count = 2\b|count = 0|' "$dir/wharf.toml"
[ -n "${BATCH:-}" ] && sed -i "s|^batch_size = [0-9]*|batch_size = $BATCH|" "$dir/wharf.toml"

unprocessed() {
  psql -d "$db" -c "SELECT count(*) FROM webhook_inbox WHERE status IN ('PENDING', 'PROCESSING')"
}
wait_drained() {
  local start=$1
  while [ "$(unprocessed)" != 0 ]; do sleep 0.1; done
  local end; end=$(date +%s.%N)
  echo "processed $n events $(echo "$end - $start" | bc) s after $2: $(echo "$n / ($end - $start)" | bc) events/s"
}

WHARF_LISTEN=127.0.0.1:$port WHARF_ADMIN_LISTEN=127.0.0.1:$((port + 1)) \
  "$wharf" serve --config "$dir/wharf.toml" >/dev/null &
for _ in $(seq 300); do
  [ "$(curl -s "127.0.0.1:$((port + 1))/readyz")" = ready ] && break
  sleep 0.1
done
[ "$(curl -s "127.0.0.1:$((port + 1))/readyz")" = ready ] || { echo "wharf serve is not ready on port $port" >&2; exit 1; }
if [ "$mode" = live ]; then
  # Once a second until everything is processed: the gauge as a dashboard sees it, and the
  # same age read from the database at that moment.
  (
    while sleep 1; do
      gauge=$(curl -s "127.0.0.1:$((port + 1))/metrics" | sed -n 's/^wharf_inbox_oldest_pending_seconds //p')
      age=$(psql -d "$db" -c "SELECT round(coalesce(extract(epoch FROM now() - least(
                                (SELECT min(received_at) FROM webhook_inbox WHERE status = 'PENDING'),
                                (SELECT min(received_at) FROM webhook_inbox WHERE status = 'PROCESSING'))), 0), 1)")
      echo "${gauge:-?} $age"
    done
  ) >"$dir/oldest" &
  sampler=$!
fi
sent=$(date +%s.%N)
$bin/wharf-bench loadgen --secret "$BENCH_SECRET" --url "http://127.0.0.1:$port" --rate "$rate" --requests "$n" --body-bytes 10240 --objects 1
# CPU seconds (user + system) of processes, from /proc (the machine is shared, so CPU per
# event says more than wall-clock time).
cpu() { for pid in "$@"; do awk '{print $14 + $15}' "/proc/$pid/stat"; done | awk '{s += $1} END {printf "%.2f", s / 100}'; }
if [ "$mode" = drain ]; then
  # Statistics, as autovacuum keeps them on a table in use: a fresh table's planner
  # estimates pick a full sort of the outbox backlog for every batch of notices.
  psql -d "$db" -c "ANALYZE"
  start=$(date +%s.%N)
  "$wharf" worker --config "$dir/wharf.toml" --count 2 >/dev/null &
  worker=$!
  wait_drained "$start" "the worker started"
  backends=$(psql -d "$db" -c "SELECT pid FROM pg_stat_activity
                               WHERE datname = current_database() AND application_name = 'wharf-worker'")
  w=$(cpu "$worker"); b=$(cpu $backends)
  echo "CPU: wharf worker ${w} s, its Postgres backends ${b} s:" \
    "$(echo "($w + $b) * 1000000 / $n" | bc) µs per event"
else
  wait_drained "$sent" "the first request"
  kill "$sampler"
  echo "oldest pending, sampled each second ($(wc -l <"$dir/oldest") samples):" \
    "gauge max $(cut -d' ' -f1 "$dir/oldest" | sort -g | tail -1) s," \
    "database max $(cut -d' ' -f2 "$dir/oldest" | sort -g | tail -1) s"
  echo "  (gauge, database) in order: $(tr '\n' ',' <"$dir/oldest")"
fi
psql -d "$db" -c "SELECT status, outcome, count(*) FROM webhook_inbox GROUP BY 1, 2 ORDER BY 1, 2"

#!/usr/bin/env bash
# Measures processing on this machine with the release build (docs/performance.md):
#   drain: N events accepted with no worker running, then one `wharf worker` process drains
#          them (events/s from its start until none is left unprocessed);
#   live:  N events sent while `wharf serve` runs its two workers (acknowledgements while
#          processing competes for the same cores, then the time until all are processed),
#          sampling `wharf_inbox_oldest_pending_seconds` from /metrics every second.
#
#   cargo build --release -p wharf --bin wharf --example loadgen
#   examples/bench-processing.sh drain 20000
#   examples/bench-processing.sh live 20000
#
# Environment: CONCURRENCY (load generator connections, default 32), BATCH (`[worker]
# batch_size`, default the example's), PORT (public listener, default 18080; admin PORT+1).
# Needs Postgres on 127.0.0.1:5432 (trust auth); creates and drops its own database.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:?drain or live}
n=${2:-20000}
concurrency=${CONCURRENCY:-32}
port=${PORT:-18080}
bin=target/release
db=wharf_bench_processing_$$
psql() { command psql -qtAh 127.0.0.1 -U postgres "$@"; }
psql -c "CREATE DATABASE $db" >/dev/null
trap 'kill $(jobs -p) 2>/dev/null; wait; psql -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null' EXIT
export WHARF_DATABASE_URL=postgres://postgres@127.0.0.1:5432/$db RUST_LOG=warn
dir=$(mktemp -d)
cp examples/wharf.toml examples/secrets.toml "$dir/"
sed -i "s|\"../adapters/dist\"|\"$PWD/adapters/dist\"|; s|\"../.wharf-dev/cache\"|\"$PWD/target/bench-cache\"|" "$dir/wharf.toml"
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
  $bin/wharf serve --config "$dir/wharf.toml" >/dev/null &
sleep 2
if [ "$mode" = live ]; then
  # Once a second until everything is processed: the gauge as a dashboard sees it, and the
  # same age read from the database at that moment.
  (
    while sleep 1; do
      gauge=$(curl -s "127.0.0.1:$((port + 1))/metrics" | sed -n 's/^wharf_inbox_oldest_pending_seconds //p')
      age=$(psql -d "$db" -c "SELECT round(coalesce(extract(epoch FROM now() - min(received_at)), 0), 1)
                              FROM webhook_inbox WHERE status IN ('PENDING', 'PROCESSING')")
      echo "${gauge:-?} $age"
    done
  ) >"$dir/oldest" &
  sampler=$!
fi
sent=$(date +%s.%N)
$bin/examples/loadgen --url "http://127.0.0.1:$port" --requests "$n" --concurrency "$concurrency"
if [ "$mode" = drain ]; then
  start=$(date +%s.%N)
  $bin/wharf worker --config "$dir/wharf.toml" --count 2 >/dev/null &
  wait_drained "$start" "the worker started"
else
  wait_drained "$sent" "the first request"
  kill "$sampler"
  echo "oldest pending, sampled each second ($(wc -l <"$dir/oldest") samples):" \
    "gauge max $(cut -d' ' -f1 "$dir/oldest" | sort -g | tail -1) s," \
    "database max $(cut -d' ' -f2 "$dir/oldest" | sort -g | tail -1) s"
  echo "  (gauge, database) in order: $(tr '\n' ',' <"$dir/oldest")"
fi
psql -d "$db" -c "SELECT status, outcome, count(*) FROM webhook_inbox GROUP BY 1, 2 ORDER BY 1, 2"

#!/usr/bin/env bash
# Measures processing on this machine with the release build (docs/performance.md):
#   drain: N events accepted with no worker running, then one `wharf worker` process drains
#          them (events/s from its start until none is left unprocessed);
#   live:  N events sent while `wharf serve` runs its two workers (acknowledgements while
#          processing competes for the same cores, then the time until all are processed).
# Events are sent by the open-loop load generator (bench/) at RATE requests/s (default 1500),
# 10 KiB each, all about one Stripe object.
#
#   cargo build --release -p wharf --bin wharf -p wharf-bench
#   examples/bench-processing.sh drain 20000 [RATE]
#   examples/bench-processing.sh live 20000 [RATE]
#
# Needs Postgres on 127.0.0.1:5432 (trust auth); creates and drops its own database.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:?drain or live}
n=${2:-20000}
rate=${3:-1500}
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

unprocessed() { psql -d "$db" -c "SELECT count(*) FROM webhook_inbox WHERE status <> 'PROCESSED'"; }
wait_drained() {
  local start=$1
  while [ "$(unprocessed)" != 0 ]; do sleep 0.1; done
  local end; end=$(date +%s.%N)
  echo "processed $n events $(echo "$end - $start" | bc) s after $2: $(echo "$n / ($end - $start)" | bc) events/s"
}

$bin/wharf serve --config "$dir/wharf.toml" >/dev/null &
sleep 2
sent=$(date +%s.%N)
$bin/wharf-bench loadgen --rate "$rate" --requests "$n" --body-bytes 10240 --objects 1
if [ "$mode" = drain ]; then
  start=$(date +%s.%N)
  $bin/wharf worker --config "$dir/wharf.toml" --count 2 >/dev/null &
  wait_drained "$start" "the worker started"
else
  wait_drained "$sent" "the first request"
fi
psql -d "$db" -c "SELECT outcome, count(*) FROM webhook_inbox GROUP BY 1 ORDER BY 1"

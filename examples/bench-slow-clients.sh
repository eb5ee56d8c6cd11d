#!/usr/bin/env bash
# Memory of `wharf serve` under slow clients (docs/performance.md): N connections that each
# declare a 1 MiB body, send one byte less and stall, against the default [server] bounds
# (examples/wharf.toml). Prints the resident memory before, the highest sampled VmRSS and the
# kernel's VmHWM, and what the clients got.
#
#   cargo build --release -p wharf --bin wharf --example slowclients
#   examples/bench-slow-clients.sh 2000
#
# Needs Postgres on 127.0.0.1:5432 (trust auth); creates and drops its own database.
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-2000}
bin=target/release
. examples/bench-env.sh
bench_env slow error
ulimit -n $((n * 2 + 1024))

$bin/wharf serve --config "$dir/wharf.toml" >/dev/null &
pid=$!
sleep 3
kib() { awk -v k="$1:" '$1 == k {print $2}' "/proc/$pid/status"; }
echo "before: VmRSS $(kib VmRSS) KiB"
peak=0
( while kill -0 "$pid" 2>/dev/null; do kib VmRSS; sleep 0.2; done ) > "$dir/rss" &
sampler=$!
$bin/examples/slowclients --connections "$n" --declare 1048576 --wait-secs 60
kill "$sampler" 2>/dev/null || true
peak=$(sort -n "$dir/rss" | tail -1)
echo "peak sampled VmRSS $peak KiB; VmHWM $(kib VmHWM) KiB; after: VmRSS $(kib VmRSS) KiB"

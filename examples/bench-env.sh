# Sourced by the examples/bench-*.sh scripts, from the repository's root. `bench_env NAME
# LOG_LEVEL` creates a database of the script's own (dropped on exit, after every background
# job is stopped), points WHARF_DATABASE_URL at it, and copies the example configuration into
# a new folder `$dir` with its paths made absolute into this checkout. Needs Postgres on
# 127.0.0.1:5432 with trust auth, and openssl.

psql() { command psql -qtAh 127.0.0.1 -U postgres "$@"; }

bench_env() {
  db=wharf_bench_$1_$$
  psql -c "CREATE DATABASE $db" >/dev/null
  trap 'kill $(jobs -p) 2>/dev/null; wait; psql -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null' EXIT
  export WHARF_DATABASE_URL=postgres://postgres@127.0.0.1:5432/$db RUST_LOG=$2
  dir=$(mktemp -d)
  cp examples/wharf.toml examples/secrets.toml examples/payload-keys.toml "$dir/"
  sed -i "s|\"../adapters/dist\"|\"$PWD/adapters/dist\"|; s|\"../.wharf-dev/cache\"|\"$PWD/target/bench-cache\"|" "$dir/wharf.toml"
  # `wharf serve` and `wharf worker` refuse the examples' published demo values: this run's
  # secrets and payload key are made here. The load generator signs with $BENCH_SECRET (the
  # stripe-demo endpoint's current version, the file's first value).
  BENCH_SECRET=whsec_bench_$(openssl rand -hex 16)
  export BENCH_SECRET
  sed -i "0,/^value = .*/s//value = \"$BENCH_SECRET\"/" "$dir/secrets.toml"
  sed -i "/$BENCH_SECRET/!s|^value = .*|value = \"whsec_$(openssl rand -base64 32)\"|" "$dir/secrets.toml"
  printf 'current = "bench"\n[keys]\nbench = "%s"\n' "$(openssl rand -base64 32)" >"$dir/payload-keys.toml"
}

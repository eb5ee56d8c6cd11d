# Sourced by the examples/bench-*.sh scripts, from the repository's root. `bench_env NAME
# LOG_LEVEL` creates a database of the script's own (dropped on exit, after every background
# job is stopped), points WHARF_DATABASE_URL at it, and copies the example configuration into
# a new folder `$dir` with its paths made absolute into this checkout. Needs Postgres on
# 127.0.0.1:5432 with trust auth.

psql() { command psql -qtAh 127.0.0.1 -U postgres "$@"; }

bench_env() {
  db=wharf_bench_$1_$$
  psql -c "CREATE DATABASE $db" >/dev/null
  trap 'kill $(jobs -p) 2>/dev/null; wait; psql -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null' EXIT
  export WHARF_DATABASE_URL=postgres://postgres@127.0.0.1:5432/$db RUST_LOG=$2
  dir=$(mktemp -d)
  cp examples/wharf.toml examples/secrets.toml examples/payload-keys.toml "$dir/"
  sed -i "s|\"../adapters/dist\"|\"$PWD/adapters/dist\"|; s|\"../.wharf-dev/cache\"|\"$PWD/target/bench-cache\"|" "$dir/wharf.toml"
}

#!/usr/bin/env bash
# Sends signed sample webhooks to a running Wharf, using the demo secrets in
# examples/secrets.toml. Needs curl and openssl.
#   examples/send.sh stripe|github|svix|all [BASE_URL]
# BASE_URL defaults to $WHARF_URL, else http://127.0.0.1:8080 (what `cargo xtask dev` serves).
# Each example has a fixed event id, so sending it again is a provider's retry: the receiver
# answers `duplicate`. The signed timestamps are fresh on every run, so signatures stay valid.
set -euo pipefail
what=${1:-all}
base=${2:-${WHARF_URL:-http://127.0.0.1:8080}}
now=$(date +%s)

hmac_hex() { printf '%s' "$2" | openssl dgst -sha256 -hmac "$1" -binary | od -An -vtx1 | tr -d ' \n'; }
hmac_b64_keyhex() { printf '%s' "$2" | openssl dgst -sha256 -mac HMAC -macopt "hexkey:$1" -binary | base64; }

stripe() {
  local id="evt_demo_1"
  local body='{"id":"'"$id"'","object":"event","type":"payment_intent.succeeded","created":1767225600,"data":{"object":{"id":"pi_demo","object":"payment_intent","amount":2000}}}'
  local sig; sig=$(hmac_hex "whsec_demo_stripe_current" "$now.$body")
  echo "stripe: $id"
  curl -sS -X POST "$base/webhooks/stripe-demo" -H 'content-type: application/json' \
    -H "stripe-signature: t=$now,v1=$sig" --data-binary "$body"; echo
}

github() {
  local id="demo-delivery-1"
  local body='{"zen":"Design for failure.","hook_id":1}'
  local sig; sig=$(hmac_hex "whsec_demo_github" "$body")
  echo "github: $id"
  curl -sS -X POST "$base/webhooks/github-demo" -H 'content-type: application/json' \
    -H "x-hub-signature-256: sha256=$sig" \
    -H "x-github-delivery: $id" -H 'x-github-event: ping' --data-binary "$body"; echo
}

svix() {
  local id="msg_demo_1"
  local body='{"type":"invoice.paid","data":{"id":"inv_demo"}}'
  local key; key=$(printf '%s' "d2hhcmYtZGVtby1zdml4LXNlY3JldC1ub3QtcmVhbCE=" | base64 -d | od -An -vtx1 | tr -d ' \n')
  local sig; sig=$(hmac_b64_keyhex "$key" "$id.$now.$body")
  echo "svix: $id"
  curl -sS -X POST "$base/webhooks/svix-demo" -H 'content-type: application/json' \
    -H "svix-id: $id" -H "svix-timestamp: $now" -H "svix-signature: v1,$sig" --data-binary "$body"; echo
}

case "$what" in
  stripe) stripe ;;
  github) github ;;
  svix) svix ;;
  all) stripe; github; svix ;;
  *) echo "usage: $0 stripe|github|svix|all [BASE_URL]" >&2; exit 2 ;;
esac

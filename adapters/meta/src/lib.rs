//! Meta Graph API webhooks (WhatsApp Cloud API, Messenger, Instagram, Pages):
//! `X-Hub-Signature-256: sha256=<hex>`, the HMAC-SHA256 of the raw body under the app secret
//! (its UTF-8 bytes, `raw`). Meta signs the body as sent, with non-ASCII escaped as `\uXXXX`:
//! the host verifies those exact bytes. No timestamp is signed: replay protection is dedup
//! alone. (The legacy SHA-1 `X-Hub-Signature` is not used.)
//!
//! Subscription verification arrives as a GET (`serves-get`):
//! `?hub.mode=subscribe&hub.verify_token=<token>&hub.challenge=<challenge>`. The token is
//! checked by the host against the endpoint's `secrets.verify-token` set (a token check: it
//! signs nothing), `hub.mode` must be `subscribe`, each parameter must appear once; only then
//! is `hub.challenge` echoed as the whole `text/plain` body. A challenge that is not a short
//! token (1-128 of `A-Z a-z 0-9 - . _ ~`) is refused (400): Meta sends integers, and nothing
//! else is reflected.
//!
//! A POST is a batch (`entry[]`, up to 1000 updates); one event per item with an id:
//! - WhatsApp `changes[].value.messages[]`: id `messages[].id` (the `wamid`), type
//!   `whatsapp.message`, object the `wamid`, created-at `timestamp`;
//! - WhatsApp `changes[].value.statuses[]`: id `<wamid>:<status>` (one per state of an
//!   outbound message), type `whatsapp.status.<status>`, object the `wamid`;
//! - Messenger/Instagram `messaging[].message`: id `message.mid`, type `messenger.message`
//!   (`messenger.message_echo` for echoes), created-at `timestamp` (ms) / 1000.
//!
//! Every other item (Page feed changes, postbacks, reads, template updates...) has no id of its
//! own, and Wharf never makes identity from a payload hash: a batch with no item above is
//! `unsupported` (422, or 200 `ignored` with `unsupported_types = "ignore"` on the endpoint). In
//! a batch that also holds items above, such items are not events of their own, but they stay
//! in the stored payload of the batch's events.
//!
//! Each event's payload is the whole batch body (no per-item spans yet): consumers select
//! their item by the event id.

use wharf_adapter_sdk::*;

struct Meta;
export!(Meta);

/// Longest `hub.challenge` echoed back.
const MAX_CHALLENGE_BYTES: usize = 128;

/// The one value of `name` among the query's parameters; missing or repeated is `None`.
fn single<'a>(pairs: &'a [(String, String)], name: &str) -> Option<&'a str> {
    let mut values = pairs.iter().filter(|(n, _)| n == name);
    match (values.next(), values.next()) {
        (Some((_, v)), None) if !v.is_empty() => Some(v),
        _ => None,
    }
}

fn short_token(s: &str) -> bool {
    (1..=MAX_CHALLENGE_BYTES).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._~".contains(&b))
}

fn items<'a>(value: &'a Value, key: &str) -> impl Iterator<Item = &'a Value> {
    value
        .get(key)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

/// A WhatsApp `value` (messages and statuses) as events; `false` when it holds neither.
fn whatsapp(value: &Value, events: &mut Vec<Envelope>) -> Result<bool, Rejection> {
    let time = |item: &Value| {
        str_at(item, &["timestamp"]).and_then(|t| parse_unix_timestamp(t.as_bytes()))
    };
    let mut known = false;
    for message in items(value, "messages") {
        let id = required_str(message, &["id"])?;
        events.push(
            event(id, "whatsapp.message")
                .object(id)
                .created_at(time(message)),
        );
        known = true;
    }
    for status in items(value, "statuses") {
        let id = required_str(status, &["id"])?;
        let state = required_str(status, &["status"])?;
        events.push(
            event(format!("{id}:{state}"), format!("whatsapp.status.{state}"))
                .object(id)
                .created_at(time(status)),
        );
        known = true;
    }
    Ok(known)
}

/// A Messenger/Instagram `messaging[]` item as an event; `false` when it is not a message.
fn messenger(item: &Value, events: &mut Vec<Envelope>) -> bool {
    let Some(mid) = str_at(item, &["message", "mid"]).filter(|m| !m.is_empty()) else {
        return false;
    };
    let echo = at(item, &["message", "is_echo"]).and_then(Value::as_bool) == Some(true);
    let kind = if echo {
        "messenger.message_echo"
    } else {
        "messenger.message"
    };
    let ms = i64_at(item, &["timestamp"]);
    events.push(
        event(mid, kind)
            .object(mid)
            .created_at(ms.map(|t| t.div_euclid(1000))),
    );
    true
}

fn parse_batch(body: &[u8]) -> Result<Parsed, Rejection> {
    let json = parse_json(body).or_malformed("body is not JSON")?;
    let entries = (json.get("entry").and_then(Value::as_array)).or_malformed("missing entry[]")?;
    let mut events = Vec::new();
    let mut unknown = false;
    for entry in entries {
        let (mut changes, mut messaging) = (0, 0);
        for change in items(entry, "changes") {
            changes += 1;
            let value = change.get("value").unwrap_or(&Value::Null);
            unknown |= !whatsapp(value, &mut events)?;
        }
        for item in items(entry, "messaging") {
            messaging += 1;
            unknown |= !messenger(item, &mut events);
        }
        unknown |= changes + messaging == 0;
    }
    if events.is_empty() {
        let kind = if unknown {
            "items without an id"
        } else {
            "no items"
        };
        return Err(unsupported(format!("a batch with {kind} Wharf can key")));
    }
    Ok(events.into())
}

impl Adapter for Meta {
    fn describe() -> Description {
        Description::new(Algorithm::HmacSha256)
            .also(Algorithm::Token)
            .serves_get()
    }

    fn prepare(req: &Request) -> Result<Prepared, Rejection> {
        if req.method() == Method::Get {
            let pairs = query_pairs(req).or_invalid("query is not a valid form")?;
            if single(&pairs, "hub.mode") != Some("subscribe") {
                return Err(invalid("hub.mode is not subscribe"));
            }
            let token = single(&pairs, "hub.verify_token")
                .or_invalid("missing, empty or repeated hub.verify_token")?;
            return Ok(token_check(candidates(vec![token.as_bytes().to_vec()])?)
                .key("verify-token")
                .into());
        }
        let signature = prefixed_hex(req, "x-hub-signature-256", "sha256=")?;
        Ok(hmac_sha256(vec![Part::RawBody], vec![signature]).into())
    }

    fn parse(req: &Request) -> Result<Parsed, Rejection> {
        if req.method() == Method::Get {
            let pairs = query_pairs(req).or_malformed("query is not a valid form")?;
            let challenge = single(&pairs, "hub.challenge")
                .filter(|c| short_token(c))
                .or_malformed("hub.challenge missing, repeated or not a short token")?;
            return Ok(Handshake::literal("text/plain", challenge).into());
        }
        parse_batch(&req.body())
    }
}

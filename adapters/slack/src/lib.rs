//! Slack: `X-Slack-Signature: v0=<hex>`, the HMAC-SHA256 of `v0:<timestamp>:<raw body>` under
//! the app's signing secret (its UTF-8 bytes, so `raw`), with the timestamp in
//! `X-Slack-Request-Timestamp`; 5 minutes of tolerance either way.
//!
//! Bodies:
//! - Events API (JSON): `url_verification` is answered as a handshake echoing `challenge`
//!   (`{"challenge":"..."}`, nothing stored); `event_callback` is one event with id `event_id`,
//!   type `event.type` and `created_at` from `event_time`. Other envelope types are unsupported.
//! - Slash commands (form-encoded): Slack gives them no event id. Design decision: the event id
//!   is `trigger_id` (unique per invocation) and the type is `command` (e.g. `/deploy`).
//! - Interactivity (form-encoded `payload=<JSON>`): likewise, id `trigger_id`, type `type`.
//!
//! JSON or form is chosen by `Content-Type`, or by a leading `{` when there is none.

use wharf_adapter_sdk::*;

struct Slack;
export!(Slack);

/// An event whose id and type are both non-empty, else 400.
fn checked_event(event_id: &str, event_type: &str) -> Result<Envelope, Rejection> {
    if event_id.is_empty() || event_type.is_empty() {
        return Err(malformed("empty event id or type"));
    }
    Ok(event(event_id, event_type))
}

/// The string at `field`, even empty: an empty type is unsupported, an empty challenge echoed.
fn field(field: &Field) -> Result<&str, Rejection> {
    (field.str()).ok_or_else(|| malformed(format!("missing {}", field.path())))
}

fn parse_events_api(body: &[u8]) -> Result<Parsed, Rejection> {
    let paths = ["type", "challenge", "event_id", "event.type", "event_time"];
    let [kind, challenge, event_id, event_type, event_time] =
        json_fields(body, paths).or_malformed("body is not JSON")?;
    match field(&kind)? {
        "url_verification" => {
            let mut answer = Value::Object(Default::default());
            answer["challenge"] = field(&challenge)?.into();
            Ok(Handshake::literal("application/json", answer.to_string()).into())
        }
        "event_callback" => {
            let event = checked_event(field(&event_id)?, field(&event_type)?)?;
            Ok(event.created_at(event_time.i64()).into())
        }
        _ => Err(unsupported("Events API envelope type")),
    }
}

fn parse_form(body: &[u8]) -> Result<Parsed, Rejection> {
    let pairs = form_pairs(body).or_malformed("body is not a valid form")?;
    let get = |name: &str| form_value(&pairs, name);
    let trigger_id = get("trigger_id").or_malformed("missing trigger_id");
    if let Some(command) = get("command") {
        return Ok(checked_event(trigger_id?, command)?.into());
    }
    let payload = get("payload").or_malformed("neither command nor payload")?;
    let [trigger_id, kind] =
        json_fields(payload.as_bytes(), ["trigger_id", "type"]).or_malformed("payload not JSON")?;
    let trigger_id = trigger_id.str().or_malformed("payload field")?;
    Ok(checked_event(trigger_id, kind.str().or_malformed("payload field")?)?.into())
}

impl Adapter for Slack {
    fn describe() -> Description {
        Description::new(Algorithm::HmacSha256).tolerance(300, 300)
    }

    fn prepare(req: &Request) -> Result<Prepared, Rejection> {
        v0_hmac_sha256(req, "x-slack-signature", "x-slack-request-timestamp")
    }

    fn parse(req: &Request) -> Result<Parsed, Rejection> {
        let body = req.body();
        let is_json = match req.header("content-type") {
            Some(ct) => ct.to_ascii_lowercase().windows(4).any(|w| w == b"json"),
            None => body.trim_ascii_start().starts_with(b"{"),
        };
        if is_json {
            parse_events_api(&body)
        } else {
            parse_form(&body)
        }
    }
}

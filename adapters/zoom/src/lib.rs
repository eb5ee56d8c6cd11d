//! Zoom: `x-zm-signature: v0=<hex>`, the HMAC-SHA256 of `v0:<timestamp>:<raw body>` under the
//! app's secret token (its UTF-8 bytes, `raw`), with the timestamp (Unix seconds) in
//! `x-zm-request-timestamp`; 5 minutes of tolerance either way (Zoom states none).
//!
//! `endpoint.url_validation` is signed like any event and answered only after it verifies:
//! `{"plainToken":"<token>","encryptedToken":"<hex HMAC-SHA256 of the token>"}`, the MAC
//! computed by the host under the secret that verified the request. The token is echoed as a
//! JSON string (escaped by serde_json); a token that is empty, longer than 128 bytes or holds a
//! control character is refused (400): Zoom sends 22-character tokens.
//!
//! Event id: Zoom documents none (`x-zm-trackingid` is per request). Design decision: the id is
//! `<event>:<event_ts>:<SHA-256 hex of the verified body>`. A retry that resends the same body
//! (what Zoom's three retries are understood to do) keeps it, and two different notifications,
//! even of the same type, object and millisecond (two participants joining together), never
//! share it. A resend that changed any byte of the body would be stored as a new event.
//! Object: `payload.object.uuid`, else `payload.object.id`; created-at: `event_ts` (ms) / 1000.

use wharf_adapter_sdk::*;

struct Zoom;
export!(Zoom);

/// Longest `plainToken` echoed back.
const MAX_PLAIN_TOKEN_BYTES: usize = 128;
/// Longest `event` name put into an id (the id must stay within 255 bytes).
const MAX_EVENT_BYTES: usize = 128;

fn url_validation(token: &Field) -> Result<Parsed, Rejection> {
    let token = token.required_str()?;
    if token.len() > MAX_PLAIN_TOKEN_BYTES || token.chars().any(char::is_control) {
        return Err(malformed("plainToken is not a short token"));
    }
    // `Value::from(token).to_string()` is the token as a JSON string, quotes included.
    let head = format!(
        r#"{{"plainToken":{},"encryptedToken":""#,
        Value::from(token)
    );
    let body = vec![
        AnswerPart::Literal(head.into_bytes()),
        AnswerPart::HmacSha256Hex(token.as_bytes().to_vec()),
        AnswerPart::Literal(br#""}"#.to_vec()),
    ];
    Ok(Handshake::new("application/json", body).into())
}

impl Adapter for Zoom {
    fn describe() -> Description {
        Description::new(Algorithm::HmacSha256).tolerance(300, 300)
    }

    fn prepare(req: &Request) -> Result<Prepared, Rejection> {
        v0_hmac_sha256(req, "x-zm-signature", "x-zm-request-timestamp")
    }

    fn parse(req: &Request) -> Result<Parsed, Rejection> {
        let body = req.body();
        let paths = [
            "event",
            "event_ts",
            "payload.plainToken",
            "payload.object.uuid",
            "payload.object.id",
        ];
        let [event_type, event_ts, token, uuid, object_id] =
            json_fields(&body, paths).or_malformed("body is not JSON")?;
        let event_type = event_type.required_str()?;
        if event_type == "endpoint.url_validation" {
            return url_validation(&token);
        }
        if event_type.len() > MAX_EVENT_BYTES {
            return Err(malformed("event name too long"));
        }
        let event_ts = event_ts.i64().or_malformed("missing event_ts")?;
        let id = format!("{event_type}:{event_ts}:{}", sha256_hex(&body));
        let object = match uuid.value() {
            Some(Value::String(uuid)) if !uuid.is_empty() => Some(uuid.clone()),
            _ => match object_id.value() {
                Some(Value::String(id)) if !id.is_empty() => Some(id.clone()),
                Some(Value::Number(id)) => Some(id.to_string()),
                _ => None,
            },
        };
        Ok(event(id, event_type)
            .object(object.as_deref())
            .created_at(event_ts.div_euclid(1000))
            .into())
    }
}

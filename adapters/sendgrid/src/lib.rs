//! SendGrid Signed Event Webhook: `X-Twilio-Email-Event-Webhook-Signature` is the standard
//! base64 of a DER ECDSA signature (P-256, SHA-256) over the bytes of
//! `X-Twilio-Email-Event-Webhook-Timestamp` (Unix seconds, as sent) immediately followed by the
//! raw body, no separator. The key is SendGrid's "verification key": standard base64 of a DER
//! SubjectPublicKeyInfo (`public_key` in the secrets file, `spki-der-base64`).
//!
//! - The body is a JSON array of events, written `[{..},\r\n{..}]\r\n`: the CRLFs are signed, so
//!   nothing is trimmed. Each element is one event, stored and delivered as its own slice:
//!   id `sg_event_id` (SendGrid's documented dedup key), type `event`, object `sg_message_id`,
//!   created-at `timestamp`. An element without `sg_event_id` fails the batch (400): identity
//!   is never made up from a hash of the payload.
//! - Signatures are not normalised by SendGrid: its published ones are high-S, and the host
//!   accepts them. Only DER is offered to the host, as in SendGrid's SDKs (a raw `r||s` is refused).
//! - Tolerance: 25 hours past, 5 minutes ahead. SendGrid documents no window and retries a failed
//!   batch "for up to 24 hours after the event occurs"; whether a retry is re-signed with a fresh
//!   timestamp is not documented, so a short window could turn a legitimate retry after an outage
//!   into a 401 and lose the events. Within the window a replayed batch is answered `duplicate`
//!   (every `sg_event_id` is already stored); the window bounds replays beyond that. An operator
//!   who confirms re-signing may narrow it per endpoint (`tolerance_secs`).

use wharf_adapter_sdk::*;

struct SendGrid;
export!(SendGrid);

const TIMESTAMP: &str = "x-twilio-email-event-webhook-timestamp";
const SIGNATURE: &str = "x-twilio-email-event-webhook-signature";

/// Whether `sig` is shaped as DER `SEQUENCE { INTEGER r, INTEGER s }` with short lengths, as a
/// P-256 signature always is. The host also accepts 64 raw bytes; SendGrid never sends those.
fn is_der_signature(sig: &[u8]) -> bool {
    let integer = |rest: &[u8]| -> Option<usize> {
        match rest {
            [0x02, len @ 1..=33, ..] if rest.len() >= 2 + *len as usize => Some(2 + *len as usize),
            _ => None,
        }
    };
    let [0x30, len, body @ ..] = sig else {
        return false;
    };
    if *len as usize != body.len() {
        return false;
    }
    integer(body)
        .and_then(|r| integer(&body[r..]).map(|s| r + s == body.len()))
        .unwrap_or(false)
}

impl Adapter for SendGrid {
    fn describe() -> Description {
        Description::new(Algorithm::EcdsaP256Sha256)
            .public_key_encoding(PublicKeyEncoding::SpkiDerBase64)
            .tolerance(25 * 3600, 300)
            .ordering(Ordering::CreatedAt)
    }

    fn prepare(req: &Request) -> Result<Prepared, Rejection> {
        let timestamp = signature_header(req, TIMESTAMP)?;
        let unix = parse_unix_timestamp(&timestamp).or_invalid("timestamp is not an integer")?;
        let signature = base64_decode(&signature_header(req, SIGNATURE)?)
            .filter(|s| is_der_signature(s))
            .or_invalid("signature is not base64 DER")?;
        let message = vec![Part::Literal(timestamp), Part::RawBody];
        Ok(ecdsa_p256_sha256(message, vec![signature]).timestamped(unix))
    }

    fn parse(req: &Request) -> Result<Parsed, Rejection> {
        let body = req.body();
        let items = Located::root(&body)
            .and_then(|root| root.elements())
            .or_malformed("body is not a JSON array")?;
        let mut events = Vec::with_capacity(items.len());
        for item in items {
            let fields = item
                .members()
                .or_malformed("event is not an object with distinct keys")?;
            let id = fields.str("sg_event_id").filter(|s| !s.is_empty());
            let kind = fields.str("event").filter(|s| !s.is_empty());
            let (Some(id), Some(kind)) = (id, kind) else {
                return Err(malformed("event without sg_event_id or event"));
            };
            let created = fields.get("timestamp").and_then(|t| t.as_i64());
            let message_id = fields.str("sg_message_id");
            events.push(
                event(id, kind)
                    .object(message_id.as_deref())
                    .created(created)
                    .span(item.span()),
            );
        }
        Ok(events.into())
    }
}

#[cfg(test)]
mod tests {
    use super::is_der_signature;

    #[test]
    fn der_shapes() {
        let b64 = "MEUCIGHQVtGj+Y3LkG9fLcxf3qfI10QysgDWmMOVmxG0u6ZUAiEAyBiXDWzM+uOe5W0JuG+luQAbPIqHh89M15TluLtEZtM=";
        let der = wharf_adapter_sdk::base64_decode(b64.as_bytes()).unwrap();
        assert!(is_der_signature(&der));
        assert!(!is_der_signature(&der[..der.len() - 1]));
        assert!(!is_der_signature(&[7; 64]));
        assert!(!is_der_signature(&[]));
        let mut long = der.clone();
        long.push(0);
        assert!(!is_der_signature(&long));
    }
}

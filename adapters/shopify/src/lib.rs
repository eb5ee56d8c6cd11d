//! Shopify: `X-Shopify-Hmac-Sha256: <base64>`, the HMAC-SHA256 of the raw body under the
//! app's client secret used as its UTF-8 text (`raw`). Nothing but the body is signed: no
//! timestamp, and none of the headers the event is read from.
//!
//! Events: id `X-Shopify-Event-Id`, Shopify's documented duplicate key ("the same value
//! across more than one webhook indicates a duplicate"; `X-Shopify-Webhook-Id` is not used);
//! type `X-Shopify-Topic`; created-at `X-Shopify-Triggered-At` (RFC 3339). The body
//! is read only if it is JSON (a subscription may be XML): object `id` (the product, order,
//! ... the topic names) and the object version from its `updated_at`, which is signed. Never
//! from `X-Shopify-Triggered-At`, which is not: a captured body replayed under a fresh id with
//! a time far ahead would otherwise make every later version of its object stale. Replay
//! protection is dedup alone, on an unsigned id: a captured body replayed under a fresh
//! `X-Shopify-Event-Id` is accepted again.

use wharf_adapter_sdk::*;

struct Shopify;
export!(Shopify);

impl Adapter for Shopify {
    fn describe() -> Description {
        Description::new(Algorithm::HmacSha256).ordering(Ordering::CreatedAt)
    }

    fn prepare(req: &Request) -> Result<Prepared, Rejection> {
        let header = signature_header(req, "x-shopify-hmac-sha256")?;
        let signature =
            base64_decode(header.trim_ascii()).or_invalid("x-shopify-hmac-sha256 is not base64")?;
        Ok(hmac_sha256(vec![Part::RawBody], candidates(vec![signature])?).into())
    }

    fn parse(req: &Request) -> Result<Parsed, Rejection> {
        let id = required_header(req, "x-shopify-event-id")?;
        let topic = required_header(req, "x-shopify-topic")?;
        let triggered = match req.header_values("x-shopify-triggered-at").as_slice() {
            [] => None,
            [value] => Some(
                std::str::from_utf8(value)
                    .ok()
                    .and_then(parse_rfc3339)
                    .or_malformed("x-shopify-triggered-at is not RFC 3339")?,
            ),
            _ => return Err(malformed("repeated x-shopify-triggered-at")),
        };
        let (object, updated) = match json_fields(&req.body(), ["id", "updated_at"]) {
            Some([id, updated]) => {
                let object = id
                    .i64()
                    .map(|n| n.to_string())
                    .or(id.str().map(str::to_owned));
                let updated = (updated.str())
                    .map(|t| parse_rfc3339(t).or_malformed("updated_at is not RFC 3339"))
                    .transpose()?;
                (object, updated)
            }
            None => (None, None),
        };
        let version = updated
            .filter(|_| object.is_some())
            .map(ObjectVersion::CreatedAt);
        Ok(event(id, topic)
            .object(object.as_deref())
            .version(version)
            .created_at(triggered)
            .into())
    }
}

//! Coinbase Commerce: `X-CC-Webhook-Signature: <hex>`, the HMAC-SHA256 of the raw body under
//! the endpoint's shared secret used as its UTF-8 text (`raw`). Only the body is signed; no
//! timestamp.
//!
//! The body is a delivery (`id`, `attempt_number`, `scheduled_for`) wrapping the event: the
//! dedup id is the event's `event.id` (a UUID kept on every attempt), not the delivery's `id`.
//! Type `event.type` (`charge:confirmed`), object `event.data.code` (the charge's code, in its
//! hosted URL), created-at `event.created_at` (RFC 3339). No ordering: the ids are random
//! UUIDs, so events of one charge in the same second could not be ordered.

use wharf_adapter_sdk::*;

struct CoinbaseCommerce;
export!(CoinbaseCommerce);

impl Adapter for CoinbaseCommerce {
    fn describe() -> Description {
        Description::new(Algorithm::HmacSha256)
    }

    fn prepare(req: &Request) -> Result<Prepared, Rejection> {
        let header = signature_header(req, "x-cc-webhook-signature")?;
        let signature =
            hex_decode(header.trim_ascii()).or_invalid("x-cc-webhook-signature is not hex")?;
        Ok(hmac_sha256(vec![Part::RawBody], candidates(vec![signature])?).into())
    }

    fn parse(req: &Request) -> Result<Parsed, Rejection> {
        let [id, kind, object, created] = req.json([
            "event.id",
            "event.type",
            "event.data.code",
            "event.created_at",
        ])?;
        let created = (created.str())
            .map(|t| parse_rfc3339(t).or_malformed("event.created_at is not RFC 3339"))
            .transpose()?;
        Ok(event(id.required_str()?, kind.required_str()?)
            .object(object.str())
            .created_at(created)
            .into())
    }
}

//! Square: `x-square-hmacsha256-signature: <base64>`, the HMAC-SHA256 of the notification URL
//! followed directly by the raw body (no separator), under the subscription's signature key
//! used as its UTF-8 text (so `raw`, not base64-decoded although it looks like base64).
//!
//! The URL is the one configured in the Square subscription, byte for byte: the endpoint's
//! `public_url` plus the request's own query string, supplied by the host (`Part::Url`), never
//! taken from the Host header. An endpoint without `public_url` cannot verify anything, so it
//! is refused here with 401 and a detail saying so (rather than the host's 503 for a check
//! naming a URL it does not have): the request is not authentic as far as Wharf can tell, and
//! Square retries it once the operator has fixed the configuration.
//!
//! The legacy `x-square-signature` (HMAC-SHA1 over the same bytes) is ignored, as Square's
//! SDKs do. Nothing time-based is signed: replay protection is dedup on `event_id` alone.
//!
//! Events: id `event_id` (Square's idempotency value, the same on every retry), type `type`,
//! object `data.id`, created-at and ordering from `created_at` (RFC 3339, to the second).

use wharf_adapter_sdk::*;

struct Square;
export!(Square);

impl Adapter for Square {
    fn describe() -> Description {
        Description::new(Algorithm::HmacSha256).ordering(Ordering::CreatedAt)
    }

    fn prepare(req: &Request) -> Result<Prepared, Rejection> {
        let header = signature_header(req, "x-square-hmacsha256-signature")?;
        if req.url().is_none() {
            return Err(invalid(
                "endpoint has no public_url: Square signs the notification URL",
            ));
        }
        let signature = base64_decode(header.trim_ascii())
            .or_invalid("x-square-hmacsha256-signature is not base64")?;
        Ok(hmac_sha256(vec![Part::Url, Part::RawBody], vec![signature]).into())
    }

    fn parse(req: &Request) -> Result<Parsed, Rejection> {
        let [id, kind, created, object] =
            req.json(["event_id", "type", "created_at", "data.id"])?;
        let created = (created.str())
            .map(|t| parse_rfc3339(t).or_malformed("created_at is not RFC 3339"))
            .transpose()?;
        Ok(event(id.required_str()?, kind.required_str()?)
            .object(object.str())
            .created(created)
            .into())
    }
}

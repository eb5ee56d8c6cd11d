//! GitHub: `X-Hub-Signature-256: sha256=<hex>` over the raw body; no signed timestamp.
//!
//! The delivery GUID (`X-GitHub-Delivery`) is kept on redelivery, so it is the dedup key.
//! The body is not interpreted: it may be form-encoded, and the event type is a header.

use wharf_adapter_sdk::*;

struct GitHub;
export!(GitHub);

impl Adapter for GitHub {
    fn describe() -> Description {
        Description::new(Algorithm::HmacSha256)
    }

    fn prepare(req: &Request) -> Result<Prepared, Rejection> {
        let signature = prefixed_hex(req, "x-hub-signature-256", "sha256=")?;
        Ok(hmac_sha256(vec![Part::RawBody], vec![signature]).into())
    }

    fn parse(req: &Request) -> Result<Parsed, Rejection> {
        let id = required_header(req, "x-github-delivery")?;
        Ok(event(id, required_header(req, "x-github-event")?).into())
    }
}

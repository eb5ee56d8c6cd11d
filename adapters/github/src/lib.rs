//! GitHub: `X-Hub-Signature-256: sha256=<hex>` over the raw body; no signed timestamp.
//!
//! The delivery GUID (`X-GitHub-Delivery`) is kept on redelivery, so it is the dedup key.
//! The body is not interpreted: it may be form-encoded, and the event type is a header.

use wharf_adapter_sdk::prelude::*;

struct GitHub;
wharf_adapter_sdk::export_adapter!(GitHub);

impl Guest for GitHub {
    fn describe() -> Description {
        Description::new("github", "0.1.0", Algorithm::HmacSha256)
    }

    fn prepare(req: &Request) -> Result<Prepared, Rejection> {
        let header = signature_header(req, "x-hub-signature-256")?;
        let hex = header
            .strip_prefix(b"sha256=")
            .ok_or_else(|| invalid("expected sha256="))?;
        let signature = hex_decode(hex).ok_or_else(|| invalid("signature is not hex"))?;
        Ok(check(Algorithm::HmacSha256, vec![Part::RawBody], vec![signature]).into())
    }

    fn parse(req: &Request) -> Result<Parsed, Rejection> {
        let id = required_header(req, "x-github-delivery")?;
        Ok(event(id, required_header(req, "x-github-event")?).into())
    }
}

//! Stripe: `Stripe-Signature: t=<unix>,v1=<hex>[,v1=<hex>...]` over `t.body`.
//!
//! Several `v1` entries appear while a secret is being rolled; `v0` and unknown keys are
//! ignored. Stripe's key is the whole `whsec_...` string, so the encoding is `raw`.

use wharf_adapter_sdk::prelude::*;

struct Stripe;
wharf_adapter_sdk::export_adapter!(Stripe);

impl Guest for Stripe {
    fn describe() -> Description {
        Description::new("stripe", "0.1.0", Algorithm::HmacSha256)
            .tolerance(300, 300)
            .ordering(Ordering::CreatedAt)
    }

    fn prepare(req: &Request) -> Result<Prepared, Rejection> {
        let header = signature_header(req, "stripe-signature")?;
        let mut t: Option<&[u8]> = None;
        let mut signatures = Vec::new();
        for item in split_list(&header, b',') {
            match split_pair(item, b'=') {
                Some((b"t", _)) if t.is_some() => return Err(invalid("repeated t")),
                Some((b"t", value)) => t = Some(value),
                Some((b"v1", value)) => signatures.extend(hex_decode(value)),
                _ => {}
            }
        }
        let t = t.ok_or_else(|| invalid("missing t"))?;
        let unix = parse_unix_timestamp(t).ok_or_else(|| invalid("t is not an integer"))?;
        if signatures.is_empty() {
            return Err(invalid("no usable v1 signature"));
        }
        Ok(check(
            Algorithm::HmacSha256,
            pieces_then_body(&[t], b'.'),
            signatures,
        )
        .timestamped(unix))
    }

    fn parse(req: &Request) -> Result<Parsed, Rejection> {
        // Only these are read; the rest of the body is checked to be JSON and skipped.
        let body = parse_json_paths(
            &req.body(),
            &[&["id"], &["type"], &["created"], &["data", "object", "id"]],
        )
        .ok_or_else(|| malformed("body is not JSON"))?;
        let id = required_str(&body, &["id"])?;
        let created = i64_at(&body, &["created"]);
        Ok(event(id, required_str(&body, &["type"])?)
            .object(str_at(&body, &["data", "object", "id"]))
            .version(created.map(ObjectVersion::CreatedAt))
            .created_at(created)
            .into())
    }
}

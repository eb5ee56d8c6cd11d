//! Stripe: `Stripe-Signature: t=<unix>,v1=<hex>[,v1=<hex>...]` over `t.body`.
//!
//! Several `v1` entries appear while a secret is being rolled (more than 16, or one over 512
//! bytes, is refused: 401); `v0` and unknown keys are ignored. Stripe's key is the whole `whsec_...` string, so the encoding is `raw`.

use wharf_adapter_sdk::*;

struct Stripe;
export!(Stripe);

impl Adapter for Stripe {
    fn describe() -> Description {
        Description::new(Algorithm::HmacSha256)
            .tolerance(300, 300)
            .ordering(Ordering::CreatedAt)
    }

    fn prepare(req: &Request) -> Result<Prepared, Rejection> {
        let header = signature_header(req, "stripe-signature")?;
        let (mut t, mut signatures) = (None, Vec::new());
        for item in split_list(&header, b',') {
            match split_pair(item, b'=') {
                Some((b"t", _)) if t.is_some() => return Err(invalid("repeated t")),
                Some((b"t", value)) => t = Some(value),
                Some((b"v1", value)) => signatures.extend(hex_decode(value)),
                _ => {}
            }
        }
        let t = t.or_invalid("missing t")?;
        let unix = parse_unix_timestamp(t).or_invalid("t is not an integer")?;
        if signatures.is_empty() {
            return Err(invalid("no usable v1 signature"));
        }
        let signatures = candidates(signatures)?;
        Ok(hmac_sha256(pieces_then_body(&[t], b'.'), signatures).timestamped(unix))
    }

    fn parse(req: &Request) -> Result<Parsed, Rejection> {
        // Only these are read; the rest of the body is checked to be JSON and skipped.
        let [id, kind, created, object] = req.json(["id", "type", "created", "data.object.id"])?;
        Ok(event(id.required_str()?, kind.required_str()?)
            .object(object.str())
            .created(created.i64())
            .into())
    }
}

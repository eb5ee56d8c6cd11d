//! Razorpay: `X-Razorpay-Signature: <hex>`, the HMAC-SHA256 of the raw body under the
//! webhook secret used as its UTF-8 text (`raw`). Only the body is signed: no timestamp, and
//! not the event id header.
//!
//! Events: id `x-razorpay-event-id` (Razorpay's documented dedup value, kept on retries; not
//! signed, so a captured body replayed under a fresh id is accepted again), type `event`
//! (`payment.captured`), object the `id` of the entity the event is named after
//! (`payload.payment.entity.id`; `payload.order.entity.id` for `order.paid`), else of the first
//! one `contains` lists; created-at `created_at` (Unix seconds). No ordering:
//! Razorpay documents that events may arrive out of order and `created_at` is to the second.

use wharf_adapter_sdk::*;

struct Razorpay;
export!(Razorpay);

impl Adapter for Razorpay {
    fn describe() -> Description {
        Description::new(Algorithm::HmacSha256)
    }

    fn prepare(req: &Request) -> Result<Prepared, Rejection> {
        let header = signature_header(req, "x-razorpay-signature")?;
        let signature =
            hex_decode(header.trim_ascii()).or_invalid("x-razorpay-signature is not hex")?;
        Ok(hmac_sha256(vec![Part::RawBody], candidates(vec![signature])?).into())
    }

    fn parse(req: &Request) -> Result<Parsed, Rejection> {
        let id = required_header(req, "x-razorpay-event-id")?;
        let body = parse_json(&req.body()).or_malformed("body is not JSON")?;
        let kind = required_str(&body, &["event"])?;
        // The entity the event is named after (`order` of `order.paid`, which also carries its
        // payment), else the first that `contains` lists.
        let entity_id = |entity: &str| str_at(&body, &["payload", entity, "entity", "id"]);
        let named = kind.split('.').next().and_then(entity_id);
        let object = named.or_else(|| {
            let contains = at(&body, &["contains"])?.as_array()?;
            entity_id(contains.first()?.as_str()?)
        });
        Ok(event(id, kind)
            .object(object)
            .created_at(i64_at(&body, &["created_at"]))
            .into())
    }
}

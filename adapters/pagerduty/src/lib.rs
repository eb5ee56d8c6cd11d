//! PagerDuty (webhooks v3): `X-PagerDuty-Signature: v1=<hex>[,v1=<hex>...]`, each the
//! HMAC-SHA256 of the raw body under one of the subscription's signing secrets, used as its
//! text (`raw`, although it looks like base64). Several `v1` entries are sent while a secret
//! is rotated; one matching is enough. Other versions are ignored. No timestamp is signed.
//!
//! Events: id `event.id` (kept on retries), type `event.event_type`, object `event.data.id`,
//! created-at and ordering from `event.occurred_at` (RFC 3339 with milliseconds, truncated to
//! the second; ties go by event id, which PagerDuty writes as a time-ordered ULID).

use wharf_adapter_sdk::*;

struct PagerDuty;
export!(PagerDuty);

impl Adapter for PagerDuty {
    fn describe() -> Description {
        Description::new(Algorithm::HmacSha256).ordering(Ordering::CreatedAt)
    }

    fn prepare(req: &Request) -> Result<Prepared, Rejection> {
        let header = signature_header(req, "x-pagerduty-signature")?;
        let signatures: Vec<Vec<u8>> = split_list(&header, b',')
            .filter_map(|item| match split_pair(item, b'=') {
                Some((b"v1", hex)) => hex_decode(hex),
                _ => None,
            })
            .collect();
        if signatures.is_empty() {
            return Err(invalid("no usable v1 signature"));
        }
        Ok(hmac_sha256(vec![Part::RawBody], candidates(signatures)?).into())
    }

    fn parse(req: &Request) -> Result<Parsed, Rejection> {
        let [id, kind, object, occurred] = req.json([
            "event.id",
            "event.event_type",
            "event.data.id",
            "event.occurred_at",
        ])?;
        let occurred = (occurred.str())
            .map(|t| parse_rfc3339(t).or_malformed("event.occurred_at is not RFC 3339"))
            .transpose()?;
        Ok(event(id.required_str()?, kind.required_str()?)
            .object(object.str())
            .created(occurred)
            .into())
    }
}

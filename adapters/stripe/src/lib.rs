//! Stripe: `Stripe-Signature: t=<unix>,v1=<hex>[,v1=<hex>...]` over `t.body`.
//!
//! Several `v1` entries appear while a secret is being rolled; `v0` and unknown keys are
//! ignored. Stripe's key is the whole `whsec_...` string, so the encoding is `raw`.

wit_bindgen::generate!({ path: "../../wit", world: "adapter" });
wharf_adapter_sdk::adapter_helpers!();

use wharf::adapter::types::{
    Algorithm, Check, Envelope, ObjectVersion, Ordering, SecretEncoding, Tolerance,
};
use wharf_adapter_sdk as sdk;

struct Adapter;
export!(Adapter);

impl Guest for Adapter {
    fn describe() -> Description {
        Description {
            name: "stripe".into(),
            version: "0.1.0".into(),
            event_types: Vec::new(),
            max_body_bytes: None,
            algorithm: Algorithm::HmacSha256,
            secret_encoding: SecretEncoding::Raw,
            tolerance: Some(Tolerance {
                past_secs: 300,
                future_secs: 300,
            }),
            ordering: Ordering::CreatedAt,
        }
    }

    fn prepare(req: &Request) -> Result<Prepared, Rejection> {
        let header = signature_header(req, "stripe-signature")?;
        let mut t: Option<&[u8]> = None;
        let mut signatures = Vec::new();
        for item in sdk::split_list(&header, b',') {
            match sdk::split_pair(item, b'=') {
                Some((b"t", _)) if t.is_some() => return Err(invalid("repeated t")),
                Some((b"t", value)) => t = Some(value),
                Some((b"v1", value)) => signatures.extend(sdk::hex_decode(value)),
                _ => {}
            }
        }
        let t = t.ok_or_else(|| invalid("missing t"))?;
        let unix = sdk::parse_unix_timestamp(t).ok_or_else(|| invalid("t is not an integer"))?;
        if signatures.is_empty() {
            return Err(invalid("no usable v1 signature"));
        }
        Ok(Prepared {
            checks: vec![Check {
                message: pieces_then_body(&[t], b'.'),
                signatures,
            }],
            timestamp: Some(unix),
        })
    }

    fn parse(req: &Request) -> Result<Parsed, Rejection> {
        let body = sdk::parse_json(&req.body()).ok_or_else(|| malformed("body is not JSON"))?;
        let required = |key| {
            sdk::str_at(&body, &[key])
                .filter(|v| !v.is_empty())
                .ok_or_else(|| malformed(&format!("missing event {key}")))
        };
        let created = sdk::i64_at(&body, &["created"]);
        Ok(Parsed::Events(vec![Envelope {
            event_id: required("id")?.into(),
            event_type: required("type")?.into(),
            object_id: sdk::str_at(&body, &["data", "object", "id"]).map(Into::into),
            object_version: created.map(ObjectVersion::CreatedAt),
            created_at: created,
            route: None,
        }]))
    }
}

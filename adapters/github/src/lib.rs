//! GitHub: `X-Hub-Signature-256: sha256=<hex>` over the raw body; no signed timestamp.
//!
//! The delivery GUID (`X-GitHub-Delivery`) is kept on redelivery, so it is the dedup key.
//! The body is not interpreted: it may be form-encoded, and the event type is a header.

wit_bindgen::generate!({ path: "../../wit", world: "adapter" });

use wharf::adapter::types::{
    Algorithm, Check, Envelope, Ordering, Part, RejectionKind, SecretEncoding,
};
use wharf_adapter_sdk as sdk;

struct Adapter;
export!(Adapter);

fn reject(kind: RejectionKind, detail: &str) -> Rejection {
    Rejection {
        kind,
        detail: detail.into(),
    }
}

impl Guest for Adapter {
    fn describe() -> Description {
        Description {
            name: "github".into(),
            version: "0.1.0".into(),
            event_types: Vec::new(),
            max_body_bytes: None,
            algorithm: Algorithm::HmacSha256,
            secret_encoding: SecretEncoding::Raw,
            tolerance: None,
            ordering: Ordering::None,
        }
    }

    fn prepare(req: &Request) -> Result<Prepared, Rejection> {
        let invalid = |detail| reject(RejectionKind::InvalidSignature, detail);
        let header = req
            .header("x-hub-signature-256")
            .ok_or_else(|| invalid("missing or repeated X-Hub-Signature-256"))?;
        let hex = header
            .strip_prefix(b"sha256=")
            .ok_or_else(|| invalid("expected sha256="))?;
        let signature = sdk::hex_decode(hex).ok_or_else(|| invalid("signature is not hex"))?;
        Ok(Prepared {
            checks: vec![Check {
                message: vec![Part::RawBody],
                signatures: vec![signature],
            }],
            timestamp: None,
        })
    }

    fn parse(req: &Request) -> Result<Parsed, Rejection> {
        let required = |name: &str, detail| {
            req.header(name)
                .and_then(sdk::utf8_nonempty)
                .ok_or_else(|| reject(RejectionKind::Malformed, detail))
        };
        Ok(Parsed::Events(vec![Envelope {
            event_id: required("x-github-delivery", "missing or repeated X-GitHub-Delivery")?,
            event_type: required("x-github-event", "missing or repeated X-GitHub-Event")?,
            object_id: None,
            object_version: None,
            created_at: None,
            route: None,
        }]))
    }
}

//! GitHub: `X-Hub-Signature-256: sha256=<hex>` over the raw body; no signed timestamp.
//!
//! The delivery GUID (`X-GitHub-Delivery`) is kept on redelivery, so it is the dedup key.
//! The body is not interpreted: it may be form-encoded, and the event type is a header.

wit_bindgen::generate!({ path: "../../wit", world: "adapter" });
wharf_adapter_sdk::adapter_helpers!();

use wharf::adapter::types::{Algorithm, Check, Envelope, Ordering, Part, SecretEncoding};
use wharf_adapter_sdk as sdk;

struct Adapter;
export!(Adapter);

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
        let header = signature_header(req, "x-hub-signature-256")?;
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
        let required = |name: &str| {
            req.header(name)
                .and_then(sdk::utf8_nonempty)
                .ok_or_else(|| malformed(&format!("missing or repeated {name}")))
        };
        Ok(Parsed::Events(vec![Envelope {
            event_id: required("x-github-delivery")?,
            event_type: required("x-github-event")?,
            object_id: None,
            object_version: None,
            created_at: None,
            route: None,
        }]))
    }
}

//! Standard Webhooks v1, and Svix (the same scheme under `svix-*` headers).
//!
//! Signed message: `id.timestamp.body`; `webhook-signature` holds space-separated `v1,<base64>`
//! entries. Other versions (`v1a`, Ed25519) are ignored until the host verifies them.

wit_bindgen::generate!({ path: "../../wit", world: "adapter" });
wharf_adapter_sdk::adapter_helpers!();

use wharf::adapter::types::{Algorithm, Check, Envelope, Ordering, SecretEncoding, Tolerance};
use wharf_adapter_sdk as sdk;

struct Adapter;
export!(Adapter);

/// `webhook` when any `webhook-id` is present (even repeated), else `svix`; never mixed.
fn scheme(req: &Request) -> &'static str {
    if req.header_values("webhook-id").is_empty() {
        "svix"
    } else {
        "webhook"
    }
}

impl Guest for Adapter {
    fn describe() -> Description {
        Description {
            name: "standard-webhooks".into(),
            version: "0.1.0".into(),
            event_types: Vec::new(),
            max_body_bytes: None,
            algorithm: Algorithm::HmacSha256,
            secret_encoding: SecretEncoding::WhsecBase64,
            tolerance: Some(Tolerance {
                past_secs: 300,
                future_secs: 300,
            }),
            ordering: Ordering::None,
        }
    }

    fn prepare(req: &Request) -> Result<Prepared, Rejection> {
        let s = scheme(req);
        let id = signature_header(req, &format!("{s}-id"))?;
        let timestamp = signature_header(req, &format!("{s}-timestamp"))?;
        let signature = signature_header(req, &format!("{s}-signature"))?;
        let unix = sdk::parse_unix_timestamp(&timestamp)
            .ok_or_else(|| invalid("timestamp is not an integer"))?;
        let signatures: Vec<Vec<u8>> = sdk::split_list(&signature, b' ')
            .filter_map(|entry| match sdk::split_pair(entry, b',')? {
                (b"v1", sig) => sdk::base64_decode(sig),
                _ => None,
            })
            .collect();
        if signatures.is_empty() {
            return Err(invalid("no usable v1 signature"));
        }
        Ok(Prepared {
            checks: vec![Check {
                message: pieces_then_body(&[&id, &timestamp], b'.'),
                signatures,
            }],
            timestamp: Some(unix),
        })
    }

    fn parse(req: &Request) -> Result<Parsed, Rejection> {
        let event_id = req
            .header(&format!("{}-id", scheme(req)))
            .and_then(sdk::utf8_nonempty)
            .ok_or_else(|| malformed("webhook id is not UTF-8"))?;
        let body = sdk::parse_json(&req.body()).ok_or_else(|| malformed("body is not JSON"))?;
        let event_type = sdk::str_at(&body, &["type"])
            .filter(|t| !t.is_empty())
            .unwrap_or("untyped");
        Ok(Parsed::Events(vec![Envelope {
            event_id,
            event_type: event_type.into(),
            object_id: sdk::str_at(&body, &["data", "id"]).map(Into::into),
            object_version: None,
            created_at: None,
            route: None,
        }]))
    }
}

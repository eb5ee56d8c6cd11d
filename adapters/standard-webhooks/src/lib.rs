//! Standard Webhooks v1, and Svix (the same scheme under `svix-*` headers).
//!
//! Signed message: `id.timestamp.body`; `webhook-signature` holds space-separated `v1,<base64>`
//! entries. Other versions (`v1a`, Ed25519) are ignored until the host verifies them.

use wharf_adapter_sdk::prelude::*;

struct StandardWebhooks;
wharf_adapter_sdk::export_adapter!(StandardWebhooks);

/// `webhook` when any `webhook-id` is present (even repeated), else `svix`; never mixed.
fn scheme(req: &Request) -> &'static str {
    if req.header_values("webhook-id").is_empty() {
        "svix"
    } else {
        "webhook"
    }
}

impl Guest for StandardWebhooks {
    fn describe() -> Description {
        Description::new("standard-webhooks", "0.1.0", Algorithm::HmacSha256)
            .secret_encoding(SecretEncoding::WhsecBase64)
            .tolerance(300, 300)
    }

    fn prepare(req: &Request) -> Result<Prepared, Rejection> {
        let s = scheme(req);
        let id = signature_header(req, &format!("{s}-id"))?;
        let timestamp = signature_header(req, &format!("{s}-timestamp"))?;
        let signature = signature_header(req, &format!("{s}-signature"))?;
        let unix = parse_unix_timestamp(&timestamp)
            .ok_or_else(|| invalid("timestamp is not an integer"))?;
        let signatures: Vec<Vec<u8>> = split_list(&signature, b' ')
            .filter_map(|entry| match split_pair(entry, b',')? {
                (b"v1", sig) => base64_decode(sig),
                _ => None,
            })
            .collect();
        if signatures.is_empty() {
            return Err(invalid("no usable v1 signature"));
        }
        Ok(check(Algorithm::HmacSha256, pieces_then_body(&[&id, &timestamp], b'.'), signatures).timestamped(unix))
    }

    fn parse(req: &Request) -> Result<Parsed, Rejection> {
        let event_id = required_header(req, &format!("{}-id", scheme(req)))?;
        let body = parse_json_paths(&req.body(), &[&["type"], &["data", "id"]])
            .ok_or_else(|| malformed("body is not JSON"))?;
        let event_type = str_at(&body, &["type"])
            .filter(|t| !t.is_empty())
            .unwrap_or("untyped");
        Ok(event(event_id, event_type)
            .object(str_at(&body, &["data", "id"]))
            .into())
    }
}

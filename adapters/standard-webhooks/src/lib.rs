//! Standard Webhooks `v1` (HMAC-SHA256) and `v1a` (Ed25519), and Svix (the same scheme under
//! `svix-*` headers).
//!
//! Signed message: `id.timestamp.body` (the `webhook-id` and `webhook-timestamp` header values
//! as sent, then the raw body). `webhook-signature` holds space-separated `<version>,<base64>`
//! entries: `v1,` HMAC-SHA256 under the `whsec_` secret, `v1a,` Ed25519 (64 bytes) under the
//! sender's key, configured as `public_key = "whpk_..."`. Other versions are ignored.
//!
//! Both kinds are offered as two checks over the same message; the endpoint's keys decide
//! which are verified (a `value` verifies `v1`, a `public_key` verifies `v1a`), and every check
//! that applies must pass. A check with no candidate of its kind is left out, so a request
//! carrying only `v1` entries sent to an endpoint holding only public keys has no check that
//! applies and is refused (401), as is a `v1a`-only request sent to an HMAC-only endpoint.

use wharf_adapter_sdk::*;

struct StandardWebhooks;
export!(StandardWebhooks);

/// The host's bound on candidates per check.
const MAX_V1: usize = 16;
/// The host allows 16 public-key verifications per request (candidates × the endpoint's key
/// versions), which the adapter cannot see: 4 × 4 fits. Svix sends one `v1a` entry per active
/// key, one or two during a rotation.
const MAX_V1A: usize = 4;
const ED25519_SIGNATURE_BYTES: usize = 64;

/// `webhook` when any `webhook-id` is present (even repeated), else `svix`; never mixed.
fn scheme(req: &Request) -> &'static str {
    if req.header_values("webhook-id").is_empty() {
        "svix"
    } else {
        "webhook"
    }
}

impl Adapter for StandardWebhooks {
    fn describe() -> Description {
        Description::new(Algorithm::HmacSha256)
            .also(Algorithm::Ed25519)
            .secret_encoding(SecretEncoding::WhsecBase64)
            .public_key_encoding(PublicKeyEncoding::WhpkBase64)
            .tolerance(300, 300)
    }

    fn prepare(req: &Request) -> Result<Prepared, Rejection> {
        let s = scheme(req);
        let id = signature_header(req, &format!("{s}-id"))?;
        let timestamp = signature_header(req, &format!("{s}-timestamp"))?;
        let signature = signature_header(req, &format!("{s}-signature"))?;
        let unix = parse_unix_timestamp(&timestamp).or_invalid("timestamp is not an integer")?;
        let (mut v1, mut v1a) = (Vec::new(), Vec::new());
        for entry in split_list(&signature, b' ') {
            match split_pair(entry, b',') {
                Some((b"v1", sig)) => v1.extend(base64_decode(sig)),
                // Anything but 64 bytes can never verify: a non-match, as in the reference code.
                Some((b"v1a", sig)) => {
                    v1a.extend(base64_decode(sig).filter(|s| s.len() == ED25519_SIGNATURE_BYTES))
                }
                _ => {}
            }
        }
        if v1.len() > MAX_V1 || v1a.len() > MAX_V1A {
            return Err(invalid("too many signatures"));
        }
        let message = pieces_then_body(&[&id, &timestamp], b'.');
        let mut checks = Vec::new();
        if !v1.is_empty() {
            checks.push(hmac_sha256(message.clone(), v1));
        }
        if !v1a.is_empty() {
            checks.push(ed25519(message, v1a));
        }
        if checks.is_empty() {
            return Err(invalid("no usable v1 or v1a signature"));
        }
        Ok(Prepared::new(checks).timestamped(unix))
    }

    fn parse(req: &Request) -> Result<Parsed, Rejection> {
        let event_id = required_header(req, &format!("{}-id", scheme(req)))?;
        let [kind, object] = req.json(["type", "data.id"])?;
        let event_type = kind.str().filter(|t| !t.is_empty()).unwrap_or("untyped");
        Ok(event(event_id, event_type).object(object.str()).into())
    }
}

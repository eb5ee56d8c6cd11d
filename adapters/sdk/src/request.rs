//! Reading the request's headers and query: each reader rejects with the kind its stage calls
//! for (401 in `prepare`, 400 in `parse`).

use crate::decode::{form_pairs, hex_decode, parse_unix_timestamp, utf8_nonempty};
use crate::{
    OrReject, Prepared, Rejection, Request, candidates, hmac_sha256, invalid, malformed,
    pieces_then_body,
};

/// A header present exactly once and non-empty; missing, empty or repeated is 401.
pub fn signature_header(req: &Request, name: &str) -> Result<Vec<u8>, Rejection> {
    req.header(name)
        .filter(|v| !v.is_empty())
        .ok_or_else(|| invalid(format!("missing, empty or repeated {name}")))
}

/// The signature in `header`, written `<prefix><hex>` (GitHub's `sha256=<hex>`), decoded; 401
/// when the header is missing or repeated, lacks the prefix, is not hex or decodes to more
/// than [`MAX_SIGNATURE_BYTES`](crate::MAX_SIGNATURE_BYTES).
pub fn prefixed_hex(req: &Request, header: &str, prefix: &str) -> Result<Vec<u8>, Rejection> {
    let value = signature_header(req, header)?;
    let hex = value
        .strip_prefix(prefix.as_bytes())
        .ok_or_else(|| invalid(format!("expected {prefix}")))?;
    let signature = hex_decode(hex).or_invalid("signature is not hex")?;
    Ok(candidates(vec![signature])?.remove(0))
}

/// The `v0` scheme Slack and Zoom share: `<signature_header>: v0=<hex>`, the HMAC-SHA256 of
/// `v0:<timestamp>:<raw body>`, the timestamp in `<timestamp_header>`.
pub fn v0_hmac_sha256(
    req: &Request,
    signature_header_name: &str,
    timestamp_header: &str,
) -> Result<Prepared, Rejection> {
    let timestamp = signature_header(req, timestamp_header)?;
    let unix = parse_unix_timestamp(&timestamp).or_invalid("timestamp is not an integer")?;
    let signature = prefixed_hex(req, signature_header_name, "v0=")?;
    let message = pieces_then_body(&[b"v0", &timestamp], b':');
    Ok(hmac_sha256(message, vec![signature]).timestamped(unix))
}

/// The request's query parameters, decoded, in order; empty without a query string, `None`
/// when it is not a valid form.
pub fn query_pairs(req: &Request) -> Option<Vec<(String, String)>> {
    form_pairs(req.query().unwrap_or_default().as_bytes())
}

/// After verification, a header carrying part of the event (its id or type): present once
/// and non-empty UTF-8, else 400.
pub fn required_header(req: &Request, name: &str) -> Result<String, Rejection> {
    req.header(name)
        .and_then(utf8_nonempty)
        .ok_or_else(|| malformed(format!("missing or repeated {name}")))
}

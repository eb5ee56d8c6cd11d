//! A handshake answer as sent (Slack `url_verification`, Discord PING, Zoom
//! `endpoint.url_validation`, Meta's GET): 2xx, a valid content type, and any MAC it asks for
//! computed by the host, under the rules of `verify::answer_mac` (no signing oracle).

use super::error::IngestError;
use super::verify::{self, Passed};
use crate::adapter::{Answer, AnswerPart, Handshake, Prepared};

/// What the request verified with, which decides whether a MAC may be answered.
pub struct Verification<'a> {
    pub passed: &'a Passed,
    pub prepared: &'a Prepared,
    /// Whether a signed timestamp's freshness was checked (and passed).
    pub freshness_checked: bool,
    pub body: &'a [u8],
}

/// The bytes to answer with. An answer that is not 2xx or has an invalid content type is the
/// adapter's failure; a MAC outside the rules is its contract breach.
pub fn answer(h: Handshake, verified: &Verification<'_>) -> Result<Answer, IngestError> {
    if !(200..300).contains(&h.status) || http::HeaderValue::from_str(&h.content_type).is_err() {
        return Err(IngestError::AdapterUnavailable(
            "invalid handshake answer".into(),
        ));
    }
    let mut body = Vec::new();
    for part in h.body {
        match part {
            AnswerPart::Literal(bytes) => body.extend_from_slice(&bytes),
            AnswerPart::HmacSha256Hex(input) => {
                let mac = verify::answer_mac(
                    verified.passed,
                    verified.prepared,
                    verified.freshness_checked,
                    verified.body,
                    &input,
                )
                .map_err(IngestError::AdapterContract)?;
                body.extend_from_slice(mac.as_bytes());
            }
        }
    }
    Ok(Answer {
        status: h.status,
        content_type: h.content_type,
        body,
    })
}

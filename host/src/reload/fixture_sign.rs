//! Self-signing fixtures: a `request.toml` with a `[sign]` table leaves its signature to the
//! runner instead of carrying one computed by hand.
//!
//! ```toml
//! now = 1767225605
//! headers = [
//!   ["x-webhook-timestamp", "{timestamp}"],
//!   ["x-webhook-signature", "sha256={signature}"],
//! ]
//!
//! [sign]
//! over = "{timestamp}.{body}"   # the signed bytes
//! encoding = "hex"              # or "base64": how {signature} is written
//! # algorithm = "hmac-sha256"   # the only one so far
//! # timestamp = 1767225000      # {timestamp}; default: `now` (set it apart for a stale case)
//! # key = "another-secret"      # sign with this instead of the first [[secret]] value
//! # body = "other bytes"        # {body} in `over`; default: the `body` file (a flipped byte)
//! ```
//!
//! With `[sign]`, header values, `query` and `over` are templates: `{now}` (the fixture's `now`,
//! Unix seconds), `{timestamp}`, `{signature}` (not in `over`), `{body}` (only in `over`), and
//! `{{` / `}}` for literal braces; any other `{name}` is an error. Without `[sign]` nothing is
//! expanded, so a fixture written before this keeps its meaning byte for byte. The key is the
//! first `[[secret]]` version's `value` (or `key`), decoded as the adapter declares its keys
//! (raw, `whsec_` base64, base64 or hex), exactly as the receiver decodes it.

use base64::Engine as _;
use hmac::{Hmac, Mac};
use serde::Deserialize;
use sha2::Sha256;

use crate::adapter::KeyEncoding;
use crate::ingest::decode_key;

/// A fixture's `[sign]` table.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SignFile {
    /// The signed bytes, a template.
    pub over: String,
    #[serde(default)]
    pub algorithm: SignAlgorithm,
    pub encoding: SignEncoding,
    /// `{timestamp}`, when it must differ from `now`.
    pub timestamp: Option<i64>,
    /// A secret value to sign with instead of the first `[[secret]]`'s.
    pub key: Option<String>,
    /// What `{body}` stands for in `over`, instead of the body file.
    pub body: Option<String>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
pub enum SignAlgorithm {
    #[default]
    #[serde(rename = "hmac-sha256")]
    HmacSha256,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SignEncoding {
    Hex,
    Base64,
}

/// Why a self-signing fixture could not be expanded.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum SignError {
    #[error(
        "unknown placeholder {{{name}}} in {at} (known there: {known}; write {{{{ for a literal brace)"
    )]
    UnknownPlaceholder {
        name: String,
        at: &'static str,
        known: &'static str,
    },
    #[error("unclosed {{ in {at} (write {{{{ for a literal brace)")]
    Unclosed { at: &'static str },
    #[error("a lone }} in {at} (write }}}} for a literal brace)")]
    LoneClose { at: &'static str },
    #[error("[sign] has no key: the fixture has no [[secret]] value and [sign] no key")]
    NoKey,
    #[error("[sign]: the key does not decode as the adapter's key encoding declares")]
    KeyDoesNotDecode,
    #[error("{at} is not valid in a header value or query once expanded")]
    NotText { at: &'static str },
}

/// Where a template is, for messages.
#[derive(Clone, Copy)]
pub enum Place {
    Over,
    Header,
    Query,
}

impl Place {
    fn name(self) -> &'static str {
        match self {
            Place::Over => "[sign] over",
            Place::Header => "a header value",
            Place::Query => "query",
        }
    }

    fn known(self) -> &'static str {
        match self {
            Place::Over => "now, timestamp, body",
            Place::Header | Place::Query => "now, timestamp, signature",
        }
    }
}

/// The values a fixture's templates are expanded with.
pub struct Signed {
    now: String,
    timestamp: String,
    signature: String,
}

impl Signed {
    /// Computes `{signature}` for a fixture: `secret`, the first `[[secret]]` version's `value`
    /// if any; `body`, the body file's bytes.
    pub fn new(
        sign: &SignFile,
        now: i64,
        secret: Option<&str>,
        encoding: KeyEncoding,
        body: &[u8],
    ) -> Result<Self, SignError> {
        let timestamp = sign.timestamp.unwrap_or(now).to_string();
        let now = now.to_string();
        let body = sign.body.as_deref().map_or(body, str::as_bytes);
        let over = expand(&sign.over, Place::Over, |name| match name {
            "now" => Some(now.as_bytes()),
            "timestamp" => Some(timestamp.as_bytes()),
            "body" => Some(body),
            _ => None,
        })?;
        let value = sign.key.as_deref().or(secret).ok_or(SignError::NoKey)?;
        let key = decode_key(value, encoding).ok_or(SignError::KeyDoesNotDecode)?;
        let mac = match sign.algorithm {
            SignAlgorithm::HmacSha256 => {
                let mut mac =
                    Hmac::<Sha256>::new_from_slice(&key).expect("HMAC takes any key length");
                mac.update(&over);
                mac.finalize().into_bytes().to_vec()
            }
        };
        let signature = match sign.encoding {
            SignEncoding::Hex => hex::encode(mac),
            SignEncoding::Base64 => base64::engine::general_purpose::STANDARD.encode(mac),
        };
        Ok(Self {
            now,
            timestamp,
            signature,
        })
    }

    /// A header value or the query, expanded.
    pub fn text(&self, template: &str, place: Place) -> Result<String, SignError> {
        let bytes = expand(template, place, |name| match name {
            "now" => Some(self.now.as_bytes()),
            "timestamp" => Some(self.timestamp.as_bytes()),
            "signature" => Some(self.signature.as_bytes()),
            _ => None,
        })?;
        String::from_utf8(bytes).map_err(|_| SignError::NotText { at: place.name() })
    }
}

/// `template` with each `{name}` replaced by `value(name)`, `{{` and `}}` by one brace.
fn expand<'v>(
    template: &str,
    place: Place,
    value: impl Fn(&str) -> Option<&'v [u8]>,
) -> Result<Vec<u8>, SignError> {
    let mut out = Vec::with_capacity(template.len());
    let mut rest = template;
    while let Some(i) = rest.find(['{', '}']) {
        out.extend_from_slice(&rest.as_bytes()[..i]);
        let tail = &rest[i..];
        if let Some(after) = tail.strip_prefix("{{") {
            out.push(b'{');
            rest = after;
        } else if let Some(after) = tail.strip_prefix("}}") {
            out.push(b'}');
            rest = after;
        } else if tail.starts_with('}') {
            return Err(SignError::LoneClose { at: place.name() });
        } else {
            let end = tail
                .find('}')
                .ok_or(SignError::Unclosed { at: place.name() })?;
            let name = &tail[1..end];
            let v = value(name).ok_or_else(|| SignError::UnknownPlaceholder {
                name: name.to_owned(),
                at: place.name(),
                known: place.known(),
            })?;
            out.extend_from_slice(v);
            rest = &tail[end + 1..];
        }
    }
    out.extend_from_slice(rest.as_bytes());
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sign(text: &str) -> SignFile {
        toml::from_str(text).unwrap()
    }

    #[test]
    fn a_stripe_style_signature_matches_one_computed_by_hand() {
        let s = sign("over = \"{timestamp}.{body}\"\nencoding = \"hex\"\n");
        let signed = Signed::new(&s, 1700000000, Some("whsec_k"), KeyEncoding::Raw, b"{}").unwrap();
        let header = signed
            .text("t={timestamp},v1={signature}", Place::Header)
            .unwrap();
        let mut mac = Hmac::<Sha256>::new_from_slice(b"whsec_k").unwrap();
        mac.update(b"1700000000.{}");
        let expected = hex::encode(mac.finalize().into_bytes());
        assert_eq!(header, format!("t=1700000000,v1={expected}"));
    }

    #[test]
    fn timestamp_key_and_body_may_be_set_apart_and_keys_decode_as_declared() {
        let s = sign(
            "over = \"{now}|{timestamp}|{body}\"\nencoding = \"base64\"\ntimestamp = 5\nkey = \"whsec_AAEC\"\nbody = \"signed\"\n",
        );
        let signed = Signed::new(&s, 9, None, KeyEncoding::WhsecBase64, b"sent").unwrap();
        let mut mac = Hmac::<Sha256>::new_from_slice(&[0, 1, 2]).unwrap();
        mac.update(b"9|5|signed");
        let expected =
            base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes());
        assert_eq!(signed.text("{signature}", Place::Header).unwrap(), expected);
        assert_eq!(
            signed.text("{now}/{timestamp}", Place::Query).unwrap(),
            "9/5"
        );
        let bad = sign("over = \"x\"\nencoding = \"hex\"\nkey = \"not base64!\"\n");
        let refused = Signed::new(&bad, 0, None, KeyEncoding::Base64, b"").err();
        assert_eq!(refused, Some(SignError::KeyDoesNotDecode));
        let keyless = sign("over = \"x\"\nencoding = \"hex\"\n");
        let refused = Signed::new(&keyless, 0, None, KeyEncoding::Raw, b"").err();
        assert_eq!(refused, Some(SignError::NoKey));
    }

    #[test]
    fn braces_escape_and_unknown_or_unclosed_placeholders_are_named() {
        let s = sign("over = \"{body}\"\nencoding = \"hex\"\n");
        let signed = Signed::new(&s, 1, Some("k"), KeyEncoding::Raw, b"").unwrap();
        assert_eq!(
            signed.text("{{\"a\":1}}", Place::Header).unwrap(),
            "{\"a\":1}"
        );
        let unknown = signed.text("{sig}", Place::Header).unwrap_err().to_string();
        assert!(
            unknown.contains("{sig}") && unknown.contains("signature"),
            "{unknown}"
        );
        assert_eq!(
            signed.text("a{now", Place::Query).unwrap_err(),
            SignError::Unclosed { at: "query" }
        );
        assert!(matches!(
            signed.text("a}b", Place::Header),
            Err(SignError::LoneClose { .. })
        ));
        let in_over = sign("over = \"{signature}\"\nencoding = \"hex\"\n");
        let refused = Signed::new(&in_over, 1, Some("k"), KeyEncoding::Raw, b"").err();
        assert!(matches!(
            refused,
            Some(SignError::UnknownPlaceholder { .. })
        ));
    }
}

//! What `describe` declares, checked and in host types.

use serde::Serialize;

use crate::config::MAX_TOLERANCE_SECS;

use super::bindings::{
    Algorithm, Answer, Description, Ordering, PublicKeyEncoding, SecretEncoding,
};

/// Event-type globs one adapter may declare.
const MAX_EVENT_TYPE_GLOBS: usize = 1024;
/// The largest acknowledgement body an adapter may fix.
const MAX_ACKNOWLEDGEMENT_BYTES: usize = 4096;
/// The oldest a signed timestamp may be by an adapter's own tolerance: SendGrid retries a batch
/// for 24 hours and documents no re-signing, so a day plus the hour an endpoint may allow.
/// Bounded (as an endpoint's `tolerance_secs` is) because a tolerance of `u64::MAX` would turn
/// freshness off while the host still counted the timestamp as checked.
pub const MAX_ADAPTER_PAST_TOLERANCE_SECS: u64 = 24 * 3600 + MAX_TOLERANCE_SECS;

/// What `describe` said, checked and in host types.
#[derive(Debug, Clone, Serialize)]
pub struct AdapterInfo {
    pub name: String,
    pub version: String,
    pub event_types: Vec<String>,
    pub max_body_bytes: Option<u64>,
    pub algorithms: Vec<&'static str>,
    pub secret_encoding: &'static str,
    pub public_key_encoding: Option<&'static str>,
    /// Whether GET requests reach the adapter (handshakes only).
    pub serves_get: bool,
    /// The fixed acknowledgement's content type, when the adapter fixes one.
    pub acknowledgement: Option<String>,
    pub tolerance_past_secs: Option<u64>,
    pub tolerance_future_secs: Option<u64>,
    pub ordering: &'static str,
    /// The WIT package the component was built against, from its `types` import.
    pub world: String,
    /// What checks may be verified with, in the order declared (a 0.1 adapter has one).
    #[serde(skip)]
    pub verifiers: Vec<Algorithm>,
    #[serde(skip)]
    pub encoding: KeyEncoding,
    #[serde(skip)]
    pub public_keys: Option<PublicKeyEncoding>,
    #[serde(skip)]
    pub ack: Option<Answer>,
}

impl AdapterInfo {
    pub(super) fn placeholder() -> Self {
        Self {
            name: String::new(),
            version: String::new(),
            event_types: vec![],
            max_body_bytes: None,
            algorithms: vec![],
            secret_encoding: "",
            public_key_encoding: None,
            serves_get: false,
            acknowledgement: None,
            tolerance_past_secs: None,
            tolerance_future_secs: None,
            ordering: "",
            world: String::new(),
            verifiers: vec![],
            encoding: KeyEncoding::Raw,
            public_keys: None,
            ack: None,
        }
    }
}

/// An algorithm's name in `/admin/adapters` and `wharf adapter check`.
pub fn algorithm_name(a: Algorithm) -> &'static str {
    match a {
        Algorithm::HmacSha256 => "hmac-sha256",
        Algorithm::HmacSha1 => "hmac-sha1",
        Algorithm::HmacSha512 => "hmac-sha512",
        Algorithm::Ed25519 => "ed25519",
        Algorithm::EcdsaP256Sha256 => "ecdsa-p256-sha256",
        Algorithm::Token => "token",
    }
}

/// Whether `a` verifies with a `public_key` (else with a secret `value`).
pub fn uses_public_key(a: Algorithm) -> bool {
    matches!(a, Algorithm::Ed25519 | Algorithm::EcdsaP256Sha256)
}

impl TryFrom<Description> for AdapterInfo {
    type Error = anyhow::Error;

    fn try_from(d: Description) -> anyhow::Result<Self> {
        let valid_name = !d.name.is_empty()
            && d.name.len() <= 64
            && d.name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
        anyhow::ensure!(
            valid_name,
            "adapter name {:?} must be 1-64 of [a-z0-9_-]",
            d.name
        );
        // Every string from `describe` reaches log lines and `/admin/adapters`: bounded and
        // printable, or the file is refused.
        anyhow::ensure!(
            !d.version.is_empty()
                && d.version.len() <= 64
                && d.version.bytes().all(|b| b.is_ascii_graphic()),
            "adapter version must be 1-64 printable ASCII bytes without spaces"
        );
        anyhow::ensure!(
            d.event_types.len() <= MAX_EVENT_TYPE_GLOBS,
            "adapter declares {} event types (at most {MAX_EVENT_TYPE_GLOBS})",
            d.event_types.len()
        );
        anyhow::ensure!(
            d.event_types
                .iter()
                .all(|t| !t.is_empty() && t.len() <= 255 && !t.chars().any(char::is_control)),
            "adapter event types must be 1-255 bytes without control characters"
        );
        anyhow::ensure!(
            !d.algorithms.is_empty() && d.algorithms.len() <= 6,
            "adapter must declare 1 to 6 algorithms"
        );
        let mut verifiers: Vec<Algorithm> = Vec::with_capacity(d.algorithms.len());
        for a in d.algorithms {
            if !verifiers.contains(&a) {
                verifiers.push(a);
            }
        }
        let public_keys = d.public_key_encoding;
        anyhow::ensure!(
            public_keys.is_some() || !verifiers.iter().copied().any(uses_public_key),
            "adapter declares a public-key algorithm without a public-key-encoding"
        );
        if let Some(ack) = &d.acknowledgement {
            anyhow::ensure!(
                (200..300).contains(&ack.status)
                    && http::HeaderValue::from_str(&ack.content_type).is_ok()
                    && ack.body.len() <= MAX_ACKNOWLEDGEMENT_BYTES,
                "acknowledgement must be 2xx, with a valid content type and at most {MAX_ACKNOWLEDGEMENT_BYTES} bytes"
            );
        }
        if let Some(t) = d.tolerance {
            anyhow::ensure!(
                (1..=MAX_ADAPTER_PAST_TOLERANCE_SECS).contains(&t.past_secs)
                    && t.future_secs <= MAX_TOLERANCE_SECS,
                "adapter tolerance must be 1-{MAX_ADAPTER_PAST_TOLERANCE_SECS} s past and at most \
                 {MAX_TOLERANCE_SECS} s ahead"
            );
        }
        let (secret_encoding, encoding) = match d.secret_encoding {
            SecretEncoding::Raw => ("raw", KeyEncoding::Raw),
            SecretEncoding::WhsecBase64 => ("whsec-base64", KeyEncoding::WhsecBase64),
            SecretEncoding::Base64 => ("base64", KeyEncoding::Base64),
            SecretEncoding::Hex => ("hex", KeyEncoding::Hex),
        };
        let ordering = match d.ordering {
            Ordering::Sequence => "sequence",
            Ordering::CreatedAt => "created-at",
            Ordering::None => "none",
        };
        Ok(Self {
            name: d.name,
            version: d.version,
            event_types: d.event_types,
            max_body_bytes: d.max_body_bytes,
            algorithms: verifiers.iter().copied().map(algorithm_name).collect(),
            secret_encoding,
            public_key_encoding: public_keys.map(|p| match p {
                PublicKeyEncoding::WhpkBase64 => "whpk-base64",
                PublicKeyEncoding::Hex => "hex",
                PublicKeyEncoding::Base64 => "base64",
                PublicKeyEncoding::SpkiDerBase64 => "spki-der-base64",
            }),
            serves_get: d.serves_get,
            acknowledgement: d.acknowledgement.as_ref().map(|a| a.content_type.clone()),
            tolerance_past_secs: d.tolerance.map(|t| t.past_secs),
            tolerance_future_secs: d.tolerance.map(|t| t.future_secs),
            ordering,
            world: String::new(),
            verifiers,
            encoding,
            public_keys,
            ack: d.acknowledgement,
        })
    }
}

/// The MAC the host computes for an adapter that declares an HMAC family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MacAlgorithm {
    Sha256,
    Sha1,
    Sha512,
}

/// How a secret's configured value becomes key bytes; declared by the adapter.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum KeyEncoding {
    #[default]
    Raw,
    WhsecBase64,
    Base64,
    Hex,
}

#[cfg(test)]
mod tests {
    use super::super::bindings::Tolerance;
    use super::*;

    fn described(past_secs: u64, future_secs: u64) -> anyhow::Result<AdapterInfo> {
        AdapterInfo::try_from(Description {
            name: "a".into(),
            version: "1".into(),
            event_types: vec![],
            max_body_bytes: None,
            algorithms: vec![Algorithm::HmacSha256],
            secret_encoding: SecretEncoding::Raw,
            public_key_encoding: None,
            serves_get: false,
            acknowledgement: None,
            tolerance: Some(Tolerance {
                past_secs,
                future_secs,
            }),
            ordering: Ordering::None,
        })
    }

    #[test]
    fn an_adapter_tolerance_is_bounded_as_an_endpoint_one_is() {
        assert!(described(300, 300).is_ok());
        // SendGrid's, the widest a bundled adapter declares.
        assert!(described(25 * 3600, 300).is_ok());
        assert!(described(MAX_ADAPTER_PAST_TOLERANCE_SECS, MAX_TOLERANCE_SECS).is_ok());
        for (past, future) in [
            (u64::MAX, 300),
            (300, u64::MAX),
            (MAX_ADAPTER_PAST_TOLERANCE_SECS + 1, 0),
            (300, MAX_TOLERANCE_SECS + 1),
            (0, 300),
        ] {
            let refused = described(past, future).unwrap_err().to_string();
            assert!(
                refused.contains("adapter tolerance"),
                "{past} {future}: {refused}"
            );
        }
    }
}

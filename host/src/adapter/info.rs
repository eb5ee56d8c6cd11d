//! What `describe` declares, checked and in host types.

use serde::Serialize;

use super::bindings::{Algorithm, Description, Ordering, SecretEncoding};

/// Event-type globs one adapter may declare.
const MAX_EVENT_TYPE_GLOBS: usize = 1024;

/// What `describe` said, checked and in host types.
#[derive(Debug, Clone, Serialize)]
pub struct AdapterInfo {
    pub name: String,
    pub version: String,
    pub event_types: Vec<String>,
    pub max_body_bytes: Option<u64>,
    pub algorithm: &'static str,
    pub secret_encoding: &'static str,
    pub tolerance_past_secs: Option<u64>,
    pub tolerance_future_secs: Option<u64>,
    pub ordering: &'static str,
    /// The WIT package the component was built against, from its `types` import.
    pub world: String,
    #[serde(skip)]
    pub mac: Option<MacAlgorithm>,
    #[serde(skip)]
    pub encoding: KeyEncoding,
}

impl AdapterInfo {
    pub(super) fn placeholder() -> Self {
        Self {
            name: String::new(),
            version: String::new(),
            event_types: vec![],
            max_body_bytes: None,
            algorithm: "",
            secret_encoding: "",
            tolerance_past_secs: None,
            tolerance_future_secs: None,
            ordering: "",
            world: String::new(),
            mac: None,
            encoding: KeyEncoding::Raw,
        }
    }
}

impl TryFrom<Description> for AdapterInfo {
    type Error = anyhow::Error;

    fn try_from(d: Description) -> anyhow::Result<Self> {
        use KeyEncoding;
        use MacAlgorithm;
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
        let (algorithm, mac) = match d.algorithm {
            Algorithm::HmacSha256 => ("hmac-sha256", MacAlgorithm::Sha256),
            Algorithm::HmacSha1 => ("hmac-sha1", MacAlgorithm::Sha1),
            Algorithm::HmacSha512 => ("hmac-sha512", MacAlgorithm::Sha512),
            Algorithm::Ed25519 | Algorithm::EcdsaP256Sha256 => {
                anyhow::bail!(
                    "adapter {} declares a public-key algorithm, which this host does not verify yet",
                    d.name
                )
            }
        };
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
            algorithm,
            secret_encoding,
            tolerance_past_secs: d.tolerance.map(|t| t.past_secs),
            tolerance_future_secs: d.tolerance.map(|t| t.future_secs),
            ordering,
            world: String::new(),
            mac: Some(mac),
            encoding,
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

//! The public key that signs adapter files, as it is written in `[adapters] trusted_keys`, in
//! `NAME.pub` and on a `.sig` file's `signer` line: `ed25519:` and the base64 (standard,
//! padded) of the 32-byte Ed25519 public key.

use std::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

/// The scheme prefix: the only one so far.
const PREFIX: &str = "ed25519:";

/// An adapter signer's public key.
#[derive(Clone, PartialEq, Eq)]
pub struct AdapterKey(ed25519_dalek::VerifyingKey);

/// Why a text is not an adapter key.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AdapterKeyError {
    #[error("an adapter key starts with \"ed25519:\" (as `wharf adapter keygen` writes it)")]
    Scheme,
    #[error("an adapter key's value after \"ed25519:\" is not base64")]
    Base64,
    #[error("an adapter key is 32 bytes, not {0}")]
    Length(usize),
    #[error("an adapter key's 32 bytes are not an Ed25519 public key")]
    NotAPoint,
}

impl AdapterKey {
    pub fn new(key: ed25519_dalek::VerifyingKey) -> Self {
        Self(key)
    }

    pub fn parse(text: &str) -> Result<Self, AdapterKeyError> {
        let b64 = text
            .trim()
            .strip_prefix(PREFIX)
            .ok_or(AdapterKeyError::Scheme)?;
        let bytes = STANDARD.decode(b64).map_err(|_| AdapterKeyError::Base64)?;
        let bytes: [u8; 32] = bytes
            .as_slice()
            .try_into()
            .map_err(|_| AdapterKeyError::Length(bytes.len()))?;
        ed25519_dalek::VerifyingKey::from_bytes(&bytes)
            .map(Self)
            .map_err(|_| AdapterKeyError::NotAPoint)
    }

    pub fn verifying_key(&self) -> &ed25519_dalek::VerifyingKey {
        &self.0
    }
}

impl fmt::Display for AdapterKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{PREFIX}{}", STANDARD.encode(self.0.as_bytes()))
    }
}

impl fmt::Debug for AdapterKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl std::str::FromStr for AdapterKey {
    type Err = AdapterKeyError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl<'de> serde::Deserialize<'de> for AdapterKey {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Self::parse(&text).map_err(|e| serde::de::Error::custom(format!("{text:?}: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_names_what_is_wrong() {
        let key = AdapterKey::new(ed25519_dalek::SigningKey::from_bytes(&[7; 32]).verifying_key());
        let text = key.to_string();
        assert!(text.starts_with("ed25519:"));
        assert_eq!(AdapterKey::parse(&text), Ok(key));
        let b64 = text.trim_start_matches("ed25519:");
        assert_eq!(AdapterKey::parse(b64), Err(AdapterKeyError::Scheme));
        assert_eq!(
            AdapterKey::parse("ed25519:%%%"),
            Err(AdapterKeyError::Base64)
        );
        assert_eq!(
            AdapterKey::parse("ed25519:AAAA"),
            Err(AdapterKeyError::Length(3))
        );
    }
}

//! Trusted keys: a set's secrets and public keys, decoded in the adapter's declared encodings,
//! and where verification gets them (`KeySource`).

use base64::Engine as _;
use time::OffsetDateTime;

use super::error::SecretsError;
use crate::adapter::{KeyEncoding, PublicKeyEncoding};

/// A decoded secret (an HMAC key or a shared token) with the version it came from. Never
/// printed.
pub struct TrustedKey {
    pub version: String,
    pub key: Vec<u8>,
}

/// A parsed public key (Ed25519 or P-256) with the version it came from.
#[derive(Debug)]
pub struct TrustedPublicKey {
    pub version: String,
    pub key: PublicKey,
}

#[derive(Debug, Clone)]
pub enum PublicKey {
    Ed25519(ed25519_dalek::VerifyingKey),
    P256(p256::ecdsa::VerifyingKey),
}

/// A set's unexpired versions, newest first: its secret `value`s and its `public_key`s.
#[derive(Debug, Default)]
pub struct KeySet {
    pub secrets: Vec<TrustedKey>,
    pub public_keys: Vec<TrustedPublicKey>,
}

/// How an adapter reads a set's versions (it declares both in `describe`).
#[derive(Debug, Clone, Copy, Default)]
pub struct KeyEncodings {
    pub secret: KeyEncoding,
    pub public_key: Option<PublicKeyEncoding>,
}

impl std::fmt::Debug for TrustedKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TrustedKey")
            .field("version", &self.version)
            .finish_non_exhaustive()
    }
}

/// Where verification gets an endpoint's trusted keys: the live secrets file when serving, a
/// fixture's own secret set under `wharf adapter test`.
pub trait KeySource: Send + Sync {
    /// The set's unexpired versions, newest first, decoded for the adapter's encodings.
    fn keys(
        &self,
        set: &str,
        encodings: KeyEncodings,
        now: OffsetDateTime,
    ) -> Result<KeySet, SecretsError>;
}

/// A secret `value` in the adapter's encoding; `None` when it does not decode or is empty.
pub fn decode_key(value: &str, encoding: KeyEncoding) -> Option<Vec<u8>> {
    use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD};
    let b64 = |s: &str| {
        STANDARD
            .decode(s)
            .or_else(|_| STANDARD_NO_PAD.decode(s))
            .ok()
    };
    let key = match encoding {
        KeyEncoding::Raw => Some(value.as_bytes().to_vec()),
        KeyEncoding::WhsecBase64 => b64(value.strip_prefix("whsec_").unwrap_or(value)),
        KeyEncoding::Base64 => b64(value),
        KeyEncoding::Hex => hex::decode(value).ok(),
    }?;
    (!key.is_empty()).then_some(key)
}

/// A public key as written in the secrets file, in the adapter's declared encoding: Ed25519 as
/// 32 raw bytes, P-256 as a SEC1 point, or either as a DER SubjectPublicKeyInfo (PEM armour
/// accepted).
pub fn decode_public_key(value: &str, encoding: PublicKeyEncoding) -> Option<PublicKey> {
    use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD};
    use ed25519_dalek::pkcs8::DecodePublicKey as _;
    let b64 = |s: &str| {
        STANDARD
            .decode(s)
            .or_else(|_| STANDARD_NO_PAD.decode(s))
            .ok()
    };
    let raw = |bytes: Vec<u8>| match bytes.len() {
        32 => ed25519_dalek::VerifyingKey::from_bytes(&bytes.try_into().ok()?)
            .ok()
            .map(PublicKey::Ed25519),
        33 | 65 => p256::ecdsa::VerifyingKey::from_sec1_bytes(&bytes)
            .ok()
            .map(PublicKey::P256),
        _ => None,
    };
    match encoding {
        PublicKeyEncoding::WhpkBase64 => {
            let bytes = b64(value.strip_prefix("whpk_")?)?;
            ed25519_dalek::VerifyingKey::from_bytes(&bytes.try_into().ok()?)
                .ok()
                .map(PublicKey::Ed25519)
        }
        PublicKeyEncoding::Hex => raw(hex::decode(value.trim()).ok()?),
        PublicKeyEncoding::Base64 => raw(b64(value.trim())?),
        PublicKeyEncoding::SpkiDerBase64 => {
            let armoured: String = value
                .lines()
                .filter(|l| !l.starts_with("-----"))
                .flat_map(|l| l.chars().filter(|c| !c.is_whitespace()))
                .collect();
            let der = b64(&armoured)?;
            ed25519_dalek::VerifyingKey::from_public_key_der(&der)
                .map(PublicKey::Ed25519)
                .ok()
                .or_else(|| {
                    p256::ecdsa::VerifyingKey::from_public_key_der(&der)
                        .ok()
                        .map(PublicKey::P256)
                })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn public_keys_in_every_declared_encoding() {
        use base64::engine::general_purpose::STANDARD;
        use ed25519_dalek::pkcs8::EncodePublicKey as _;
        let ed = ed25519_dalek::SigningKey::from_bytes(&[7; 32]).verifying_key();
        let p = p256::ecdsa::SigningKey::from_slice(&[9; 32])
            .unwrap()
            .verifying_key()
            .to_owned();
        let ed_der = STANDARD.encode(ed.to_public_key_der().unwrap().as_bytes());
        let p_der = STANDARD.encode(
            p256::pkcs8::EncodePublicKey::to_public_key_der(&p256::PublicKey::from(&p))
                .unwrap()
                .as_bytes(),
        );
        let p_sec1 = p.to_encoded_point(false);
        let cases = [
            (
                format!("whpk_{}", STANDARD.encode(ed.as_bytes())),
                PublicKeyEncoding::WhpkBase64,
                true,
            ),
            (hex::encode(ed.as_bytes()), PublicKeyEncoding::Hex, true),
            (
                STANDARD.encode(ed.as_bytes()),
                PublicKeyEncoding::Base64,
                true,
            ),
            (ed_der.clone(), PublicKeyEncoding::SpkiDerBase64, true),
            (
                hex::encode(p_sec1.as_bytes()),
                PublicKeyEncoding::Hex,
                false,
            ),
            (p_der.clone(), PublicKeyEncoding::SpkiDerBase64, false),
            (
                format!("-----BEGIN PUBLIC KEY-----\n{p_der}\n-----END PUBLIC KEY-----\n"),
                PublicKeyEncoding::SpkiDerBase64,
                false,
            ),
        ];
        for (text, encoding, is_ed) in cases {
            match decode_public_key(&text, encoding) {
                Some(PublicKey::Ed25519(k)) if is_ed => assert_eq!(k, ed),
                Some(PublicKey::P256(k)) if !is_ed => assert_eq!(k, p),
                other => panic!("{text} as {encoding:?}: {other:?}"),
            }
        }
        for (text, encoding) in [
            (
                STANDARD.encode(ed.as_bytes()),
                PublicKeyEncoding::WhpkBase64,
            ),
            ("whpk_AAAA".to_owned(), PublicKeyEncoding::WhpkBase64),
            (hex::encode([1u8; 31]), PublicKeyEncoding::Hex),
            (ed_der[4..].to_owned(), PublicKeyEncoding::SpkiDerBase64),
        ] {
            assert!(decode_public_key(&text, encoding).is_none(), "{text}");
        }
    }
}

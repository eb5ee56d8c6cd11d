//! The cryptography: HMACs, constant-time comparison, Ed25519 and ECDSA P-256 signatures.

use std::borrow::Cow;

use hmac::{Hmac, Mac};
use subtle::ConstantTimeEq;

use super::message::{Piece, materialize};
use crate::adapter::{Algorithm, MacAlgorithm};
use crate::ingest::secrets::PublicKey;

/// The hash an HMAC algorithm names; `None` for public keys and tokens.
pub(super) fn mac_algorithm(a: Algorithm) -> Option<MacAlgorithm> {
    match a {
        Algorithm::HmacSha256 => Some(MacAlgorithm::Sha256),
        Algorithm::HmacSha1 => Some(MacAlgorithm::Sha1),
        Algorithm::HmacSha512 => Some(MacAlgorithm::Sha512),
        _ => None,
    }
}

/// A computed MAC, kept on the stack (the longest, HMAC-SHA512, is 64 bytes).
pub(super) struct Digest {
    bytes: [u8; 64],
    len: usize,
}

impl std::ops::Deref for Digest {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

/// The MAC of a resolved message under `key`, with `url` where the message signs the URL.
pub(super) fn mac_of(
    algorithm: MacAlgorithm,
    key: &[u8],
    pieces: &[Piece<'_>],
    url: &str,
) -> Digest {
    fn run<M: Mac + hmac::digest::KeyInit>(key: &[u8], pieces: &[Piece<'_>], url: &str) -> Digest {
        let mut mac = <M as Mac>::new_from_slice(key).expect("HMAC takes keys of any length");
        for piece in pieces {
            match piece {
                // The body is fed by reference: the guest never copies it back.
                Piece::Bytes(bytes) => mac.update(bytes),
                Piece::Url => mac.update(url.as_bytes()),
            }
        }
        let out = mac.finalize().into_bytes();
        let mut digest = Digest {
            bytes: [0; 64],
            len: out.len(),
        };
        digest.bytes[..out.len()].copy_from_slice(&out);
        digest
    }
    match algorithm {
        MacAlgorithm::Sha256 => run::<Hmac<sha2::Sha256>>(key, pieces, url),
        MacAlgorithm::Sha1 => run::<Hmac<sha1::Sha1>>(key, pieces, url),
        MacAlgorithm::Sha512 => run::<Hmac<sha2::Sha512>>(key, pieces, url),
    }
}

/// The HMAC-SHA256 of `message` under `key`, lowercase hex (Zoom's `encryptedToken`).
pub fn hmac_sha256_hex(key: &[u8], message: &[u8]) -> String {
    hex::encode(&*mac_of(
        MacAlgorithm::Sha256,
        key,
        &[Piece::Bytes(Cow::Borrowed(message))],
        "",
    ))
}

/// Constant-time equality that never matches on a length difference (an empty candidate or
/// a truncated one fails like any other wrong signature).
pub(super) fn same(expected: &[u8], candidate: &[u8]) -> bool {
    expected.len() == candidate.len() && bool::from(expected.ct_eq(candidate))
}

/// A public-key check's message in one URL form, prepared once for every candidate and key:
/// the bytes themselves for Ed25519, which hashes them after each signature's `R` and so
/// cannot share the work, or their SHA-256 for ECDSA, which signs the digest.
pub(super) enum Signed {
    Message(Vec<u8>),
    Sha256([u8; 32]),
}

/// The message in each URL form, as `algorithm` verifies it.
pub(super) fn signed_forms(
    algorithm: Algorithm,
    pieces: &[Piece<'_>],
    forms: &[Cow<'_, str>],
) -> Vec<Signed> {
    use sha2::Digest as _;
    forms
        .iter()
        .map(|url| match algorithm {
            Algorithm::EcdsaP256Sha256 => {
                let mut digest = sha2::Sha256::new();
                for piece in pieces {
                    match piece {
                        Piece::Bytes(bytes) => digest.update(bytes),
                        Piece::Url => digest.update(url.as_bytes()),
                    }
                }
                Signed::Sha256(digest.finalize().into())
            }
            _ => Signed::Message(materialize(pieces, url)),
        })
        .collect()
}

/// Whether any candidate verifies under `key` for any form of the message.
pub(super) fn public_key_verifies(key: &PublicKey, forms: &[Signed], sigs: &[Vec<u8>]) -> bool {
    forms.iter().any(|signed| {
        sigs.iter().any(|sig| match (key, signed) {
            (PublicKey::Ed25519(k), Signed::Message(message)) => {
                ed25519_dalek::Signature::from_slice(sig)
                    .is_ok_and(|s| k.verify_strict(message, &s).is_ok())
            }
            (PublicKey::P256(k), Signed::Sha256(digest)) => {
                use p256::ecdsa::signature::hazmat::PrehashVerifier as _;
                p256::ecdsa::Signature::from_der(sig)
                    .or_else(|_| p256::ecdsa::Signature::from_slice(sig))
                    .is_ok_and(|s| k.verify_prehash(digest, &s).is_ok())
            }
            _ => false,
        })
    })
}

#[cfg(test)]
mod tests {
    use crate::adapter::{Algorithm, Check, Part, Prepared};
    use crate::ingest::secrets::{KeySet, PublicKey, TrustedKey, TrustedPublicKey};
    use crate::ingest::verify::VerifyError;
    use crate::ingest::verify::test_kit::*;

    #[test]
    fn github_published_vector() {
        let sig = hex::decode("757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17")
            .unwrap();
        let prepared = one(hmac_check(vec![Part::RawBody], vec![sig]), None);
        let set = secrets(&[("old", b"nope"), ("cur", b"It's a Secret to Everybody")]);
        let passed = run(HMAC, &set, &prepared, &inputs(b"Hello, World!"), false).unwrap();
        assert_eq!(passed.version, "cur");
        assert_eq!(
            passed.secret.as_deref(),
            Some(&b"It's a Secret to Everybody"[..])
        );
        assert_eq!(
            run(HMAC, &set, &prepared, &inputs(b"Hello, World?"), false).unwrap_err(),
            VerifyError::NoMatch
        );
    }

    #[test]
    fn empty_and_truncated_signatures_never_match() {
        let set = secrets(&[("k", b"secret")]);
        let full = mac(b"secret", &[Part::RawBody], b"x");
        for sig in [vec![], full[..16].to_vec()] {
            let prepared = one(hmac_check(vec![Part::RawBody], vec![sig]), None);
            assert_eq!(
                run(HMAC, &set, &prepared, &inputs(b"x"), false).unwrap_err(),
                VerifyError::NoMatch
            );
        }
        let none = Prepared {
            checks: vec![],
            timestamp: None,
        };
        assert_eq!(
            run(HMAC, &set, &none, &inputs(b"x"), false).unwrap_err(),
            VerifyError::NoSignatures
        );
    }

    #[test]
    fn tokens_are_compared_whole() {
        let set = secrets(&[("t", b"glpat-token")]);
        let token = |candidate: &[u8]| Prepared {
            checks: vec![Check {
                algorithm: Algorithm::Token,
                key: None,
                message: vec![],
                signatures: vec![candidate.to_vec()],
                body_sha256_param: None,
            }],
            timestamp: None,
        };
        let declared = [Algorithm::Token];
        assert_eq!(
            run(
                &declared,
                &set,
                &token(b"glpat-token"),
                &inputs(b"{}"),
                false
            )
            .unwrap()
            .version,
            "t"
        );
        for wrong in [&b"glpat-toke"[..], b"glpat-tokenX", b"", b"GLPAT-TOKEN"] {
            assert_eq!(
                run(&declared, &set, &token(wrong), &inputs(b"{}"), false).unwrap_err(),
                VerifyError::NoMatch
            );
        }
    }

    #[test]
    fn ed25519_and_p256_signatures_verify_with_public_keys_only() {
        use ed25519_dalek::Signer as _;
        let body = b"{\"type\":1}";
        let ed = ed25519_dalek::SigningKey::from_bytes(&[3; 32]);
        let ed_sig = ed
            .sign(&[&b"1700000000"[..], body].concat())
            .to_bytes()
            .to_vec();
        let ecdsa = p256::ecdsa::SigningKey::from_slice(&[5; 32]).unwrap();
        let message = [&b"1700000000"[..], body].concat();
        let p_sig: p256::ecdsa::Signature = p256::ecdsa::signature::Signer::sign(&ecdsa, &message);
        let set = KeySet {
            secrets: vec![TrustedKey {
                version: "hmac".into(),
                key: b"secret".to_vec(),
            }],
            public_keys: vec![
                TrustedPublicKey {
                    version: "ed".into(),
                    key: PublicKey::Ed25519(ed.verifying_key()),
                },
                TrustedPublicKey {
                    version: "p256".into(),
                    key: PublicKey::P256(*ecdsa.verifying_key()),
                },
            ],
        };
        let check = |algorithm, sig: Vec<u8>| Check {
            algorithm,
            key: None,
            message: vec![Part::Literal(b"1700000000".to_vec()), Part::RawBody],
            signatures: vec![sig],
            body_sha256_param: None,
        };
        let declared = [Algorithm::Ed25519, Algorithm::EcdsaP256Sha256];
        let p = one(
            check(Algorithm::Ed25519, ed_sig.clone()),
            Some(1_700_000_000),
        );
        assert_eq!(
            run(&declared, &set, &p, &inputs(body), true)
                .unwrap()
                .version,
            "ed"
        );
        let der = p_sig.to_der().as_bytes().to_vec();
        let p = one(check(Algorithm::EcdsaP256Sha256, der), Some(1_700_000_000));
        let passed = run(&declared, &set, &p, &inputs(body), true).unwrap();
        assert_eq!((passed.version.as_str(), passed.secret), ("p256", None));
        let fixed = p_sig.to_bytes().to_vec();
        let p = one(check(Algorithm::EcdsaP256Sha256, fixed), None);
        assert!(run(&declared, &set, &p, &inputs(body), false).is_ok());
        // A changed body byte, a signature of the other algorithm, a wrong key.
        let p = one(check(Algorithm::Ed25519, ed_sig.clone()), None);
        assert_eq!(
            run(&declared, &set, &p, &inputs(b"{\"type\":2}"), false).unwrap_err(),
            VerifyError::NoMatch
        );
        let other = KeySet {
            secrets: vec![],
            public_keys: vec![TrustedPublicKey {
                version: "other".into(),
                key: PublicKey::Ed25519(
                    ed25519_dalek::SigningKey::from_bytes(&[4; 32]).verifying_key(),
                ),
            }],
        };
        assert_eq!(
            run(&declared, &other, &p, &inputs(body), false).unwrap_err(),
            VerifyError::NoMatch
        );
        // An endpoint with only a P-256 key cannot verify an Ed25519 check at all.
        let p256_only = KeySet {
            secrets: vec![],
            public_keys: vec![TrustedPublicKey {
                version: "p".into(),
                key: PublicKey::P256(*ecdsa.verifying_key()),
            }],
        };
        assert_eq!(
            run(&declared, &p256_only, &p, &inputs(body), false).unwrap_err(),
            VerifyError::NoApplicableKey
        );
    }
}

//! Signature verification and freshness, in the host and never in the guest.
//!
//! The adapter says which bytes are signed and which signatures the request carries; this
//! module computes the MAC under every trusted secret version and compares in constant time
//! with an explicit length check.

use hmac::{Hmac, Mac};
use subtle::ConstantTimeEq;

use crate::secrets::TrustedKey;
use crate::wasm::{Part, Prepared};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MacAlgorithm {
    Sha256,
    Sha1,
    Sha512,
}

/// Why a request is not authentic. Both are answered 401.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    #[error("no signature matched any trusted secret version")]
    NoMatch,
    #[error("the adapter found no signature to check")]
    NoSignatures,
    #[error("signed timestamp missing")]
    MissingTimestamp,
    #[error("signed timestamp is {0} s old, beyond the tolerance")]
    TooOld(i64),
    #[error("signed timestamp is {0} s in the future, beyond the tolerance")]
    TooNew(i64),
}

fn mac_of(algorithm: MacAlgorithm, key: &[u8], message: &[Part], body: &[u8]) -> Vec<u8> {
    fn run<M: Mac + hmac::digest::KeyInit>(key: &[u8], message: &[Part], body: &[u8]) -> Vec<u8> {
        let mut mac = <M as Mac>::new_from_slice(key).expect("HMAC takes keys of any length");
        for part in message {
            match part {
                Part::Literal(bytes) => mac.update(bytes),
                // The body is fed by reference: the guest never copies it back.
                Part::RawBody => mac.update(body),
            }
        }
        mac.finalize().into_bytes().to_vec()
    }
    match algorithm {
        MacAlgorithm::Sha256 => run::<Hmac<sha2::Sha256>>(key, message, body),
        MacAlgorithm::Sha1 => run::<Hmac<sha1::Sha1>>(key, message, body),
        MacAlgorithm::Sha512 => run::<Hmac<sha2::Sha512>>(key, message, body),
    }
}

/// Constant-time equality that never matches on a length difference (an empty candidate or
/// a truncated one fails like any other wrong signature).
fn same(expected: &[u8], candidate: &[u8]) -> bool {
    expected.len() == candidate.len() && bool::from(expected.ct_eq(candidate))
}

/// Tries every trusted key, newest first; every check must pass under the same key. Returns
/// the matching key's version.
pub fn verify<'k>(
    algorithm: MacAlgorithm,
    keys: &'k [TrustedKey],
    prepared: &Prepared,
    body: &[u8],
) -> Result<&'k str, VerifyError> {
    if prepared.checks.is_empty() || prepared.checks.iter().any(|c| c.signatures.is_empty()) {
        return Err(VerifyError::NoSignatures);
    }
    keys.iter()
        .find(|key| {
            prepared.checks.iter().all(|check| {
                let expected = mac_of(algorithm, &key.key, &check.message, body);
                // Compare against every candidate without stopping early, so the time taken
                // does not say which candidate was close.
                check
                    .signatures
                    .iter()
                    .fold(false, |ok, sig| ok | same(&expected, sig))
            })
        })
        .map(|key| key.version.as_str())
        .ok_or(VerifyError::NoMatch)
}

/// Checks a signed Unix timestamp against separate past and future tolerances.
pub fn check_freshness(
    timestamp: Option<i64>,
    now: i64,
    past_secs: u64,
    future_secs: u64,
) -> Result<(), VerifyError> {
    let ts = timestamp.ok_or(VerifyError::MissingTimestamp)?;
    let age = now.saturating_sub(ts);
    if age > 0 && age as u64 > past_secs {
        return Err(VerifyError::TooOld(age));
    }
    if age < 0 && age.unsigned_abs() > future_secs {
        return Err(VerifyError::TooNew(-age));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wasm::Check;

    fn key(v: &str, k: &[u8]) -> TrustedKey {
        TrustedKey {
            version: v.into(),
            key: k.to_vec(),
        }
    }

    #[test]
    fn github_published_vector() {
        let sig = hex::decode("757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17")
            .unwrap();
        let prepared = Prepared {
            checks: vec![Check {
                message: vec![Part::RawBody],
                signatures: vec![sig],
            }],
            timestamp: None,
        };
        let keys = [
            key("old", b"nope"),
            key("cur", b"It's a Secret to Everybody"),
        ];
        assert_eq!(
            verify(MacAlgorithm::Sha256, &keys, &prepared, b"Hello, World!"),
            Ok("cur")
        );
        assert_eq!(
            verify(MacAlgorithm::Sha256, &keys, &prepared, b"Hello, World?"),
            Err(VerifyError::NoMatch)
        );
    }

    #[test]
    fn empty_and_truncated_signatures_never_match() {
        let keys = [key("k", b"secret")];
        let full = mac_of(MacAlgorithm::Sha256, b"secret", &[Part::RawBody], b"x");
        for sig in [vec![], full[..16].to_vec()] {
            let prepared = Prepared {
                checks: vec![Check {
                    message: vec![Part::RawBody],
                    signatures: vec![sig],
                }],
                timestamp: None,
            };
            assert_eq!(
                verify(MacAlgorithm::Sha256, &keys, &prepared, b"x"),
                Err(VerifyError::NoMatch)
            );
        }
        let none = Prepared {
            checks: vec![],
            timestamp: None,
        };
        assert_eq!(
            verify(MacAlgorithm::Sha256, &keys, &none, b"x"),
            Err(VerifyError::NoSignatures)
        );
    }

    #[test]
    fn freshness_bounds_are_separate_and_inclusive() {
        assert!(check_freshness(Some(1000), 1300, 300, 5).is_ok());
        assert_eq!(
            check_freshness(Some(1000), 1301, 300, 5),
            Err(VerifyError::TooOld(301))
        );
        assert!(check_freshness(Some(1005), 1000, 300, 5).is_ok());
        assert_eq!(
            check_freshness(Some(1006), 1000, 300, 5),
            Err(VerifyError::TooNew(6))
        );
        assert_eq!(
            check_freshness(None, 1000, 300, 5),
            Err(VerifyError::MissingTimestamp)
        );
    }
}

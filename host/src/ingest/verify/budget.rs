//! What a request's candidate signatures may cost: their count and length, and the public-key
//! work they ask for. Candidates come from the request (a header of 17 `v1=` entries, a token
//! of 513 bytes), so past a bound the request is refused (401), never blamed on the adapter.
//!
//! An HMAC is computed once per key version and URL form whatever the candidates, and
//! `contract::validate` bounds its bytes. A public-key signature is checked per candidate: an
//! ECDSA P-256 message is hashed once per URL form (SHA-256, then each candidate is verified
//! against that digest), but Ed25519 hashes the signature's `R` and the key before the message,
//! so it cannot be prehashed and each candidate under each key hashes the whole message again.

use super::contract::{
    Inputs, MAX_PUBLIC_KEY_VERIFICATIONS, MAX_SIGNATURE_BYTES, MAX_SIGNATURES, hash_budget,
};
use super::outcome::VerifyError;
use crate::adapter::{Algorithm, Part, Prepared};
use crate::ingest::secrets::{KeySet, PublicKey};

/// The most bytes one request's public-key checks may hash: twice what one HMAC key may
/// (`hash_budget`), so two key versions times four candidates over a body-sized message fit
/// (a rotation with every candidate Svix sends), and sixteen Ed25519 candidates over four
/// copies of a 4 MiB body (256 MiB to hash) do not.
pub fn public_key_byte_budget(body_len: usize) -> usize {
    hash_budget(body_len).saturating_mul(2)
}

/// Refuses a request whose candidates are too many or too long for any check, or whose
/// public-key checks would cost more than `MAX_PUBLIC_KEY_VERIFICATIONS` verifications or
/// `public_key_byte_budget` bytes hashed under the endpoint's keys.
pub(super) fn check_candidates<'k>(
    prepared: &Prepared,
    keys: &dyn Fn(Option<&str>) -> &'k KeySet,
    inputs: &Inputs<'_>,
) -> Result<(), VerifyError> {
    let (mut verifications, mut bytes) = (0usize, 0usize);
    for (i, check) in prepared.checks.iter().enumerate() {
        if check.signatures.len() > MAX_SIGNATURES {
            return Err(VerifyError::TooManyCandidates {
                check: i,
                count: check.signatures.len(),
            });
        }
        if let Some(long) = check
            .signatures
            .iter()
            .find(|s| s.len() > MAX_SIGNATURE_BYTES)
        {
            return Err(VerifyError::CandidateTooLong {
                check: i,
                bytes: long.len(),
            });
        }
        if !matches!(
            check.algorithm,
            Algorithm::Ed25519 | Algorithm::EcdsaP256Sha256
        ) {
            continue;
        }
        let forms = if check.message.iter().any(|p| matches!(p, Part::Url)) {
            2
        } else {
            1
        };
        // Only the keys of the check's kind are tried (an Ed25519 check skips P-256 keys).
        let usable = keys(check.key.as_deref())
            .public_keys
            .iter()
            .filter(|k| {
                matches!(
                    (&k.key, check.algorithm),
                    (PublicKey::Ed25519(_), Algorithm::Ed25519)
                        | (PublicKey::P256(_), Algorithm::EcdsaP256Sha256)
                )
            })
            .count();
        let tries = check.signatures.len() * usable * forms;
        verifications += tries;
        let message = message_len(&check.message, inputs);
        bytes = bytes.saturating_add(match check.algorithm {
            // Hashed once per URL form, whatever the candidates and keys.
            Algorithm::EcdsaP256Sha256 => message.saturating_mul(forms),
            _ => message.saturating_mul(tries),
        });
    }
    if verifications > MAX_PUBLIC_KEY_VERIFICATIONS {
        return Err(VerifyError::PublicKeyBudget(verifications));
    }
    let max = public_key_byte_budget(inputs.body.len());
    if bytes > max {
        return Err(VerifyError::PublicKeyBytes { bytes, max });
    }
    Ok(())
}

/// The most bytes a message can resolve to (a form or a JSON string decodes shorter).
fn message_len(message: &[Part], inputs: &Inputs<'_>) -> usize {
    message
        .iter()
        .map(|p| match p {
            Part::Literal(bytes) => bytes.len(),
            Part::RawBody | Part::SortedFormParams => inputs.body.len(),
            Part::BodySpan(s) | Part::BodyJsonString(s) => s.end.saturating_sub(s.start) as usize,
            Part::Url => inputs.url.map_or(0, |u| u.len() + ":65535".len()),
        })
        .fold(0, usize::saturating_add)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adapter::Check;
    use crate::ingest::secrets::TrustedPublicKey;
    use crate::ingest::verify::test_kit::*;

    fn ed_keys(n: usize) -> KeySet {
        let ed = ed25519_dalek::SigningKey::from_bytes(&[1; 32]);
        KeySet {
            secrets: vec![],
            public_keys: (0..n)
                .map(|v| TrustedPublicKey {
                    version: v.to_string(),
                    key: PublicKey::Ed25519(ed.verifying_key()),
                })
                .collect(),
        }
    }

    fn public_key_check(algorithm: Algorithm, parts: usize, candidates: usize) -> Prepared {
        one(
            Check {
                algorithm,
                key: None,
                message: vec![Part::RawBody; parts],
                signatures: vec![vec![0; 64]; candidates],
                body_sha256_param: None,
            },
            None,
        )
    }

    #[test]
    fn candidates_past_the_bounds_are_the_requests_fault() {
        let set = secrets(&[("k", b"secret")]);
        let mut p = sig_check(vec![Part::RawBody], None);
        p.checks[0].signatures = vec![vec![1; 32]; MAX_SIGNATURES + 1];
        assert_eq!(
            run(HMAC, &set, &p, &inputs(b"x"), false).unwrap_err(),
            VerifyError::TooManyCandidates {
                check: 0,
                count: MAX_SIGNATURES + 1
            }
        );
        p.checks[0].signatures = vec![vec![1; MAX_SIGNATURE_BYTES + 1]];
        assert_eq!(
            run(HMAC, &set, &p, &inputs(b"x"), false).unwrap_err(),
            VerifyError::CandidateTooLong {
                check: 0,
                bytes: MAX_SIGNATURE_BYTES + 1
            }
        );
        // The adapter's description is judged first: it is not blamed on the request.
        p.checks[0].message = vec![Part::Literal(b"no body".to_vec())];
        assert!(matches!(
            run(HMAC, &set, &p, &inputs(b"x"), false).unwrap_err(),
            VerifyError::Contract(_)
        ));
    }

    #[test]
    fn public_key_work_is_counted_per_candidate_for_ed25519_and_once_for_ecdsa() {
        let body = vec![b'a'; 64 << 10];
        let declared = [Algorithm::Ed25519, Algorithm::EcdsaP256Sha256];
        let max = public_key_byte_budget(body.len());
        // Four copies of the body: one Ed25519 candidate fits, sixteen hash 16 x as much.
        let keys = ed_keys(1);
        let one_candidate = public_key_check(Algorithm::Ed25519, 4, 1);
        assert_eq!(
            check_candidates(&one_candidate, &|_| &keys, &inputs(&body)),
            Ok(())
        );
        let sixteen = public_key_check(Algorithm::Ed25519, 4, 16);
        assert_eq!(
            run(&declared, &keys, &sixteen, &inputs(&body), false).unwrap_err(),
            VerifyError::PublicKeyBytes {
                bytes: 16 * 4 * body.len(),
                max
            }
        );
        // Candidates times key versions count as much as candidates alone.
        let four_keys = ed_keys(4);
        let four = public_key_check(Algorithm::Ed25519, 4, 4);
        assert!(matches!(
            run(&declared, &four_keys, &four, &inputs(&body), false).unwrap_err(),
            VerifyError::PublicKeyBytes { .. }
        ));
        // ECDSA hashes the message once, whatever the candidates.
        let p256 = p256::ecdsa::SigningKey::from_slice(&[5; 32]).unwrap();
        let p256_keys = KeySet {
            secrets: vec![],
            public_keys: vec![TrustedPublicKey {
                version: "p".into(),
                key: PublicKey::P256(*p256.verifying_key()),
            }],
        };
        let ecdsa = public_key_check(Algorithm::EcdsaP256Sha256, 4, 16);
        assert_eq!(
            check_candidates(&ecdsa, &|_| &p256_keys, &inputs(&body)),
            Ok(())
        );
        // Keys of the other kind are never tried, so they cost nothing.
        assert_eq!(
            check_candidates(&sixteen, &|_| &p256_keys, &inputs(&body)),
            Ok(())
        );
    }
}

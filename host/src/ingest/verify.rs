//! Signature verification and freshness, in the host and never in the guest.
//!
//! The adapter says which bytes are signed and which signatures the request carries; this
//! module decides whether that description is acceptable at all (`validate`: every check
//! covers the raw body, a checked timestamp is inside the signed bytes, and the work asked of
//! the host is bounded), then computes the MAC under every trusted secret version and compares
//! in constant time with an explicit length check.

use std::borrow::Cow;

use hmac::{Hmac, Mac};
use memchr::memmem;
use subtle::ConstantTimeEq;

use super::secrets::TrustedKey;
use crate::adapter::{MacAlgorithm, Part, Prepared};

/// Checks in one `prepare` result (a batch signs each item separately).
pub const MAX_CHECKS: usize = 64;
/// Parts in one check's message.
pub const MAX_PARTS: usize = 64;
/// Candidate signatures in one check (Stripe sends several `v1` during a roll).
pub const MAX_SIGNATURES: usize = 16;
/// One candidate signature, decoded (an HMAC-SHA512 is 64; room for public-key schemes).
pub const MAX_SIGNATURE_BYTES: usize = 512;
/// Literal bytes over all checks.
pub const MAX_LITERAL_BYTES: usize = 64 << 10;
/// How many times, over all checks, the body may be hashed per trusted key.
pub const MAX_BODY_PASSES: usize = 4;

/// Why a request is not authentic. All but `Contract` are answered 401; `Contract` is the
/// adapter's fault (503 `adapter_unavailable`).
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
    #[error("adapter broke the verification contract: {0}")]
    Contract(#[from] ContractViolation),
}

/// A `prepare` result the host refuses to verify, whatever the signatures say.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ContractViolation {
    #[error("{0} checks (at most {MAX_CHECKS})")]
    TooManyChecks(usize),
    #[error("check {check} has {parts} parts (at most {MAX_PARTS})")]
    TooManyParts { check: usize, parts: usize },
    #[error("check {check} has {signatures} candidate signatures (at most {MAX_SIGNATURES})")]
    TooManySignatures { check: usize, signatures: usize },
    #[error("check {check} has a {bytes}-byte candidate signature (at most {MAX_SIGNATURE_BYTES})")]
    SignatureTooLong { check: usize, bytes: usize },
    #[error("{0} literal bytes (at most {MAX_LITERAL_BYTES})")]
    TooManyLiteralBytes(usize),
    #[error("{bytes} bytes to hash per key (at most {max})")]
    HashBudget { bytes: usize, max: usize },
    #[error("check {0} does not cover the raw body")]
    BodyNotCovered(usize),
    #[error("check {0} does not sign the timestamp whose freshness is checked")]
    TimestampNotSigned(usize),
}

/// The most bytes one key's MACs may hash for a body of `body_len` bytes.
pub fn hash_budget(body_len: usize) -> usize {
    body_len.saturating_mul(MAX_BODY_PASSES) + MAX_LITERAL_BYTES
}

/// What "verified" means, enforced on the adapter's description before any MAC is computed:
/// bounded work, every check's message includes the raw body, and when freshness is checked
/// the timestamp's decimal text lies inside the literal bytes of every check (so the freshness
/// that is checked is the freshness that is signed). Returns the bytes hashed per key.
///
/// Per-item batch schemes that sign fields rather than the whole body will be declared
/// explicitly in WIT 0.2 (checks over declared body ranges); WIT 0.1 has no such form, so
/// here every check covers the whole body.
pub fn validate(
    prepared: &Prepared,
    body_len: usize,
    freshness_checked: bool,
) -> Result<usize, ContractViolation> {
    let checks = &prepared.checks;
    if checks.len() > MAX_CHECKS {
        return Err(ContractViolation::TooManyChecks(checks.len()));
    }
    let (mut literal_bytes, mut body_passes) = (0usize, 0usize);
    for (i, check) in checks.iter().enumerate() {
        if check.message.len() > MAX_PARTS {
            return Err(ContractViolation::TooManyParts {
                check: i,
                parts: check.message.len(),
            });
        }
        if check.signatures.len() > MAX_SIGNATURES {
            return Err(ContractViolation::TooManySignatures {
                check: i,
                signatures: check.signatures.len(),
            });
        }
        if let Some(sig) = check
            .signatures
            .iter()
            .find(|s| s.len() > MAX_SIGNATURE_BYTES)
        {
            return Err(ContractViolation::SignatureTooLong {
                check: i,
                bytes: sig.len(),
            });
        }
        for part in &check.message {
            match part {
                Part::Literal(bytes) => literal_bytes += bytes.len(),
                Part::RawBody => body_passes += 1,
            }
        }
        if !check.message.iter().any(|p| matches!(p, Part::RawBody)) {
            return Err(ContractViolation::BodyNotCovered(i));
        }
    }
    if literal_bytes > MAX_LITERAL_BYTES {
        return Err(ContractViolation::TooManyLiteralBytes(literal_bytes));
    }
    let bytes = body_passes.saturating_mul(body_len) + literal_bytes;
    let max = hash_budget(body_len);
    if bytes > max {
        return Err(ContractViolation::HashBudget { bytes, max });
    }
    if let (true, Some(ts)) = (freshness_checked, prepared.timestamp) {
        let mut buf = [0u8; 20];
        let decimal = decimal(ts, &mut buf);
        if let Some(i) = checks.iter().position(|c| {
            !literal_runs(&c.message).any(|run| memmem::find(&run, decimal).is_some())
        }) {
            return Err(ContractViolation::TimestampNotSigned(i));
        }
    }
    Ok(bytes)
}

/// The decimal text of `n`, written into `buf` (20 bytes hold any `i64`).
fn decimal(n: i64, buf: &mut [u8; 20]) -> &[u8] {
    use std::io::Write;
    let mut rest = &mut buf[..];
    write!(rest, "{n}").expect("20 bytes hold any i64");
    let len = 20 - rest.len();
    &buf[..len]
}

/// The message's maximal runs of adjacent literals: each is contiguous in the signed bytes,
/// unlike literals on either side of the body. A run of one literal is borrowed, not copied.
fn literal_runs(message: &[Part]) -> impl Iterator<Item = Cow<'_, [u8]>> + '_ {
    message
        .split(|p| matches!(p, Part::RawBody))
        .map(|run| match run {
            [] => Cow::Borrowed(&[][..]),
            [Part::Literal(bytes)] => Cow::Borrowed(bytes.as_slice()),
            run => Cow::Owned(
                run.iter()
                    .flat_map(|p| match p {
                        Part::Literal(bytes) => bytes.as_slice(),
                        Part::RawBody => &[],
                    })
                    .copied()
                    .collect(),
            ),
        })
}

/// A computed MAC, kept on the stack (the longest, HMAC-SHA512, is 64 bytes).
struct Digest {
    bytes: [u8; 64],
    len: usize,
}

impl std::ops::Deref for Digest {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

fn mac_of(algorithm: MacAlgorithm, key: &[u8], message: &[Part], body: &[u8]) -> Digest {
    fn run<M: Mac + hmac::digest::KeyInit>(key: &[u8], message: &[Part], body: &[u8]) -> Digest {
        let mut mac = <M as Mac>::new_from_slice(key).expect("HMAC takes keys of any length");
        for part in message {
            match part {
                Part::Literal(bytes) => mac.update(bytes),
                // The body is fed by reference: the guest never copies it back.
                Part::RawBody => mac.update(body),
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
/// `validate` runs first, so no MAC is computed for a description the host refuses.
pub fn verify<'k>(
    algorithm: MacAlgorithm,
    keys: &'k [TrustedKey],
    prepared: &Prepared,
    body: &[u8],
    freshness_checked: bool,
) -> Result<&'k str, VerifyError> {
    if prepared.checks.is_empty() || prepared.checks.iter().any(|c| c.signatures.is_empty()) {
        return Err(VerifyError::NoSignatures);
    }
    validate(prepared, body.len(), freshness_checked)?;
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
    use crate::adapter::Check;

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
            verify(
                MacAlgorithm::Sha256,
                &keys,
                &prepared,
                b"Hello, World!",
                false
            ),
            Ok("cur")
        );
        assert_eq!(
            verify(
                MacAlgorithm::Sha256,
                &keys,
                &prepared,
                b"Hello, World?",
                false
            ),
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
                verify(MacAlgorithm::Sha256, &keys, &prepared, b"x", false),
                Err(VerifyError::NoMatch)
            );
        }
        let none = Prepared {
            checks: vec![],
            timestamp: None,
        };
        assert_eq!(
            verify(MacAlgorithm::Sha256, &keys, &none, b"x", false),
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

    fn one_check(message: Vec<Part>, ts: Option<i64>) -> Prepared {
        Prepared {
            checks: vec![Check {
                message,
                signatures: vec![vec![0; 32]],
            }],
            timestamp: ts,
        }
    }

    #[test]
    fn a_check_that_does_not_cover_the_body_is_refused_before_any_mac() {
        let keys = [key("k", b"secret")];
        let message = vec![Part::Literal(b"1700000000.wharf".to_vec())];
        let sig = mac_of(MacAlgorithm::Sha256, b"secret", &message, b"anything").to_vec();
        let mut prepared = one_check(message, Some(1_700_000_000));
        prepared.checks[0].signatures = vec![sig];
        assert_eq!(
            verify(MacAlgorithm::Sha256, &keys, &prepared, b"anything", true),
            Err(VerifyError::Contract(ContractViolation::BodyNotCovered(0)))
        );
    }

    #[test]
    fn a_checked_timestamp_must_be_inside_one_run_of_literals() {
        let ts = Some(1_700_000_000);
        let signed = one_check(
            vec![Part::Literal(b"v0:1700000000:".to_vec()), Part::RawBody],
            ts,
        );
        assert!(validate(&signed, 10, true).is_ok());
        // Split by literals that are adjacent in the signed bytes: still signed.
        let adjacent = one_check(
            vec![
                Part::Literal(b"17000".to_vec()),
                Part::Literal(b"00000.".to_vec()),
                Part::RawBody,
            ],
            ts,
        );
        assert!(validate(&adjacent, 10, true).is_ok());
        // The digits on both sides of the body are not the timestamp that was signed.
        let straddling = one_check(
            vec![
                Part::Literal(b"17000".to_vec()),
                Part::RawBody,
                Part::Literal(b"00000".to_vec()),
            ],
            ts,
        );
        assert_eq!(
            validate(&straddling, 10, true),
            Err(ContractViolation::TimestampNotSigned(0))
        );
        let unsigned = one_check(vec![Part::Literal(b"wharf.".to_vec()), Part::RawBody], ts);
        assert_eq!(
            validate(&unsigned, 10, true),
            Err(ContractViolation::TimestampNotSigned(0))
        );
        // No freshness check (GitHub): nothing to sign.
        assert!(validate(&unsigned, 10, false).is_ok());
    }

    #[test]
    fn timestamps_are_matched_by_their_decimal_text() {
        let mut buf = [0; 20];
        assert_eq!(decimal(0, &mut buf), b"0");
        assert_eq!(decimal(1_700_000_000, &mut buf), b"1700000000");
        assert_eq!(decimal(i64::MIN, &mut buf), b"-9223372036854775808");
        assert_eq!(decimal(i64::MAX, &mut buf), b"9223372036854775807");
    }

    #[test]
    fn the_work_asked_of_the_host_is_bounded() {
        let many_bodies = one_check(vec![Part::RawBody; 5], None);
        assert_eq!(
            validate(&many_bodies, 100_000, false),
            Err(ContractViolation::HashBudget {
                bytes: 500_000,
                max: hash_budget(100_000)
            })
        );
        assert_eq!(validate(&many_bodies, 10_000, false), Ok(50_000));
        // An empty body costs nothing to hash, but parts are still counted.
        let parts = one_check(vec![Part::RawBody; MAX_PARTS + 1], None);
        assert_eq!(
            validate(&parts, 0, false),
            Err(ContractViolation::TooManyParts {
                check: 0,
                parts: MAX_PARTS + 1
            })
        );
        let mut checks = one_check(vec![Part::RawBody], None);
        checks.checks = vec![checks.checks[0].clone(); MAX_CHECKS + 1];
        assert_eq!(
            validate(&checks, 1, false),
            Err(ContractViolation::TooManyChecks(MAX_CHECKS + 1))
        );
        let mut sigs = one_check(vec![Part::RawBody], None);
        sigs.checks[0].signatures = vec![vec![1; 32]; MAX_SIGNATURES + 1];
        assert!(matches!(
            validate(&sigs, 1, false),
            Err(ContractViolation::TooManySignatures { .. })
        ));
        sigs.checks[0].signatures = vec![vec![1; MAX_SIGNATURE_BYTES + 1]];
        assert!(matches!(
            validate(&sigs, 1, false),
            Err(ContractViolation::SignatureTooLong { .. })
        ));
        let literal = one_check(
            vec![
                Part::Literal(vec![b'x'; MAX_LITERAL_BYTES + 1]),
                Part::RawBody,
            ],
            None,
        );
        assert_eq!(
            validate(&literal, 1, false),
            Err(ContractViolation::TooManyLiteralBytes(
                MAX_LITERAL_BYTES + 1
            ))
        );
    }

    mod properties {
        use super::*;
        use proptest::collection::vec;
        use proptest::prelude::*;

        fn part() -> impl Strategy<Value = Part> {
            prop_oneof![
                vec(any::<u8>(), 0..24).prop_map(Part::Literal),
                Just(Part::RawBody),
                // The decimal text of a timestamp the strategy below may pick.
                Just(Part::Literal(b"1700000000.".to_vec())),
            ]
        }

        /// Arbitrary results, sometimes past every bound; `sign` replaces the candidates with
        /// the right MACs so that some of them verify.
        fn prepared() -> impl Strategy<Value = (Prepared, bool)> {
            let check = (
                prop_oneof![vec(part(), 0..6), vec(part(), 60..70)],
                vec(vec(any::<u8>(), 0..40), 0..3),
            )
                .prop_map(|(message, signatures)| Check {
                    message,
                    signatures,
                });
            (
                prop_oneof![vec(check.clone(), 0..4), vec(check, 62..66)],
                prop_oneof![
                    Just(None),
                    Just(Some(1_700_000_000i64)),
                    any::<Option<i64>>()
                ],
                any::<bool>(),
            )
                .prop_map(|(checks, timestamp, sign)| (Prepared { checks, timestamp }, sign))
        }

        proptest! {
            #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

            #[test]
            fn arbitrary_results_never_panic_stay_in_budget_and_never_verify_without_the_body(
                (mut prepared, sign) in prepared(),
                body in vec(any::<u8>(), 0..64),
                freshness in any::<bool>(),
            ) {
                let keys = [key("k", b"secret")];
                if sign {
                    for check in &mut prepared.checks {
                        check.signatures =
                            vec![mac_of(MacAlgorithm::Sha256, b"secret", &check.message, &body).to_vec()];
                    }
                }
                if let Ok(bytes) = validate(&prepared, body.len(), freshness) {
                    prop_assert!(bytes <= hash_budget(body.len()));
                }
                if verify(MacAlgorithm::Sha256, &keys, &prepared, &body, freshness).is_ok() {
                    for check in &prepared.checks {
                        prop_assert!(check.message.iter().any(|p| matches!(p, Part::RawBody)));
                    }
                    // Covering the body means any change to it fails.
                    if let Some(first) = body.first() {
                        let mut changed = body.clone();
                        changed[0] = first ^ 1;
                        prop_assert!(
                            verify(MacAlgorithm::Sha256, &keys, &prepared, &changed, freshness)
                                .is_err()
                        );
                    }
                    if let (true, Some(ts)) = (freshness, prepared.timestamp) {
                        let decimal = ts.to_string();
                        for check in &prepared.checks {
                            let signed = literal_runs(&check.message)
                                .any(|run| memmem::find(&run, decimal.as_bytes()).is_some());
                            prop_assert!(signed);
                        }
                    }
                }
            }
        }
    }
}

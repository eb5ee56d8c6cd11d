//! Signature verification and freshness, in the host and never in the guest.
//!
//! The adapter says which bytes are signed and which signatures the request carries; this
//! module decides whether that description is acceptable at all (`validate`: each check names
//! an algorithm the adapter declared, covers the body in a declared form, a checked timestamp
//! is a whole run of digits inside the signed bytes, and the work asked of the host is
//! bounded), then verifies each
//! check under every trusted version of the key it names: HMACs compared in constant time with
//! an explicit length check, Ed25519 and ECDSA P-256 signatures verified, shared tokens
//! compared in constant time.
//!
//! How a check covers the body (one of these, or it is refused before any key is touched):
//! - whole: `raw-body` or `sorted-form-params` in the message, or `url` with
//!   `body-sha256-param` (the signed URL carries the body's digest, which the host checks);
//! - items (batches signed per item): non-empty body slices, first and last, joined by runs of
//!   literals of at most 8 bytes. Then every event must name the check that signs it, lie
//!   around its slices and over no other item check's slice (`check_items`).
//! - A `token` check signs nothing; it authenticates the sender only (GitLab, Meta's GET).
//!
//! A handshake's MAC answer (`answer_mac`) is computed only under the secret of a check that
//! signs the body's exact bytes with a checked, signed timestamp, and only over a run or JSON
//! string of that body: otherwise the host would sign whatever an adapter hands it.
//!
//! Files:
//! - `contract`: `validate`, the bounds and `ContractViolation`
//! - `budget`: what a request's candidates may cost (count, length, public-key work)
//! - `message`: a check's parts resolved against the request (form parameters, URL forms)
//! - `crypto`: MACs, constant-time comparison, public-key signatures
//! - `outcome`: `Passed` and `VerifyError`
//! - `items`: `check_items`, events of a batch signed per item
//! - `freshness`: `check_freshness`
//! - `answer`: `answer_mac`, the one MAC a handshake may ask of the host
//! - here: `verify`, the loop over checks and key versions

mod answer;
mod budget;
mod contract;
mod crypto;
mod freshness;
mod items;
mod message;
mod outcome;

use std::borrow::Cow;

pub use answer::answer_mac;
use budget::check_candidates;
pub use contract::{
    ContractViolation, Coverage, Inputs, MAX_BODY_PASSES, MAX_CHECKS, MAX_LITERAL_BYTES, MAX_PARTS,
    MAX_SIGNATURE_BYTES, MAX_SIGNATURES, hash_budget, validate,
};
use crypto::{mac_algorithm, mac_of, public_key_verifies, same, signed_forms};
pub use freshness::check_freshness;
pub use items::check_items;
use message::{resolve, url_forms};
pub use outcome::{Passed, VerifyError};

use super::secrets::{KeySet, PublicKey};
use crate::adapter::{Algorithm, Part, Prepared};

/// Verifies every check that applies to the endpoint's keys (`keys(slot)` gives the key set
/// a check's `key` names); at least one must apply. `validate` runs first, so no key is used
/// for a description the host refuses.
pub fn verify<'k>(
    declared: &[Algorithm],
    keys: &dyn Fn(Option<&str>) -> &'k KeySet,
    prepared: &Prepared,
    inputs: &Inputs<'_>,
    freshness_checked: bool,
) -> Result<Passed, VerifyError> {
    if prepared.checks.is_empty() || prepared.checks.iter().any(|c| c.signatures.is_empty()) {
        return Err(VerifyError::NoSignatures);
    }
    let coverage = validate(prepared, declared, inputs, freshness_checked)?;
    check_candidates(prepared, keys, inputs)?;
    let url_forms_of_request = inputs.url.map(url_forms).unwrap_or_default();
    let no_url = [Cow::Borrowed("")];
    let mut passed: Option<(String, Option<Vec<u8>>)> = None;
    let mut applied = vec![false; prepared.checks.len()];
    for (i, check) in prepared.checks.iter().enumerate() {
        let set = keys(check.key.as_deref());
        // Only a check that signs the URL is tried with each of its forms.
        let forms: &[Cow<'_, str>] = if check.message.iter().any(|p| matches!(p, Part::Url)) {
            &url_forms_of_request
        } else {
            &no_url
        };
        // Resolved only for a check that applies, and once.
        let pieces = || {
            resolve(
                i,
                &check.message,
                check.body_sha256_param.as_deref(),
                inputs,
            )
        };
        // Every candidate is compared, so the time taken does not say which one was close.
        let any_candidate = |expected: &[u8]| {
            check
                .signatures
                .iter()
                .fold(false, |ok, sig| ok | same(expected, sig))
        };
        let matched: Option<(&str, Option<&[u8]>)> = match check.algorithm {
            Algorithm::Token => {
                if set.secrets.is_empty() {
                    continue;
                }
                set.secrets
                    .iter()
                    .find(|k| any_candidate(&k.key))
                    .map(|k| (k.version.as_str(), Some(k.key.as_slice())))
            }
            a @ (Algorithm::HmacSha256 | Algorithm::HmacSha1 | Algorithm::HmacSha512) => {
                if set.secrets.is_empty() {
                    continue;
                }
                let mac = mac_algorithm(a).expect("an HMAC algorithm");
                let pieces = pieces()?;
                pieces.and_then(|pieces| {
                    set.secrets
                        .iter()
                        .find(|k| {
                            forms
                                .iter()
                                .any(|url| any_candidate(&mac_of(mac, &k.key, &pieces, url)))
                        })
                        .map(|k| (k.version.as_str(), Some(k.key.as_slice())))
                })
            }
            a @ (Algorithm::Ed25519 | Algorithm::EcdsaP256Sha256) => {
                let usable: Vec<_> = set
                    .public_keys
                    .iter()
                    .filter(|k| {
                        matches!(
                            (&k.key, a),
                            (PublicKey::Ed25519(_), Algorithm::Ed25519)
                                | (PublicKey::P256(_), Algorithm::EcdsaP256Sha256)
                        )
                    })
                    .collect();
                if usable.is_empty() {
                    continue;
                }
                let pieces = pieces()?;
                pieces.and_then(|pieces| {
                    // Built (or hashed) once for every key and candidate.
                    let signed = signed_forms(a, &pieces, forms);
                    usable
                        .into_iter()
                        .find(|k| public_key_verifies(&k.key, &signed, &check.signatures))
                        .map(|k| (k.version.as_str(), None))
                })
            }
        };
        let Some((version, secret)) = matched else {
            return Err(VerifyError::NoMatch);
        };
        applied[i] = true;
        passed.get_or_insert_with(|| (version.to_owned(), secret.map(<[u8]>::to_vec)));
    }
    let (version, secret) = passed.ok_or(VerifyError::NoApplicableKey)?;
    Ok(Passed {
        version,
        secret,
        coverage,
        applied,
    })
}

#[cfg(test)]
mod properties;
#[cfg(test)]
mod test_kit;

#[cfg(test)]
mod tests {
    use memchr::memmem;

    use super::contract::{MAX_SEPARATOR_BYTES, literal_runs};
    use super::test_kit::*;
    use super::*;
    use crate::adapter::{Check, MacAlgorithm, Span};
    use crate::ingest::secrets::{PublicKey, TrustedPublicKey};

    #[test]
    fn the_endpoint_keys_decide_which_offered_check_is_verified() {
        // Standard Webhooks offers v1 (HMAC) and v1a (Ed25519) side by side.
        let body = b"{}";
        let hmac_sig = mac(b"secret", &[Part::RawBody], body);
        let checks = |ed_sig: Vec<u8>| Prepared {
            checks: vec![
                hmac_check(vec![Part::RawBody], vec![hmac_sig.clone()]),
                Check {
                    algorithm: Algorithm::Ed25519,
                    key: None,
                    message: vec![Part::RawBody],
                    signatures: vec![ed_sig],
                    body_sha256_param: None,
                },
            ],
            timestamp: None,
        };
        let declared = [Algorithm::HmacSha256, Algorithm::Ed25519];
        let hmac_only = secrets(&[("h", b"secret")]);
        let passed = run(
            &declared,
            &hmac_only,
            &checks(vec![0; 64]),
            &inputs(body),
            false,
        )
        .unwrap();
        assert_eq!(passed.applied, [true, false]);
        let ed = ed25519_dalek::SigningKey::from_bytes(&[8; 32]);
        let with_ed = KeySet {
            secrets: hmac_only.secrets,
            public_keys: vec![TrustedPublicKey {
                version: "e".into(),
                key: PublicKey::Ed25519(ed.verifying_key()),
            }],
        };
        // Both apply now, so both must pass.
        assert_eq!(
            run(
                &declared,
                &with_ed,
                &checks(vec![0; 64]),
                &inputs(body),
                false
            )
            .unwrap_err(),
            VerifyError::NoMatch
        );
        use ed25519_dalek::Signer as _;
        let good = ed.sign(body).to_bytes().to_vec();
        assert!(run(&declared, &with_ed, &checks(good), &inputs(body), false).is_ok());
    }

    mod properties {
        use super::super::properties::item_message;
        use super::*;
        use proptest::collection::vec;
        use proptest::prelude::*;

        fn part() -> impl Strategy<Value = Part> {
            prop_oneof![
                vec(any::<u8>(), 0..24).prop_map(Part::Literal),
                Just(Part::RawBody),
                Just(Part::Literal(b"1700000000.".to_vec())),
                (0u64..80, 0u64..80).prop_map(|(a, b)| Part::BodySpan(Span { start: a, end: b })),
                Just(Part::Literal(b":".to_vec())),
            ]
        }

        /// Parts of an item check, careless ones among them: empty slices, literal runs past 8
        /// bytes when adjacent, literals at either end.
        fn item_part() -> impl Strategy<Value = Part> {
            prop_oneof![
                (0u64..8, 0u64..8).prop_map(|(a, b)| Part::BodySpan(Span { start: a, end: b })),
                Just(Part::Literal(b":".to_vec())),
                Just(Part::Literal(b"12345678".to_vec())),
            ]
        }

        /// Arbitrary results, sometimes past every bound; `sign` replaces the candidates with
        /// the right MACs so that some of them verify.
        fn prepared() -> impl Strategy<Value = (Prepared, bool)> {
            let check = (
                prop_oneof![
                    vec(part(), 0..6),
                    vec(part(), 60..70),
                    vec(item_part(), 1..6),
                    item_message(40),
                ],
                vec(vec(any::<u8>(), 0..40), 0..3),
            )
                .prop_map(|(message, signatures)| hmac_check(message, signatures));
            (
                prop_oneof![
                    vec(check.clone(), 0..4),
                    vec(check, 62..66),
                    // A batch of items, each signed by its own check.
                    vec(item_message(40).prop_map(|m| hmac_check(m, vec![])), 1..4),
                ],
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
            fn a_checked_timestamp_is_signed_only_as_a_whole_run_of_digits(
                before in vec(prop_oneof![b'0'..=b'9', any::<u8>()], 0..3),
                after in vec(prop_oneof![b'0'..=b'9', any::<u8>()], 0..3),
                ts in prop_oneof![0i64..100, any::<i64>()],
            ) {
                let decimal = ts.to_string().into_bytes();
                let literal = [before, decimal.clone(), after].concat();
                let whole = (0..=literal.len() - decimal.len()).any(|at| {
                    let end = at + decimal.len();
                    literal[at..end] == decimal[..]
                        && (at == 0 || !literal[at - 1].is_ascii_digit())
                        && literal.get(end).is_none_or(|b| !b.is_ascii_digit())
                });
                let p = Prepared {
                    checks: vec![hmac_check(vec![Part::Literal(literal), Part::RawBody], vec![])],
                    timestamp: Some(ts),
                };
                prop_assert_eq!(validate(&p, HMAC, &inputs(b"{}"), true).is_ok(), whole);
            }

            #[test]
            fn arbitrary_results_never_panic_stay_in_budget_and_never_verify_without_covering_the_body(
                (mut prepared, sign) in prepared(),
                body in vec(any::<u8>(), 0..64),
                freshness in any::<bool>(),
            ) {
                let set = secrets(&[("k", b"secret")]);
                if sign && validate(&prepared, HMAC, &inputs(&body), freshness).is_ok() {
                    for check in &mut prepared.checks {
                        if let Ok(Some(pieces)) = resolve(0, &check.message, None, &inputs(&body)) {
                            check.signatures = vec![mac_of(MacAlgorithm::Sha256, b"secret", &pieces, "").to_vec()];
                        }
                    }
                }
                if let Ok(passed) = run(HMAC, &set, &prepared, &inputs(&body), freshness) {
                    for (check, coverage) in prepared.checks.iter().zip(&passed.coverage) {
                        let whole = check.message.iter().any(|p| matches!(p, Part::RawBody));
                        prop_assert_eq!(whole, *coverage == Coverage::Whole);
                        if *coverage == Coverage::Items {
                            // Non-empty slices inside the body, joined by runs of literals of at
                            // most 8 bytes, a slice first and last.
                            let mut run = 0;
                            for p in &check.message {
                                match p {
                                    Part::Literal(l) => run += l.len(),
                                    Part::BodySpan(s) => {
                                        prop_assert!(s.start < s.end && s.end <= body.len() as u64);
                                        run = 0;
                                    }
                                    _ => prop_assert!(false, "{p:?} in an item check"),
                                }
                                prop_assert!(run <= MAX_SEPARATOR_BYTES);
                            }
                            prop_assert!(matches!(check.message.first(), Some(Part::BodySpan(_))));
                            prop_assert!(matches!(check.message.last(), Some(Part::BodySpan(_))));
                        }
                    }
                    // An event over the whole body is another item's too whenever another
                    // item check applied.
                    let items: Vec<usize> = (0..prepared.checks.len())
                        .filter(|&i| passed.coverage[i] == Coverage::Items && passed.applied[i])
                        .collect();
                    for &i in &items {
                        let whole =
                            event(Some(i as u32), Some(Span { start: 0, end: body.len() as u64 }));
                        let accepted = check_items(&passed, &prepared, &[whole], body.len()).is_ok();
                        prop_assert_eq!(accepted, items.len() == 1);
                    }
                    // Covering the whole body means any change to it fails.
                    if let (true, Some(first)) =
                        (passed.coverage.iter().all(|c| *c == Coverage::Whole), body.first())
                    {
                        let mut changed = body.clone();
                        changed[0] = first ^ 1;
                        prop_assert!(run(HMAC, &set, &prepared, &inputs(&changed), freshness).is_err());
                    }
                    if let (true, Some(ts)) = (freshness, prepared.timestamp) {
                        // A whole run of digits in a run of literals or a slice of the body.
                        let decimal = ts.to_string();
                        let whole_run = |bytes: &[u8], from: usize, to: usize| {
                            memmem::find_iter(&bytes[from..to], decimal.as_bytes()).any(|at| {
                                let (a, b) = (from + at, from + at + decimal.len());
                                (a == 0 || !bytes[a - 1].is_ascii_digit())
                                    && bytes.get(b).is_none_or(|c| !c.is_ascii_digit())
                            })
                        };
                        for check in &prepared.checks {
                            let signed = literal_runs(&check.message)
                                .any(|run| whole_run(&run, 0, run.len()))
                                || check.message.iter().any(|p| match p {
                                    Part::BodySpan(s) => whole_run(&body, s.start as usize, s.end as usize),
                                    _ => false,
                                });
                            prop_assert!(signed);
                        }
                    }
                }
            }
        }
    }
}

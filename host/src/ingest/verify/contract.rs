//! The verification contract: what an adapter's description of the signed bytes must be
//! before any key is used (`validate`), and the bounds on the work it may ask of the host.

use std::borrow::Cow;
use std::ops::Range;

use memchr::memmem;

use crate::adapter::{Algorithm, Part, Prepared, Span};

/// Checks in one `prepare` result (a batch signs each item separately).
pub const MAX_CHECKS: usize = 64;
/// Parts in one check's message.
pub const MAX_PARTS: usize = 64;
/// Candidate signatures in one check (Stripe sends several `v1` during a roll). Candidates
/// come from the request: past this bound, or `MAX_SIGNATURE_BYTES`, the request is refused
/// (`budget.rs`), not the adapter.
pub const MAX_SIGNATURES: usize = 16;
/// One candidate signature, decoded (an HMAC-SHA512 is 64, a DER ECDSA signature up to 72).
pub const MAX_SIGNATURE_BYTES: usize = 512;
/// Literal bytes over all checks.
pub const MAX_LITERAL_BYTES: usize = 64 << 10;
/// How many times, over all checks, the body may be hashed per trusted key.
pub const MAX_BODY_PASSES: usize = 4;
/// Public-key verifications one request may cost (checks x candidates x keys x URL forms):
/// each is tens of microseconds, and candidates come from the request.
pub const MAX_PUBLIC_KEY_VERIFICATIONS: usize = 16;
/// Most parameters a `sorted-form-params` body may have: Twilio sends a few dozen. Past it the
/// body is not a form, found before it is decoded or sorted, so a body of `a&a&…` costs one
/// pass instead of a million allocations.
pub const MAX_FORM_PAIRS: usize = 1024;
/// The longest literal between body slices in a check that signs batch items.
pub const MAX_SEPARATOR_BYTES: usize = 8;

/// A `prepare` (or `parse`) result the host refuses, whatever the signatures say.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ContractViolation {
    #[error("{0} checks (at most {MAX_CHECKS})")]
    TooManyChecks(usize),
    #[error("check {check} has {parts} parts (at most {MAX_PARTS})")]
    TooManyParts { check: usize, parts: usize },
    #[error("{0} literal bytes (at most {MAX_LITERAL_BYTES})")]
    TooManyLiteralBytes(usize),
    #[error("{bytes} bytes to hash per key (at most {max})")]
    HashBudget { bytes: usize, max: usize },
    #[error("check {0} does not cover the raw body in a declared form")]
    BodyNotCovered(usize),
    #[error("check {0} does not sign the timestamp whose freshness is checked")]
    TimestampNotSigned(usize),
    #[error("check {0} names an algorithm the adapter did not declare")]
    UndeclaredAlgorithm(usize),
    #[error("check {0} is a token check but signs a message")]
    TokenWithMessage(usize),
    #[error("check {0} names a body digest parameter but does not sign the URL")]
    DigestNotSigned(usize),
    #[error("check {0} signs the URL more than once")]
    UrlTwice(usize),
    #[error("check {0} signs the URL, but the endpoint has no public_url")]
    NoPublicUrl(usize),
    #[error("check {0} has a body span outside the body")]
    SpanOutsideBody(usize),
    #[error("check {0} has an empty body slice")]
    EmptySlice(usize),
    #[error("check {0} signs body slices joined by a literal run over {MAX_SEPARATOR_BYTES} bytes")]
    SeparatorTooLong(usize),
    #[error("check {0} signs body slices with a literal before the first or after the last")]
    LiteralOutsideSlices(usize),
    #[error("check {0} has a body-json-string span that is not one JSON string")]
    NotAJsonString(usize),
    #[error("event {0} has a span outside the body")]
    EventSpanOutsideBody(usize),
    #[error("event {0} names no check that signs its item, or one that did not apply")]
    ItemNotSigned(usize),
    #[error("event {0} does not contain every slice its check signs")]
    ItemOutsideSpan(usize),
    #[error("event {event} spans a slice that check {check}, another item's, signs")]
    ItemOverAnotherItem { event: usize, check: usize },
    #[error("a handshake asks for a MAC, but no secret verified the request")]
    AnswerMacWithoutSecret,
    #[error(
        "a handshake asks for a MAC under the secret of check {0}, which does not sign the \
         body's exact bytes (raw-body or a signed body digest)"
    )]
    AnswerMacBodyNotSigned(usize),
    #[error("a handshake asks for a MAC, but no signed timestamp's freshness was checked")]
    AnswerMacNotFresh,
    #[error("a handshake asks for a MAC of bytes that are no span or JSON string of the body")]
    AnswerMacOutsideBody,
}

/// What `validate` found each check to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Coverage {
    /// Signs the whole body (directly, as sorted form parameters, or by digest).
    Whole,
    /// Signs slices of the body: one item of a batch.
    Items,
    /// A shared token: signs nothing.
    Token,
}

/// The request's signed inputs besides the adapter's literals.
#[derive(Debug, Clone, Copy)]
pub struct Inputs<'a> {
    pub body: &'a [u8],
    /// The endpoint's `public_url` plus the request's query string.
    pub url: Option<&'a str>,
    /// The raw query string.
    pub query: Option<&'a str>,
}

/// The most bytes one key's MACs may hash for a body of `body_len` bytes.
pub fn hash_budget(body_len: usize) -> usize {
    body_len.saturating_mul(MAX_BODY_PASSES) + MAX_LITERAL_BYTES
}

/// What "verified" means, enforced on the adapter's description before any key is used:
/// bounded work, declared algorithms, the body covered in a declared form, and, when freshness
/// is checked, the timestamp's decimal text as a whole run of digits inside one run of
/// literals or one body slice of every check that signs (so the freshness that is checked is
/// the freshness that is signed).
/// Returns each check's coverage.
pub fn validate(
    prepared: &Prepared,
    declared: &[Algorithm],
    inputs: &Inputs<'_>,
    freshness_checked: bool,
) -> Result<Vec<Coverage>, ContractViolation> {
    let checks = &prepared.checks;
    let body_len = inputs.body.len();
    if checks.len() > MAX_CHECKS {
        return Err(ContractViolation::TooManyChecks(checks.len()));
    }
    let (mut literal_bytes, mut hashed) = (0usize, 0usize);
    let mut coverage = Vec::with_capacity(checks.len());
    for (i, check) in checks.iter().enumerate() {
        if check.message.len() > MAX_PARTS {
            return Err(ContractViolation::TooManyParts {
                check: i,
                parts: check.message.len(),
            });
        }
        if !declared.contains(&check.algorithm) {
            return Err(ContractViolation::UndeclaredAlgorithm(i));
        }
        if check.algorithm == Algorithm::Token {
            if !check.message.is_empty() || check.body_sha256_param.is_some() {
                return Err(ContractViolation::TokenWithMessage(i));
            }
            coverage.push(Coverage::Token);
            continue;
        }
        let (mut whole, mut slices, mut urls) = (false, false, 0);
        for part in &check.message {
            match part {
                Part::Literal(bytes) => {
                    literal_bytes += bytes.len();
                    hashed += bytes.len();
                }
                Part::RawBody => {
                    whole = true;
                    hashed += body_len;
                }
                // Parsed and sorted before it is hashed: counted twice.
                Part::SortedFormParams => {
                    whole = true;
                    hashed += 2 * body_len;
                }
                Part::BodySpan(s) | Part::BodyJsonString(s) => {
                    if s.start > s.end || s.end > body_len as u64 {
                        return Err(ContractViolation::SpanOutsideBody(i));
                    }
                    // An empty slice signs nothing, yet would make the check look like an item's.
                    if s.start == s.end {
                        return Err(ContractViolation::EmptySlice(i));
                    }
                    slices = true;
                    hashed += (s.end - s.start) as usize;
                }
                Part::Url => {
                    let url = inputs.url.ok_or(ContractViolation::NoPublicUrl(i))?;
                    urls += 1;
                    // Tried as configured and with the default port toggled.
                    hashed += 2 * url.len();
                }
            }
        }
        if urls > 1 {
            return Err(ContractViolation::UrlTwice(i));
        }
        if check.body_sha256_param.is_some() {
            if urls == 0 {
                return Err(ContractViolation::DigestNotSigned(i));
            }
            whole = true;
            hashed += body_len;
        }
        coverage.push(if whole {
            Coverage::Whole
        } else if slices && urls == 0 {
            items_form(i, &check.message)?;
            Coverage::Items
        } else {
            return Err(ContractViolation::BodyNotCovered(i));
        });
    }
    if literal_bytes > MAX_LITERAL_BYTES {
        return Err(ContractViolation::TooManyLiteralBytes(literal_bytes));
    }
    let max = hash_budget(body_len);
    if hashed > max {
        return Err(ContractViolation::HashBudget { bytes: hashed, max });
    }
    if let (true, Some(ts)) = (freshness_checked, prepared.timestamp) {
        let mut buf = [0u8; 20];
        let decimal = decimal(ts, &mut buf);
        let signing = checks.iter().zip(&coverage).enumerate();
        let mut signing = signing
            .filter(|(_, (_, c))| **c != Coverage::Token)
            .peekable();
        if signing.peek().is_none() {
            return Err(ContractViolation::TimestampNotSigned(0));
        }
        if let Some((i, _)) = signing.find(|(_, (c, _))| {
            let in_literals =
                literal_runs(&c.message).any(|run| whole_run(&run, 0..run.len(), decimal));
            // A slice of the body is signed bytes too (a batch item carrying its timestamp).
            // Its neighbours are read in the body, so a slice cannot cut the digits out of a
            // longer number.
            let in_slices = c.message.iter().any(|p| match p {
                Part::BodySpan(s) => slice(0, inputs.body, s).is_ok_and(|_| {
                    whole_run(inputs.body, s.start as usize..s.end as usize, decimal)
                }),
                _ => false,
            });
            !(in_literals || in_slices)
        }) {
            return Err(ContractViolation::TimestampNotSigned(i));
        }
    }
    Ok(coverage)
}

/// Whether `digits` occurs inside `bytes[range]` as a whole run: the bytes beside it, read in
/// `bytes` (so also outside `range`), are not ASCII digits, or it touches an edge of `bytes`.
/// `1700000000` is not signed by `v0:17000000001:`, which signs another time.
fn whole_run(bytes: &[u8], range: Range<usize>, digits: &[u8]) -> bool {
    let digit = |at: Option<usize>| {
        at.and_then(|i| bytes.get(i))
            .is_some_and(u8::is_ascii_digit)
    };
    memmem::find_iter(&bytes[range.clone()], digits).any(|at| {
        let start = range.start + at;
        !digit(start.checked_sub(1)) && !digit(Some(start + digits.len()))
    })
}

/// An item's form: body slices joined by short separators. Each run of adjacent literals is at
/// most `MAX_SEPARATOR_BYTES` (a long literal cut into short ones is still long: it could
/// carry any bytes a signer meant as the body), and none stands before the first slice or
/// after the last (where nothing bounds what it stands for).
fn items_form(i: usize, message: &[Part]) -> Result<(), ContractViolation> {
    let slice = |p: Option<&Part>| matches!(p, Some(Part::BodySpan(_) | Part::BodyJsonString(_)));
    if !slice(message.first()) || !slice(message.last()) {
        return Err(ContractViolation::LiteralOutsideSlices(i));
    }
    if literal_runs(message).any(|run| run.len() > MAX_SEPARATOR_BYTES) {
        return Err(ContractViolation::SeparatorTooLong(i));
    }
    Ok(())
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
/// unlike literals on either side of anything else. A run of one literal is borrowed.
pub(super) fn literal_runs(message: &[Part]) -> impl Iterator<Item = Cow<'_, [u8]>> + '_ {
    message
        .split(|p| !matches!(p, Part::Literal(_)))
        .map(|run| match run {
            [] => Cow::Borrowed(&[][..]),
            [Part::Literal(bytes)] => Cow::Borrowed(bytes.as_slice()),
            run => Cow::Owned(
                run.iter()
                    .flat_map(|p| match p {
                        Part::Literal(bytes) => bytes.as_slice(),
                        _ => &[],
                    })
                    .copied()
                    .collect(),
            ),
        })
}

/// A span of the body (`validate` has checked it; checked again rather than trusted).
pub(super) fn slice<'a>(i: usize, body: &'a [u8], s: &Span) -> Result<&'a [u8], ContractViolation> {
    usize::try_from(s.start)
        .ok()
        .zip(usize::try_from(s.end).ok())
        .and_then(|(a, b)| body.get(a..b))
        .ok_or(ContractViolation::SpanOutsideBody(i))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ingest::secrets::{KeySet, PublicKey, TrustedPublicKey};
    use crate::ingest::verify::VerifyError;
    use crate::ingest::verify::test_kit::*;

    #[test]
    fn a_check_that_does_not_cover_the_body_is_refused_before_any_mac() {
        let set = secrets(&[("k", b"secret")]);
        let message = vec![Part::Literal(b"1700000000.wharf".to_vec())];
        let sig = mac(b"secret", &message, b"anything");
        let prepared = one(hmac_check(message, vec![sig]), Some(1_700_000_000));
        assert_eq!(
            run(HMAC, &set, &prepared, &inputs(b"anything"), true).unwrap_err(),
            VerifyError::Contract(ContractViolation::BodyNotCovered(0))
        );
    }

    #[test]
    fn a_checked_timestamp_must_be_inside_one_run_of_literals() {
        let ts = Some(1_700_000_000);
        let signed = sig_check(
            vec![Part::Literal(b"v0:1700000000:".to_vec()), Part::RawBody],
            ts,
        );
        assert!(validated(&signed, 10, true).is_ok());
        let adjacent = sig_check(
            vec![
                Part::Literal(b"17000".to_vec()),
                Part::Literal(b"00000.".to_vec()),
                Part::RawBody,
            ],
            ts,
        );
        assert!(validated(&adjacent, 10, true).is_ok());
        let straddling = sig_check(
            vec![
                Part::Literal(b"17000".to_vec()),
                Part::RawBody,
                Part::Literal(b"00000".to_vec()),
            ],
            ts,
        );
        assert_eq!(
            validated(&straddling, 10, true),
            Err(ContractViolation::TimestampNotSigned(0))
        );
        let unsigned = sig_check(vec![Part::Literal(b"wharf.".to_vec()), Part::RawBody], ts);
        assert_eq!(
            validated(&unsigned, 10, true),
            Err(ContractViolation::TimestampNotSigned(0))
        );
        assert!(validated(&unsigned, 10, false).is_ok());
        // Inside a signed slice of the body it is signed too; somewhere in the raw body is not
        // enough to say which digits were meant.
        let body = b"{\"t\":1700000000}";
        let item = sig_check(vec![Part::BodySpan(Span { start: 5, end: 15 })], ts);
        assert!(validate(&item, HMAC, &inputs(body), true).is_ok());
        let elsewhere = sig_check(vec![Part::BodySpan(Span { start: 0, end: 5 })], ts);
        assert_eq!(
            validate(&elsewhere, HMAC, &inputs(body), true),
            Err(ContractViolation::TimestampNotSigned(0))
        );
        let raw = sig_check(vec![Part::Literal(b"v1.".to_vec()), Part::RawBody], ts);
        assert_eq!(
            validate(&raw, HMAC, &inputs(body), true),
            Err(ContractViolation::TimestampNotSigned(0))
        );
    }

    #[test]
    fn a_checked_timestamp_is_a_whole_run_of_digits_not_part_of_a_longer_one() {
        let ts = Some(1_700_000_000);
        for (literal, signed) in [
            (&b"v0:17000000001:"[..], false),
            (b"v0:91700000000:", false),
            (b"1700000000", true),
            (b"t=1700000000,v1", true),
            (b"-1700000000.", true),
        ] {
            let p = sig_check(vec![Part::Literal(literal.to_vec()), Part::RawBody], ts);
            let expected = if signed {
                Ok(vec![Coverage::Whole])
            } else {
                Err(ContractViolation::TimestampNotSigned(0))
            };
            assert_eq!(validated(&p, 4, true), expected, "{literal:?}");
        }
        // A slice's neighbours are read in the body: cutting the digits out of a longer number
        // does not make them a whole run.
        let body = b"{\"t\":17000000009}";
        let cut = sig_check(vec![Part::BodySpan(Span { start: 5, end: 15 })], ts);
        assert_eq!(
            validate(&cut, HMAC, &inputs(body), true),
            Err(ContractViolation::TimestampNotSigned(0))
        );
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
        let many_bodies = sig_check(vec![Part::RawBody; 5], None);
        assert_eq!(
            validated(&many_bodies, 100_000, false),
            Err(ContractViolation::HashBudget {
                bytes: 500_000,
                max: hash_budget(100_000)
            })
        );
        assert!(validated(&many_bodies, 10_000, false).is_ok());
        let parts = sig_check(vec![Part::RawBody; MAX_PARTS + 1], None);
        assert_eq!(
            validated(&parts, 0, false),
            Err(ContractViolation::TooManyParts {
                check: 0,
                parts: MAX_PARTS + 1
            })
        );
        let mut checks = sig_check(vec![Part::RawBody], None);
        checks.checks = vec![checks.checks[0].clone(); MAX_CHECKS + 1];
        assert_eq!(
            validated(&checks, 1, false),
            Err(ContractViolation::TooManyChecks(MAX_CHECKS + 1))
        );
        let literal = sig_check(
            vec![
                Part::Literal(vec![b'x'; MAX_LITERAL_BYTES + 1]),
                Part::RawBody,
            ],
            None,
        );
        assert_eq!(
            validated(&literal, 1, false),
            Err(ContractViolation::TooManyLiteralBytes(
                MAX_LITERAL_BYTES + 1
            ))
        );
        // Public-key verifications are counted against the keys they would use.
        let ed = ed25519_dalek::SigningKey::from_bytes(&[1; 32]);
        let set = KeySet {
            secrets: vec![],
            public_keys: (0..2)
                .map(|v| TrustedPublicKey {
                    version: v.to_string(),
                    key: PublicKey::Ed25519(ed.verifying_key()),
                })
                .collect(),
        };
        let mut p = one(hmac_check(vec![Part::RawBody], vec![vec![0; 64]; 9]), None);
        p.checks[0].algorithm = Algorithm::Ed25519;
        assert_eq!(
            run(&[Algorithm::Ed25519], &set, &p, &inputs(b"x"), false).unwrap_err(),
            VerifyError::PublicKeyBudget(18)
        );
    }

    #[test]
    fn checks_use_only_declared_algorithms_and_tokens_sign_nothing() {
        let p = sig_check(vec![Part::RawBody], None);
        assert_eq!(
            validate(&p, &[Algorithm::HmacSha1], &inputs(b"x"), false),
            Err(ContractViolation::UndeclaredAlgorithm(0))
        );
        let mut token = sig_check(vec![Part::RawBody], None);
        token.checks[0].algorithm = Algorithm::Token;
        assert_eq!(
            validate(&token, &[Algorithm::Token], &inputs(b"x"), false),
            Err(ContractViolation::TokenWithMessage(0))
        );
        token.checks[0].message.clear();
        assert_eq!(
            validate(&token, &[Algorithm::Token], &inputs(b"x"), false),
            Ok(vec![Coverage::Token])
        );
        // A token signs no timestamp, so it cannot carry freshness alone.
        token.timestamp = Some(5);
        assert_eq!(
            validate(&token, &[Algorithm::Token], &inputs(b"x"), true),
            Err(ContractViolation::TimestampNotSigned(0))
        );
    }
}

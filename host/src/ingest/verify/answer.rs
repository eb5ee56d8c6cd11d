//! Handshake answers: a MAC the host computes for an adapter (Zoom's `encryptedToken`).
//!
//! The host holds the secret, so a MAC it computes over bytes an adapter chooses is a signing
//! oracle: whoever can make one request verify (a captured request replayed when no timestamp
//! is signed; a body an item check signs only a slice of) would ask for the MAC of a forged
//! message, such as `<ts>.<forged body>` in the query, and send it back as a signature. So a
//! MAC answer part is computed only
//! - under the secret of the check that verified the request (the first that applied), an HMAC
//!   check that signs the body's exact bytes: `raw-body`, or a signed URL carrying the body's
//!   digest. Not slices (the rest of the body is anyone's), not sorted form parameters (other
//!   bodies share their signature), not a token (it signs nothing);
//! - when a signed timestamp's freshness was checked (`validate` made sure that check signs
//!   it), so only a request the provider signed moments ago is answered, and to its sender;
//! - over bytes of that verified body: a run of its raw bytes, or the decoded value of one of
//!   its JSON strings (a token as the provider sent it, unescaped). Never the query, a header or
//!   anything else the adapter makes up.

use memchr::{memchr, memchr2, memmem};

use super::contract::ContractViolation;
use super::crypto::hmac_sha256_hex;
use super::outcome::Passed;
use crate::adapter::{Algorithm, Part, Prepared};

/// The lowercase hex HMAC-SHA256 of `input` for a handshake answer, under the secret that
/// verified the request, once the rules above hold; a breach is the adapter's.
pub fn answer_mac(
    passed: &Passed,
    prepared: &Prepared,
    freshness_checked: bool,
    body: &[u8],
    input: &[u8],
) -> Result<String, ContractViolation> {
    let first = passed.applied.iter().position(|a| *a);
    let (Some(key), Some(i)) = (passed.secret.as_deref(), first) else {
        return Err(ContractViolation::AnswerMacWithoutSecret);
    };
    let check = prepared
        .checks
        .get(i)
        .ok_or(ContractViolation::AnswerMacWithoutSecret)?;
    let hmac = matches!(
        check.algorithm,
        Algorithm::HmacSha256 | Algorithm::HmacSha1 | Algorithm::HmacSha512
    );
    let exact = check.message.iter().any(|p| matches!(p, Part::RawBody))
        || check.body_sha256_param.is_some();
    if !(hmac && exact) {
        return Err(ContractViolation::AnswerMacBodyNotSigned(i));
    }
    if !freshness_checked || prepared.timestamp.is_none() {
        return Err(ContractViolation::AnswerMacNotFresh);
    }
    if !inside(body, input) {
        return Err(ContractViolation::AnswerMacOutsideBody);
    }
    Ok(hmac_sha256_hex(key, input))
}

/// Whether `input` is a non-empty run of `body`'s bytes or the decoded value of one of its JSON
/// strings.
fn inside(body: &[u8], input: &[u8]) -> bool {
    !input.is_empty()
        && (memmem::find(body, input).is_some()
            || escaped_json_strings(body).any(|s| s.as_bytes() == input))
}

/// The decoded values of `body`'s JSON string tokens that hold an escape (one without is a run
/// of the body's bytes already), read lexically from the start: in a JSON document these are
/// exactly its strings, keys included. Linear in the body.
fn escaped_json_strings(body: &[u8]) -> impl Iterator<Item = String> + '_ {
    let mut at = 0;
    std::iter::from_fn(move || {
        loop {
            let start = at + memchr(b'"', body.get(at..)?)?;
            let (mut end, mut escaped) = (start + 1, false);
            loop {
                let next = end + memchr2(b'"', b'\\', body.get(end..)?)?;
                if body[next] == b'"' {
                    end = next + 1;
                    break;
                }
                escaped = true;
                end = next + 2;
            }
            at = end;
            if escaped && let Ok(s) = serde_json::from_slice::<String>(&body[start..end]) {
                return Some(s);
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adapter::Span;
    use crate::ingest::verify::Coverage;
    use crate::ingest::verify::test_kit::*;

    const TS: i64 = 1_700_000_000;

    fn verified(message: Vec<Part>, body: &[u8]) -> (Passed, Prepared) {
        let sig = mac(b"secret", &message, body);
        let p = one(hmac_check(message, vec![sig]), Some(TS));
        let passed =
            run(HMAC, &secrets(&[("k", b"secret")]), &p, &inputs(body), true).expect("verifies");
        (passed, p)
    }

    #[test]
    fn a_mac_answer_is_computed_over_a_fresh_whole_body_only() {
        let body = br#"{"payload":{"plainToken":"qgg8vl"},"event":"endpoint.url_validation"}"#;
        let whole = vec![
            Part::Literal(format!("v0:{TS}:").into_bytes()),
            Part::RawBody,
        ];
        let (passed, p) = verified(whole, body);
        assert_eq!(
            answer_mac(&passed, &p, true, body, b"qgg8vl"),
            Ok(hmac_sha256_hex(b"secret", b"qgg8vl"))
        );
        // Not fresh: a request captured once would be answered forever.
        assert_eq!(
            answer_mac(&passed, &p, false, body, b"qgg8vl"),
            Err(ContractViolation::AnswerMacNotFresh)
        );
        // Bytes the adapter chose (the query, a forged message) are not the body's.
        let forged = format!("v0:{TS}:{{\"event\":\"forged\"}}");
        assert_eq!(
            answer_mac(&passed, &p, true, body, forged.as_bytes()),
            Err(ContractViolation::AnswerMacOutsideBody)
        );
        assert_eq!(
            answer_mac(&passed, &p, true, body, b""),
            Err(ContractViolation::AnswerMacOutsideBody)
        );

        // An item check signing the timestamp's digits of the body (and nothing else).
        let body = format!("{TS}.anything at all").into_bytes();
        let (passed, p) = verified(vec![Part::BodySpan(Span { start: 0, end: 10 })], &body);
        assert_eq!(passed.coverage, [Coverage::Items]);
        assert_eq!(
            answer_mac(&passed, &p, true, &body, b"anything"),
            Err(ContractViolation::AnswerMacBodyNotSigned(0))
        );
    }

    #[test]
    fn a_mac_answer_needs_the_secret_of_a_check_that_signs_the_body() {
        let body = b"a=1&b=2";
        let form = vec![
            Part::Literal(format!("{TS}").into_bytes()),
            Part::SortedFormParams,
        ];
        let (passed, p) = verified(form, body);
        // Another body (`a=1b=2`, concatenated) shares a sorted-form signature.
        assert_eq!(
            answer_mac(&passed, &p, true, body, b"a=1"),
            Err(ContractViolation::AnswerMacBodyNotSigned(0))
        );
        let whole = vec![Part::Literal(format!("{TS}.").into_bytes()), Part::RawBody];
        let (mut passed, p) = verified(whole, body);
        passed.secret = None;
        assert_eq!(
            answer_mac(&passed, &p, true, body, b"a=1"),
            Err(ContractViolation::AnswerMacWithoutSecret)
        );
    }

    #[test]
    fn a_json_string_counts_as_its_decoded_value() {
        let body = br#"{"plainToken":"a\"b\\c\/\u00e9","k\u0065y":"v"}"#;
        let whole = vec![Part::Literal(format!("{TS}.").into_bytes()), Part::RawBody];
        let (passed, p) = verified(whole, body);
        for token in ["a\"b\\c/é", "key", "plainToken", r#"c\/\u00e9"#] {
            assert!(
                answer_mac(&passed, &p, true, body, token.as_bytes()).is_ok(),
                "{token}"
            );
        }
        // Decoded pieces of a string are not a string of the body.
        assert_eq!(
            answer_mac(&passed, &p, true, body, "c/é".as_bytes()),
            Err(ContractViolation::AnswerMacOutsideBody)
        );
        // Unterminated strings and trailing escapes end the scan without panicking.
        for cut in [&br#"{"a\"#[..], br#""\"#, br#"""#, b"\"\\u12"] {
            assert_eq!(escaped_json_strings(cut).count(), 0, "{cut:?}");
        }
    }
}

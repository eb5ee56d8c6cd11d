//! Signature verification and freshness, in the host and never in the guest.
//!
//! The adapter says which bytes are signed and which signatures the request carries; this
//! module decides whether that description is acceptable at all (`validate`: each check names
//! an algorithm the adapter declared, covers the body in a declared form, a checked timestamp
//! is inside the signed bytes, and the work asked of the host is bounded), then verifies each
//! check under every trusted version of the key it names: HMACs compared in constant time with
//! an explicit length check, Ed25519 and ECDSA P-256 signatures verified, shared tokens
//! compared in constant time.
//!
//! How a check covers the body (one of these, or it is refused before any key is touched):
//! - whole: `raw-body` or `sorted-form-params` in the message, or `url` with
//!   `body-sha256-param` (the signed URL carries the body's digest, which the host checks);
//! - items (batches signed per item): body slices joined by short literal separators. Then
//!   every event must name the check that signs it and lie around its slices (`check_items`).
//! - A `token` check signs nothing; it authenticates the sender only (GitLab, Meta's GET).

use std::borrow::Cow;

use hmac::{Hmac, Mac};
use memchr::memmem;
use sha2::Digest as _;
use subtle::ConstantTimeEq;

use super::secrets::{KeySet, PublicKey};
use crate::adapter::{Algorithm, Envelope, MacAlgorithm, Part, Prepared, Span};

/// Checks in one `prepare` result (a batch signs each item separately).
pub const MAX_CHECKS: usize = 64;
/// Parts in one check's message.
pub const MAX_PARTS: usize = 64;
/// Candidate signatures in one check (Stripe sends several `v1` during a roll).
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
/// The longest literal between body slices in a check that signs batch items.
pub const MAX_SEPARATOR_BYTES: usize = 8;

/// Why a request is not authentic. All but `Contract` are answered 401; `Contract` is the
/// adapter's fault (503 `adapter_unavailable`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    #[error("no signature matched any trusted key version")]
    NoMatch,
    #[error("the adapter found no signature to check")]
    NoSignatures,
    #[error("no check applies to the endpoint's keys (none is of a kind its checks verify)")]
    NoApplicableKey,
    /// Candidates come from the request, so a request that asks for more public-key work
    /// than allowed is refused as unverifiable (401), not blamed on the adapter.
    #[error("{0} public-key verifications asked for (at most {MAX_PUBLIC_KEY_VERIFICATIONS})")]
    PublicKeyBudget(usize),
    #[error("signed timestamp missing")]
    MissingTimestamp,
    #[error("signed timestamp is {0} s old, beyond the tolerance")]
    TooOld(i64),
    #[error("signed timestamp is {0} s in the future, beyond the tolerance")]
    TooNew(i64),
    #[error("adapter broke the verification contract: {0}")]
    Contract(#[from] ContractViolation),
}

/// A `prepare` (or `parse`) result the host refuses, whatever the signatures say.
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
    #[error("check {0} has a body-json-string span that is not one JSON string")]
    NotAJsonString(usize),
    #[error("event {0} has a span outside the body")]
    EventSpanOutsideBody(usize),
    #[error("event {0} names no check that signs its item, or one that did not apply")]
    ItemNotSigned(usize),
    #[error("event {0} does not contain every slice its check signs")]
    ItemOutsideSpan(usize),
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

/// A verified request: which key version passed, and what each check was.
#[derive(Debug)]
pub struct Passed {
    /// The version of the key that passed the first check that applied.
    pub version: String,
    /// That key's bytes when it was a secret (a handshake may MAC with it).
    pub secret: Option<Vec<u8>>,
    pub coverage: Vec<Coverage>,
    /// Which checks applied to the endpoint's keys (and so passed).
    pub applied: Vec<bool>,
}

impl Passed {
    /// Whether a check that applied signs the whole body (or none signs anything but tokens),
    /// so events need not name their item's check.
    fn body_covered(&self) -> bool {
        let mut applied = self.coverage.iter().zip(&self.applied).filter(|(_, a)| **a);
        applied.clone().any(|(c, _)| *c == Coverage::Whole)
            || applied.all(|(c, _)| *c == Coverage::Token)
    }
}

/// The most bytes one key's MACs may hash for a body of `body_len` bytes.
pub fn hash_budget(body_len: usize) -> usize {
    body_len.saturating_mul(MAX_BODY_PASSES) + MAX_LITERAL_BYTES
}

fn mac_algorithm(a: Algorithm) -> Option<MacAlgorithm> {
    match a {
        Algorithm::HmacSha256 => Some(MacAlgorithm::Sha256),
        Algorithm::HmacSha1 => Some(MacAlgorithm::Sha1),
        Algorithm::HmacSha512 => Some(MacAlgorithm::Sha512),
        _ => None,
    }
}

/// What "verified" means, enforced on the adapter's description before any key is used:
/// bounded work, declared algorithms, the body covered in a declared form, and, when freshness
/// is checked, the timestamp's decimal text inside one run of literals or one body slice of
/// every check that signs (so the freshness that is checked is the freshness that is signed).
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
        let (mut whole, mut slices, mut urls, mut long_literal) = (false, false, 0, false);
        for part in &check.message {
            match part {
                Part::Literal(bytes) => {
                    literal_bytes += bytes.len();
                    hashed += bytes.len();
                    long_literal |= bytes.len() > MAX_SEPARATOR_BYTES;
                }
                Part::RawBody | Part::SortedFormParams => {
                    whole = true;
                    hashed += body_len;
                }
                Part::BodySpan(s) | Part::BodyJsonString(s) => {
                    if s.start > s.end || s.end > body_len as u64 {
                        return Err(ContractViolation::SpanOutsideBody(i));
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
        } else if slices && !long_literal && urls == 0 {
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
                literal_runs(&c.message).any(|run| memmem::find(&run, decimal).is_some());
            // A slice of the body is signed bytes too (a batch item carrying its timestamp).
            let in_slices = c.message.iter().any(|p| match p {
                Part::BodySpan(s) => slice(0, inputs.body, s)
                    .is_ok_and(|bytes| memmem::find(bytes, decimal).is_some()),
                _ => false,
            });
            !(in_literals || in_slices)
        }) {
            return Err(ContractViolation::TimestampNotSigned(i));
        }
    }
    Ok(coverage)
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
fn literal_runs(message: &[Part]) -> impl Iterator<Item = Cow<'_, [u8]>> + '_ {
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

/// One piece of a signed message, resolved: bytes (borrowed from the request where they can
/// be), or the URL, which has more than one form.
enum Piece<'a> {
    Bytes(Cow<'a, [u8]>),
    Url,
}

/// A check's message, resolved against the request. `Ok(None)`: the request cannot match
/// (a body that is not a form, a missing or wrong body digest).
fn resolve<'a>(
    i: usize,
    message: &'a [Part],
    body_sha256_param: Option<&str>,
    inputs: &Inputs<'a>,
) -> Result<Option<Vec<Piece<'a>>>, ContractViolation> {
    if let Some(param) = body_sha256_param {
        let expected = hex::encode(sha2::Sha256::digest(inputs.body));
        let mut values = query_values(inputs.query.unwrap_or_default(), param);
        match (values.next(), values.next()) {
            (Some(v), None) if v.as_bytes() == expected.as_bytes() => {}
            _ => return Ok(None),
        }
    }
    let mut pieces = Vec::with_capacity(message.len());
    for part in message {
        pieces.push(match part {
            Part::Literal(bytes) => Piece::Bytes(Cow::Borrowed(bytes)),
            Part::RawBody => Piece::Bytes(Cow::Borrowed(inputs.body)),
            Part::BodySpan(s) => Piece::Bytes(Cow::Borrowed(slice(i, inputs.body, s)?)),
            Part::BodyJsonString(s) => {
                let token = slice(i, inputs.body, s)?;
                let decoded = serde_json::from_slice::<String>(token)
                    .ok()
                    .filter(|_| token.first() == Some(&b'"') && token.last() == Some(&b'"'))
                    .ok_or(ContractViolation::NotAJsonString(i))?;
                Piece::Bytes(Cow::Owned(decoded.into_bytes()))
            }
            Part::SortedFormParams => match sorted_form_params(inputs.body) {
                Some(bytes) => Piece::Bytes(Cow::Owned(bytes)),
                None => return Ok(None),
            },
            Part::Url => Piece::Url,
        });
    }
    Ok(Some(pieces))
}

/// A span of the body (`validate` has checked it; checked again rather than trusted).
fn slice<'a>(i: usize, body: &'a [u8], s: &Span) -> Result<&'a [u8], ContractViolation> {
    usize::try_from(s.start)
        .ok()
        .zip(usize::try_from(s.end).ok())
        .and_then(|(a, b)| body.get(a..b))
        .ok_or(ContractViolation::SpanOutsideBody(i))
}

/// The decoded values of `name` in a query string.
fn query_values<'q>(query: &'q str, name: &'q str) -> impl Iterator<Item = String> + 'q {
    form_pairs(query.as_bytes())
        .into_iter()
        .flatten()
        .filter(move |(n, _)| n.as_slice() == name.as_bytes())
        .map(|(_, v)| String::from_utf8_lossy(&v).into_owned())
}

/// `application/x-www-form-urlencoded` pairs, percent- and `+`-decoded; `None` when a pair
/// does not decode.
fn form_pairs(body: &[u8]) -> Option<Vec<(Vec<u8>, Vec<u8>)>> {
    let decode = |s: &[u8]| -> Vec<u8> {
        let plus: Vec<u8> = s
            .iter()
            .map(|&b| if b == b'+' { b' ' } else { b })
            .collect();
        percent_encoding::percent_decode(&plus).collect()
    };
    body.split(|&b| b == b'&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (name, value) = match pair.iter().position(|&b| b == b'=') {
                Some(at) => (&pair[..at], &pair[at + 1..]),
                None => (pair, &b""[..]),
            };
            Some((decode(name), decode(value)))
        })
        .collect()
}

/// Twilio's form signature input: every distinct parameter (a name and value sent twice
/// counts once, as in Twilio's SDKs), sorted by name and then by value, each name immediately
/// followed by its value. `None` when the body is not valid UTF-8 form data.
fn sorted_form_params(body: &[u8]) -> Option<Vec<u8>> {
    std::str::from_utf8(body).ok()?;
    let mut pairs = form_pairs(body)?;
    pairs.sort();
    pairs.dedup();
    let mut out = Vec::with_capacity(body.len());
    for (name, value) in pairs {
        out.extend_from_slice(&name);
        out.extend_from_slice(&value);
    }
    Some(out)
}

/// The URL as configured and with its port toggled: without the port when it has one, with
/// the scheme's default port when it has none (what Twilio's SDKs try: the sender may have
/// signed either form).
fn url_forms(url: &str) -> Vec<Cow<'_, str>> {
    let mut forms = vec![Cow::Borrowed(url)];
    let Some((scheme, rest)) = url.split_once("://") else {
        return forms;
    };
    let default = match scheme.to_ascii_lowercase().as_str() {
        "https" => "443",
        "http" => "80",
        _ => return forms,
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    // The port follows the last ':' after any userinfo and outside an IPv6 literal.
    let host_start = authority.rfind('@').map_or(0, |at| at + 1);
    let host = &authority[host_start..];
    let port_at = host.rfind(':').filter(|&at| !host[at..].contains(']'));
    let toggled = match port_at {
        Some(at) => format!(
            "{scheme}://{}{}{tail}",
            &authority[..host_start],
            &host[..at]
        ),
        None => format!("{scheme}://{authority}:{default}{tail}"),
    };
    forms.push(Cow::Owned(toggled));
    forms
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

fn mac_of(algorithm: MacAlgorithm, key: &[u8], pieces: &[Piece<'_>], url: &str) -> Digest {
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

fn materialize(pieces: &[Piece<'_>], url: &str) -> Vec<u8> {
    let mut out = Vec::new();
    for piece in pieces {
        match piece {
            Piece::Bytes(bytes) => out.extend_from_slice(bytes),
            Piece::Url => out.extend_from_slice(url.as_bytes()),
        }
    }
    out
}

/// Constant-time equality that never matches on a length difference (an empty candidate or
/// a truncated one fails like any other wrong signature).
fn same(expected: &[u8], candidate: &[u8]) -> bool {
    expected.len() == candidate.len() && bool::from(expected.ct_eq(candidate))
}

/// Whether any candidate verifies under `key` for any form of the URL.
fn public_key_verifies(
    key: &PublicKey,
    pieces: &[Piece<'_>],
    forms: &[Cow<'_, str>],
    sigs: &[Vec<u8>],
) -> bool {
    forms.iter().any(|url| {
        let message = materialize(pieces, url);
        sigs.iter().any(|sig| match key {
            PublicKey::Ed25519(k) => ed25519_dalek::Signature::from_slice(sig)
                .is_ok_and(|s| k.verify_strict(&message, &s).is_ok()),
            PublicKey::P256(k) => {
                use p256::ecdsa::signature::Verifier as _;
                p256::ecdsa::Signature::from_der(sig)
                    .or_else(|_| p256::ecdsa::Signature::from_slice(sig))
                    .is_ok_and(|s| k.verify(&message, &s).is_ok())
            }
        })
    })
}

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
    let public_key_work: usize = prepared
        .checks
        .iter()
        .filter(|c| matches!(c.algorithm, Algorithm::Ed25519 | Algorithm::EcdsaP256Sha256))
        .map(|c| {
            let forms = if c.message.iter().any(|p| matches!(p, Part::Url)) {
                2
            } else {
                1
            };
            c.signatures.len() * keys(c.key.as_deref()).public_keys.len() * forms
        })
        .sum();
    if public_key_work > MAX_PUBLIC_KEY_VERIFICATIONS {
        return Err(VerifyError::PublicKeyBudget(public_key_work));
    }
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
                    usable
                        .into_iter()
                        .find(|k| public_key_verifies(&k.key, &pieces, forms, &check.signatures))
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

/// After `parse`: events lie inside the body, and when only per-item checks signed the body,
/// every event names a check that applied and lies around every slice that check signs.
pub fn check_items(
    passed: &Passed,
    prepared: &Prepared,
    events: &[Envelope],
    body_len: usize,
) -> Result<(), ContractViolation> {
    let covered = passed.body_covered();
    for (n, event) in events.iter().enumerate() {
        if let Some(s) = &event.span
            && (s.start > s.end || s.end > body_len as u64)
        {
            return Err(ContractViolation::EventSpanOutsideBody(n));
        }
        let item = match event.signed_by {
            None if covered => continue,
            None => return Err(ContractViolation::ItemNotSigned(n)),
            Some(i) => i as usize,
        };
        if passed.coverage.get(item) != Some(&Coverage::Items) || !passed.applied[item] {
            return Err(ContractViolation::ItemNotSigned(n));
        }
        let span = event.span.ok_or(ContractViolation::ItemOutsideSpan(n))?;
        let inside = prepared.checks[item].message.iter().all(|p| match p {
            Part::BodySpan(s) | Part::BodyJsonString(s) => {
                span.start <= s.start && s.end <= span.end
            }
            _ => true,
        });
        if !inside {
            return Err(ContractViolation::ItemOutsideSpan(n));
        }
    }
    Ok(())
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
    use crate::ingest::secrets::{TrustedKey, TrustedPublicKey};

    const HMAC: &[Algorithm] = &[Algorithm::HmacSha256];

    fn secrets(keys: &[(&str, &[u8])]) -> KeySet {
        KeySet {
            secrets: keys
                .iter()
                .map(|(v, k)| TrustedKey {
                    version: (*v).into(),
                    key: k.to_vec(),
                })
                .collect(),
            public_keys: vec![],
        }
    }

    fn inputs(body: &[u8]) -> Inputs<'_> {
        Inputs {
            body,
            url: None,
            query: None,
        }
    }

    fn hmac_check(message: Vec<Part>, signatures: Vec<Vec<u8>>) -> Check {
        Check {
            algorithm: Algorithm::HmacSha256,
            key: None,
            message,
            signatures,
            body_sha256_param: None,
        }
    }

    fn one(check: Check, timestamp: Option<i64>) -> Prepared {
        Prepared {
            checks: vec![check],
            timestamp,
        }
    }

    fn run(
        declared: &[Algorithm],
        set: &KeySet,
        prepared: &Prepared,
        inputs: &Inputs<'_>,
        fresh: bool,
    ) -> Result<Passed, VerifyError> {
        verify(declared, &|_| set, prepared, inputs, fresh)
    }

    fn mac(key: &[u8], message: &[Part], body: &[u8]) -> Vec<u8> {
        let pieces = resolve(0, message, None, &inputs(body)).unwrap().unwrap();
        mac_of(MacAlgorithm::Sha256, key, &pieces, "").to_vec()
    }

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

    fn sig_check(message: Vec<Part>, ts: Option<i64>) -> Prepared {
        one(hmac_check(message, vec![vec![0; 32]]), ts)
    }

    fn validated(
        p: &Prepared,
        body_len: usize,
        fresh: bool,
    ) -> Result<Vec<Coverage>, ContractViolation> {
        let body = vec![b'x'; body_len];
        validate(p, HMAC, &inputs(&body), fresh)
    }

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
        let mut sigs = sig_check(vec![Part::RawBody], None);
        sigs.checks[0].signatures = vec![vec![1; 32]; MAX_SIGNATURES + 1];
        assert!(matches!(
            validated(&sigs, 1, false),
            Err(ContractViolation::TooManySignatures { .. })
        ));
        sigs.checks[0].signatures = vec![vec![1; MAX_SIGNATURE_BYTES + 1]];
        assert!(matches!(
            validated(&sigs, 1, false),
            Err(ContractViolation::SignatureTooLong { .. })
        ));
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

    #[test]
    fn urls_are_signed_in_either_port_form() {
        assert_eq!(
            url_forms("https://example.com/hook?a=1"),
            [
                "https://example.com/hook?a=1",
                "https://example.com:443/hook?a=1"
            ]
        );
        assert_eq!(
            url_forms("https://u:p@example.com:443/x"),
            ["https://u:p@example.com:443/x", "https://u:p@example.com/x"]
        );
        assert_eq!(
            url_forms("http://[::1]/x"),
            ["http://[::1]/x", "http://[::1]:80/x"]
        );
        assert_eq!(
            url_forms("https://example.com:8443/x"),
            ["https://example.com:8443/x", "https://example.com/x"]
        );

        let body = b"a=1";
        let url = "https://example.com/hook?x=y";
        let with_port = "https://example.com:443/hook?x=y";
        let key = b"token";
        let signed = |u: &str| {
            let mut m = <Hmac<sha1::Sha1> as Mac>::new_from_slice(key).unwrap();
            m.update(u.as_bytes());
            m.update(b"a1");
            m.finalize().into_bytes().to_vec()
        };
        let set = secrets(&[("t", key)]);
        let declared = [Algorithm::HmacSha1];
        let at = |sig: Vec<u8>| {
            one(
                Check {
                    algorithm: Algorithm::HmacSha1,
                    key: None,
                    message: vec![Part::Url, Part::SortedFormParams],
                    signatures: vec![sig],
                    body_sha256_param: None,
                },
                None,
            )
        };
        let req = Inputs {
            body,
            url: Some(url),
            query: Some("x=y"),
        };
        assert!(run(&declared, &set, &at(signed(url)), &req, false).is_ok());
        assert!(run(&declared, &set, &at(signed(with_port)), &req, false).is_ok());
        assert_eq!(
            run(
                &declared,
                &set,
                &at(signed("https://example.com/hook?x=z")),
                &req,
                false
            )
            .unwrap_err(),
            VerifyError::NoMatch
        );
        let no_url = Inputs { url: None, ..req };
        assert_eq!(
            run(&declared, &set, &at(signed(url)), &no_url, false).unwrap_err(),
            VerifyError::Contract(ContractViolation::NoPublicUrl(0))
        );
    }

    #[test]
    fn form_parameters_are_sorted_and_decoded() {
        assert_eq!(
            sorted_form_params(b"To=%2B1555&From=%2B1666&Body=hi+there&A=2&A=1&A=2").unwrap(),
            b"A1A2Bodyhi thereFrom+1666To+1555"
        );
        assert_eq!(sorted_form_params(b"").unwrap(), b"");
        assert!(sorted_form_params(b"\xff=1").is_none());
    }

    #[test]
    fn a_body_digest_in_the_signed_url_covers_the_body() {
        let body = br#"{"a":1}"#;
        let digest = hex::encode(sha2::Sha256::digest(body));
        let query = format!("bodySHA256={digest}");
        let url = format!("https://example.com/hook?{query}");
        let key = b"token";
        let mut m = <Hmac<sha1::Sha1> as Mac>::new_from_slice(key).unwrap();
        m.update(url.as_bytes());
        let sig = m.finalize().into_bytes().to_vec();
        let p = one(
            Check {
                algorithm: Algorithm::HmacSha1,
                key: None,
                message: vec![Part::Url],
                signatures: vec![sig],
                body_sha256_param: Some("bodySHA256".into()),
            },
            None,
        );
        let set = secrets(&[("t", key)]);
        let declared = [Algorithm::HmacSha1];
        let req = |body: &'static [u8]| Inputs {
            body,
            url: Some(url.as_str()),
            query: Some(query.as_str()),
        };
        assert!(run(&declared, &set, &p, &req(body), false).is_ok());
        assert_eq!(
            run(&declared, &set, &p, &req(br#"{"a":2}"#), false).unwrap_err(),
            VerifyError::NoMatch
        );
        let mut unbound = p.clone();
        unbound.checks[0].body_sha256_param = None;
        assert_eq!(
            run(&declared, &set, &unbound, &req(body), false).unwrap_err(),
            VerifyError::Contract(ContractViolation::BodyNotCovered(0))
        );
    }

    #[test]
    fn batch_items_are_signed_slices_and_events_stay_inside_them() {
        // Two items; each check signs "<id>:<value>" taken from its own item.
        let body = br#"[{"id":"a\/1","v":10},{"id":"b","v":20}]"#;
        let find = |needle: &[u8]| {
            let at = memmem::find(body, needle).unwrap() as u64;
            Span {
                start: at,
                end: at + needle.len() as u64,
            }
        };
        let item = |id: &[u8], v: &[u8], whole: &[u8]| {
            let (id, v) = (find(id), find(v));
            (
                vec![
                    Part::BodyJsonString(id),
                    Part::Literal(b":".to_vec()),
                    Part::BodySpan(v),
                ],
                find(whole),
            )
        };
        let (m1, s1) = item(br#""a\/1""#, b"10", br#"{"id":"a\/1","v":10}"#);
        let (m2, s2) = item(br#""b""#, b"20", br#"{"id":"b","v":20}"#);
        let key = b"adyen";
        let sig = |plain: &[u8]| {
            let mut m = <Hmac<sha2::Sha256> as Mac>::new_from_slice(key).unwrap();
            m.update(plain);
            m.finalize().into_bytes().to_vec()
        };
        let prepared = Prepared {
            checks: vec![
                hmac_check(m1, vec![sig(b"a/1:10")]),
                hmac_check(m2, vec![sig(b"b:20")]),
            ],
            timestamp: None,
        };
        let set = secrets(&[("k", key)]);
        let passed = run(HMAC, &set, &prepared, &inputs(body), false).unwrap();
        assert_eq!(passed.coverage, [Coverage::Items, Coverage::Items]);
        let event = |signed_by: Option<u32>, span: Option<Span>| Envelope {
            event_id: "e".into(),
            event_type: "t".into(),
            object_id: None,
            object_version: None,
            created_at: None,
            route: None,
            span,
            signed_by,
        };
        let len = body.len();
        assert!(
            check_items(
                &passed,
                &prepared,
                &[event(Some(0), Some(s1)), event(Some(1), Some(s2))],
                len
            )
            .is_ok()
        );
        assert_eq!(
            check_items(&passed, &prepared, &[event(None, Some(s1))], len),
            Err(ContractViolation::ItemNotSigned(0))
        );
        assert_eq!(
            check_items(&passed, &prepared, &[event(Some(0), Some(s2))], len),
            Err(ContractViolation::ItemOutsideSpan(0))
        );
        assert_eq!(
            check_items(&passed, &prepared, &[event(Some(2), Some(s2))], len),
            Err(ContractViolation::ItemNotSigned(0))
        );
        let outside = Span {
            start: 0,
            end: len as u64 + 1,
        };
        assert_eq!(
            check_items(&passed, &prepared, &[event(Some(0), Some(outside))], len),
            Err(ContractViolation::EventSpanOutsideBody(0))
        );
        // The escaped value is signed unescaped: signing the raw bytes would not match.
        let mut raw = prepared.clone();
        raw.checks[0].message[0] = Part::BodySpan(find(br#""a\/1""#));
        assert_eq!(
            run(HMAC, &set, &raw, &inputs(body), false).unwrap_err(),
            VerifyError::NoMatch
        );
        // A long literal between slices is not a separator: it could carry anything.
        let mut long = prepared.clone();
        long.checks[0].message[1] = Part::Literal(b"123456789".to_vec());
        assert_eq!(
            run(HMAC, &set, &long, &inputs(body), false).unwrap_err(),
            VerifyError::Contract(ContractViolation::BodyNotCovered(0))
        );
        // A json-string span that is a number.
        let mut number = prepared.clone();
        number.checks[0].message[0] = Part::BodyJsonString(find(b"10"));
        assert_eq!(
            run(HMAC, &set, &number, &inputs(body), false).unwrap_err(),
            VerifyError::Contract(ContractViolation::NotAJsonString(0))
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
                Just(Part::Literal(b"1700000000.".to_vec())),
                (0u64..80, 0u64..80).prop_map(|(a, b)| Part::BodySpan(Span { start: a, end: b })),
                Just(Part::Literal(b":".to_vec())),
            ]
        }

        /// Arbitrary results, sometimes past every bound; `sign` replaces the candidates with
        /// the right MACs so that some of them verify.
        fn prepared() -> impl Strategy<Value = (Prepared, bool)> {
            let check = (
                prop_oneof![vec(part(), 0..6), vec(part(), 60..70)],
                vec(vec(any::<u8>(), 0..40), 0..3),
            )
                .prop_map(|(message, signatures)| hmac_check(message, signatures));
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
                            let declared_form = check.message.iter().all(|p| match p {
                                Part::Literal(l) => l.len() <= MAX_SEPARATOR_BYTES,
                                Part::BodySpan(s) => s.start <= s.end && s.end <= body.len() as u64,
                                _ => false,
                            });
                            prop_assert!(declared_form);
                        }
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

//! Properties of batch item checks and handshake answers, over random (careless) adapter
//! results. The general ones (bounds, coverage, timestamps) are in `mod.rs`'s tests.

use memchr::memmem;
use proptest::collection::vec;
use proptest::prelude::*;

use super::crypto::hmac_sha256_hex;
use super::test_kit::*;
use super::*;
use crate::adapter::{Check, MacAlgorithm, Span};

const TS: i64 = 1_700_000_000;
const SECRET: &[u8] = b"secret";

/// Each HMAC check's candidate replaced by its right MAC over `body` (a token's by the secret),
/// so that whatever the host's rules allow verifies.
fn signed(mut prepared: Prepared, body: &[u8]) -> Prepared {
    for check in &mut prepared.checks {
        check.signatures = if check.algorithm == Algorithm::Token {
            vec![SECRET.to_vec()]
        } else {
            match resolve(0, &check.message, None, &inputs(body)) {
                Ok(Some(pieces)) => {
                    vec![mac_of(MacAlgorithm::Sha256, SECRET, &pieces, "").to_vec()]
                }
                _ => vec![vec![0; 32]],
            }
        };
    }
    prepared
}

/// The body slices a check signs.
fn slices(check: &Check) -> impl Iterator<Item = Span> + '_ {
    check.message.iter().filter_map(|p| match p {
        Part::BodySpan(s) | Part::BodyJsonString(s) => Some(*s),
        _ => None,
    })
}

/// An item check's parts, careless ones among them: empty and outlying slices, literals at the
/// ends, long runs of short literals.
fn item_part() -> impl Strategy<Value = Part> {
    prop_oneof![
        3 => (0u64..32, 0u64..8).prop_map(|(a, n)| Part::BodySpan(Span { start: a, end: a + n })),
        1 => (0u64..40, 0u64..40).prop_map(|(a, b)| Part::BodySpan(Span { start: a, end: b })),
        1 => Just(Part::Literal(b":".to_vec())),
        1 => Just(Part::Literal(b"12345678".to_vec())),
        1 => vec(any::<u8>(), 0..4).prop_map(Part::Literal),
    ]
}

/// A well-formed item check: non-empty slices starting before `max_start`, joined by `:`
/// (also the verify loop's properties' batches).
pub(super) fn item_message(max_start: u64) -> impl Strategy<Value = Vec<Part>> {
    vec((0..max_start, 1u64..8), 1..4).prop_map(|spans| {
        let mut message = vec![];
        for (start, len) in spans {
            if !message.is_empty() {
                message.push(Part::Literal(b":".to_vec()));
            }
            message.push(Part::BodySpan(Span {
                start,
                end: start + len,
            }));
        }
        message
    })
}

/// An event: the check it names (or none), and how far its span reaches past (or short of)
/// the bytes that check signs, on each side.
type EventPlan = (Option<u32>, i64, i64);

/// Random item checks, events naming them (or not), a body and bytes to flip.
type Batch = (Prepared, Vec<EventPlan>, Vec<u8>, Vec<usize>);

fn batch() -> impl Strategy<Value = Batch> {
    let check =
        prop_oneof![item_message(32), vec(item_part(), 1..6)].prop_map(|m| hmac_check(m, vec![]));
    (
        vec(check, 1..4),
        vec(
            (prop::option::weighted(0.9, 0u32..3), -1i64..4, -1i64..4),
            0..4,
        ),
        vec(any::<u8>(), 36..48),
        vec(any::<usize>(), 1..3),
    )
        .prop_map(|(checks, events, body, flips)| {
            let prepared = Prepared {
                checks,
                timestamp: None,
            };
            (prepared, events, body, flips)
        })
}

/// The span an event plan makes of the bytes its check signs (clipped to the body).
fn planned_span(prepared: &Prepared, (by, before, after): &EventPlan, len: usize) -> Span {
    let check = by.and_then(|c| prepared.checks.get(c as usize));
    let own: Vec<Span> = check.map(|c| slices(c).collect()).unwrap_or_default();
    let start = own.iter().map(|s| s.start).min().unwrap_or(0) as i64 - before;
    let end = own.iter().map(|s| s.end).max().unwrap_or(len as u64) as i64 + after;
    let clip = |n: i64| n.clamp(0, len as i64) as u64;
    Span {
        start: clip(start.min(end)),
        end: clip(end.max(start)),
    }
}

/// A check for a handshake's verification: the forms an adapter may take, good and careless.
fn answer_check() -> impl Strategy<Value = Check> {
    let ts = TS.to_string();
    prop_oneof![
        // Zoom's: a timestamp then the whole body.
        4 => Just(hmac_check(
            vec![Part::Literal(format!("v0:{ts}:").into_bytes()), Part::RawBody],
            vec![],
        )),
        // The whole body, no timestamp.
        1 => Just(hmac_check(vec![Part::RawBody], vec![])),
        // Sorted form parameters: other bodies share the signature.
        1 => Just(hmac_check(
            vec![Part::Literal(ts.clone().into_bytes()), Part::SortedFormParams],
            vec![],
        )),
        // One slice of the body: an item check.
        1 => (0u64..30, 1u64..12)
            .prop_map(|(a, n)| hmac_check(vec![Part::BodySpan(Span { start: a, end: a + n })], vec![])),
        // A token signs nothing.
        1 => Just(Check {
            algorithm: Algorithm::Token,
            ..hmac_check(vec![], vec![])
        }),
    ]
}

/// A body: random bytes, a form, or JSON with a token that may need escapes.
fn answer_body() -> impl Strategy<Value = Vec<u8>> {
    let ts = TS.to_string();
    prop_oneof![
        vec(any::<u8>(), 0..40),
        Just(format!("{ts}&a=1&b=2").into_bytes()),
        any::<String>().prop_map(|token| {
            serde_json::json!({"payload": {"plainToken": token}, "event": "endpoint.url_validation"})
                .to_string()
                .into_bytes()
        }),
        Just(format!(r#"{{"t":{ts},"plainToken":"a\"b\\c\/\u00e9","k\u0065y":"v"}}"#).into_bytes()),
    ]
}

/// Every string of a JSON document, keys included, decoded: an oracle independent of the
/// host's lexical scan.
fn json_strings(value: &serde_json::Value, out: &mut Vec<String>) {
    match value {
        serde_json::Value::String(s) => out.push(s.clone()),
        serde_json::Value::Array(items) => items.iter().for_each(|v| json_strings(v, out)),
        serde_json::Value::Object(fields) => {
            for (k, v) in fields {
                out.push(k.clone());
                json_strings(v, out);
            }
        }
        _ => {}
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1024, ..ProptestConfig::default() })]

    /// Random item checks, signed: changing any byte a check signs fails verification (no two
    /// bodies that differ in signed bytes verify under one signature), changing any other byte
    /// does not matter to it, and an event is accepted only over bytes its own check signs.
    #[test]
    fn item_checks_never_verify_two_bodies_under_one_signature_nor_accept_an_unsigned_body(
        (prepared, events, body, flips) in batch(),
    ) {
        let prepared = signed(prepared, &body);
        let set = secrets(&[("k", SECRET)]);
        let Ok(passed) = run(HMAC, &set, &prepared, &inputs(&body), false) else {
            return Ok(());
        };
        prop_assert!(passed.coverage.iter().all(|c| *c == Coverage::Items));
        let signed_at = |at: usize| {
            prepared.checks.iter().flat_map(slices).any(|s| s.start as usize <= at && at < s.end as usize)
        };
        // Every item check signs at least one body byte.
        for check in &prepared.checks {
            prop_assert!(slices(check).any(|s| s.start < s.end));
        }
        let mut other = body.clone();
        for at in flips.iter().map(|f| f % body.len()) {
            other[at] ^= 0x5a;
        }
        let differs_in_signed_bytes = (0..body.len()).any(|at| other[at] != body[at] && signed_at(at));
        let verified_again = run(HMAC, &set, &prepared, &inputs(&other), false).is_ok();
        prop_assert_eq!(verified_again, !differs_in_signed_bytes);

        let events: Vec<(Option<u32>, Span)> = events
            .iter()
            .map(|plan| (plan.0, planned_span(&prepared, plan, body.len())))
            .collect();
        let envelopes: Vec<_> = events.iter().map(|(by, s)| event(*by, Some(*s))).collect();
        if check_items(&passed, &prepared, &envelopes, body.len()).is_ok() {
            for (by, span) in &events {
                // Only item checks signed: every event names its check, lies around all it
                // signs, and so holds at least one signed byte.
                let by = by.expect("an event of items names its check") as usize;
                prop_assert!(span.end as usize <= body.len());
                let mut own = slices(&prepared.checks[by]).peekable();
                prop_assert!(own.peek().is_some());
                for s in own {
                    prop_assert!(span.start <= s.start && s.end <= span.end && s.start < s.end);
                }
                // No byte another check signs.
                for (c, check) in prepared.checks.iter().enumerate() {
                    if c != by {
                        prop_assert!(slices(check).all(|s| s.end <= span.start || span.end <= s.start));
                    }
                }
            }
        }
    }

    /// A MAC answer is computed only under a secret whose check signs the whole body's exact
    /// bytes, with a checked signed timestamp, over bytes of that body (a run, or a JSON
    /// string's value); and it is computed whenever those hold.
    #[test]
    fn a_mac_answer_is_only_computed_over_bytes_of_a_verified_fresh_body(
        checks in vec(answer_check(), 1..3),
        timestamp in prop::option::weighted(0.8, Just(TS)),
        freshness in prop::bool::weighted(0.8),
        body in answer_body(),
        (kind, a, b, random) in (0u8..4, any::<usize>(), any::<usize>(), vec(any::<u8>(), 0..12)),
    ) {
        let prepared = signed(Prepared { checks, timestamp }, &body);
        let set = secrets(&[("k", SECRET)]);
        let declared = [Algorithm::HmacSha256, Algorithm::Token];
        let Ok(passed) = run(&declared, &set, &prepared, &inputs(&body), freshness) else {
            return Ok(());
        };
        let run_of_body = |len: usize| {
            let start = a % (body.len() + 1);
            let end = start + len.min(body.len() - start);
            body[start..end].to_vec()
        };
        let json = serde_json::from_slice::<serde_json::Value>(&body).ok();
        let mut strings = vec![];
        if let Some(v) = &json {
            json_strings(v, &mut strings);
        }
        let input = match kind {
            0 => random,
            1 => run_of_body(1 + b % 16),
            2 if !strings.is_empty() => strings[b % strings.len()].clone().into_bytes(),
            // A run of the body and then bytes the adapter chose.
            _ => [run_of_body(b % 8), random].concat(),
        };
        let answered = answer_mac(&passed, &prepared, freshness, &body, &input);

        let first = passed.applied.iter().position(|a| *a).unwrap();
        let check = &prepared.checks[first];
        let whole_fresh = check.algorithm == Algorithm::HmacSha256
            && check.message.iter().any(|p| matches!(p, Part::RawBody))
            && freshness
            && prepared.timestamp.is_some();
        let in_body = !input.is_empty() && memmem::find(&body, &input).is_some();
        let a_string = !input.is_empty() && strings.iter().any(|s| s.as_bytes() == input);
        match answered {
            Ok(mac) => {
                prop_assert!(whole_fresh);
                prop_assert!(!input.is_empty());
                // For a JSON body the independent oracle decides; other bodies hold quoted runs
                // the host may read as strings, but never bytes from outside the body.
                if json.is_some() {
                    prop_assert!(in_body || a_string);
                } else {
                    prop_assert!(in_body || memmem::find(&body, b"\"").is_some());
                }
                prop_assert_eq!(mac, hmac_sha256_hex(SECRET, &input));
            }
            Err(_) => prop_assert!(!(whole_fresh && (in_body || a_string))),
        }
    }
}

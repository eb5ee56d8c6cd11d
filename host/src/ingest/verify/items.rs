//! Batch items: after `parse`, each event of a batch signed per item lies around the slices
//! the check it names signs.

use super::contract::{ContractViolation, Coverage};
use super::outcome::Passed;
use crate::adapter::{Envelope, Part, Prepared, Span};

impl Passed {
    /// Whether a check that applied signs the whole body (or none signs anything but tokens),
    /// so events need not name their item's check.
    fn body_covered(&self) -> bool {
        let mut applied = self.coverage.iter().zip(&self.applied).filter(|(_, a)| **a);
        applied.clone().any(|(c, _)| *c == Coverage::Whole)
            || applied.all(|(c, _)| *c == Coverage::Token)
    }
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
        let inside = slices(&prepared.checks[item].message)
            .all(|s| span.start <= s.start && s.end <= span.end);
        if !inside {
            return Err(ContractViolation::ItemOutsideSpan(n));
        }
        // What lies between an item's slices is the item's own (the provider's unsigned
        // fields); another item's signed bytes are not, or one signature would store them too.
        let other = prepared.checks.iter().enumerate().find(|(c, check)| {
            *c != item
                && passed.coverage[*c] == Coverage::Items
                && passed.applied[*c]
                && slices(&check.message).any(|s| s.start < span.end && span.start < s.end)
        });
        if let Some((check, _)) = other {
            return Err(ContractViolation::ItemOverAnotherItem { event: n, check });
        }
    }
    Ok(())
}

/// The body slices a check signs.
fn slices(message: &[Part]) -> impl Iterator<Item = &Span> + '_ {
    message.iter().filter_map(|p| match p {
        Part::BodySpan(s) | Part::BodyJsonString(s) => Some(s),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use hmac::{Hmac, Mac};
    use memchr::memmem;

    use super::*;
    use crate::ingest::verify::test_kit::*;
    use crate::ingest::verify::{Coverage, VerifyError};

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
        // Around its own slices, but over the other item's too: the whole body is not item 0.
        let whole = Span {
            start: 0,
            end: len as u64,
        };
        assert_eq!(
            check_items(&passed, &prepared, &[event(Some(0), Some(whole))], len),
            Err(ContractViolation::ItemOverAnotherItem { event: 0, check: 1 })
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
            VerifyError::Contract(ContractViolation::SeparatorTooLong(0))
        );
        // A json-string span that is a number.
        let mut number = prepared.clone();
        number.checks[0].message[0] = Part::BodyJsonString(find(b"10"));
        assert_eq!(
            run(HMAC, &set, &number, &inputs(body), false).unwrap_err(),
            VerifyError::Contract(ContractViolation::NotAJsonString(0))
        );
    }

    #[test]
    fn an_item_check_signs_body_bytes_joined_by_short_separators() {
        let span = |start, end| Part::BodySpan(Span { start, end });
        let lit = |b: &[u8]| Part::Literal(b.to_vec());
        let item = vec![span(0, 4), lit(b":"), span(5, 9)];
        assert_eq!(
            validated(&sig_check(item, None), 10, false),
            Ok(vec![Coverage::Items])
        );
        // Adjacent short separators are one run: "::" is a separator (Adyen's empty field).
        let empty_field = vec![span(0, 4), lit(b":"), lit(b":"), span(5, 9)];
        assert!(validated(&sig_check(empty_field, None), 10, false).is_ok());
        let refused = [
            // Four 8-byte literals and an empty span: no body byte signed.
            (
                vec![
                    lit(b"aaaaaaaa"),
                    lit(b"bbbbbbbb"),
                    lit(b"cccccccc"),
                    lit(b"dddddddd"),
                    span(3, 3),
                ],
                ContractViolation::EmptySlice(0),
            ),
            (
                vec![span(0, 4), lit(b":"), span(9, 9)],
                ContractViolation::EmptySlice(0),
            ),
            (vec![lit(b"wharf")], ContractViolation::BodyNotCovered(0)),
            // A 400-byte literal cut into 8-byte parts, between two body slices.
            (
                [
                    vec![span(0, 1)],
                    vec![lit(b"12345678"); 50],
                    vec![span(1, 2)],
                ]
                .concat(),
                ContractViolation::SeparatorTooLong(0),
            ),
            (
                vec![span(0, 1), lit(b"12345"), lit(b"6789"), span(1, 2)],
                ContractViolation::SeparatorTooLong(0),
            ),
            (
                vec![lit(b":"), span(0, 4)],
                ContractViolation::LiteralOutsideSlices(0),
            ),
            (
                vec![span(0, 4), lit(b":")],
                ContractViolation::LiteralOutsideSlices(0),
            ),
            (
                [vec![lit(b"12345678"); 50], vec![span(0, 1)]].concat(),
                ContractViolation::LiteralOutsideSlices(0),
            ),
        ];
        for (message, violation) in refused {
            assert_eq!(
                validated(&sig_check(message.clone(), None), 10, false),
                Err(violation),
                "{message:?}"
            );
        }
    }
}

//! Reading header values and verified bodies: plain Rust over bytes, tested on the host.
//!
//! Every decoder here fails closed: `None` means "not usable", and an empty input never
//! decodes to an empty signature (a header of just `v1,` must never become a candidate).

use base64::Engine as _;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};

pub use serde_json::Value;

/// Standard alphabet; accepts input with or without `=` padding.
const BASE64: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// Decodes hexadecimal (either case). `None` when empty or not valid hex.
pub fn hex_decode(input: &[u8]) -> Option<Vec<u8>> {
    if input.is_empty() {
        return None;
    }
    hex::decode(input).ok()
}

/// Decodes standard base64, padding optional. `None` when empty or not valid base64.
pub fn base64_decode(input: &[u8]) -> Option<Vec<u8>> {
    if input.is_empty() {
        return None;
    }
    BASE64.decode(input).ok()
}

/// Splits a header value on `sep`, trimming ASCII whitespace and skipping empty items.
pub fn split_list(value: &[u8], sep: u8) -> impl Iterator<Item = &[u8]> {
    value
        .split(move |&b| b == sep)
        .map(<[u8]>::trim_ascii)
        .filter(|item| !item.is_empty())
}

/// Splits `item` at the first `sep` into a trimmed key and value.
pub fn split_pair(item: &[u8], sep: u8) -> Option<(&[u8], &[u8])> {
    let at = item.iter().position(|&b| b == sep)?;
    Some((item[..at].trim_ascii(), item[at + 1..].trim_ascii()))
}

/// The literal prefix of a signed message whose pieces are joined by `sep` before the raw
/// body: `[id, timestamp]` with `b'.'` gives `id.timestamp.` (Standard Webhooks, Stripe).
pub fn prefix_before_body(pieces: &[&[u8]], sep: u8) -> Vec<u8> {
    let mut out = Vec::with_capacity(pieces.iter().map(|p| p.len() + 1).sum());
    for piece in pieces {
        out.extend_from_slice(piece);
        out.push(sep);
    }
    out
}

/// Parses a Unix timestamp written as plain decimal digits (no sign, no spaces).
pub fn parse_unix_timestamp(input: &[u8]) -> Option<i64> {
    if input.is_empty() || !input.iter().all(u8::is_ascii_digit) {
        return None;
    }
    input.iter().try_fold(0i64, |acc, &d| {
        acc.checked_mul(10)?.checked_add(i64::from(d - b'0'))
    })
}

/// Parses a JSON document. `None` when the bytes are not JSON.
pub fn parse_json(body: &[u8]) -> Option<Value> {
    serde_json::from_slice(body).ok()
}

/// Parses a JSON document keeping only the values at `paths` (object keys, as for [`at`]):
/// everything else is checked to be JSON and skipped without being copied, so a large body
/// costs one pass and no allocation for what the adapter does not read. `None` exactly when
/// [`parse_json`] would be `None`; for every one of `paths`, [`at`], [`str_at`] and [`i64_at`]
/// on the result give what they give on `parse_json`'s.
pub(crate) fn parse_json_paths(body: &[u8], paths: &[&[&str]]) -> Option<Value> {
    use serde::de::DeserializeSeed;
    // JSON is UTF-8 throughout, including the strings that are skipped unread.
    let text = std::str::from_utf8(body).ok()?;
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let value = Kept { paths, depth: 0 }
        .deserialize(&mut deserializer)
        .ok()?;
    deserializer.end().ok()?;
    Some(value)
}

/// The part of a JSON value that `paths` reach below `depth`; `Null` where none do.
#[derive(Clone, Copy)]
struct Kept<'p> {
    paths: &'p [&'p [&'p str]],
    depth: usize,
}

impl<'de> serde::de::DeserializeSeed<'de> for Kept<'_> {
    type Value = Value;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        if self.paths.iter().any(|p| p.len() == self.depth) {
            return serde::Deserialize::deserialize(d);
        }
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Kept<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("JSON")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut kept = serde_json::Map::new();
        while let Some(Key(key)) = map.next_key::<Key>()? {
            let below: Vec<&[&str]> = self
                .paths
                .iter()
                .copied()
                .filter(|p| p.get(self.depth) == Some(&&*key))
                .collect();
            if below.is_empty() {
                map.next_value::<serde::de::IgnoredAny>()?;
            } else {
                let seed = Kept {
                    paths: &below,
                    depth: self.depth + 1,
                };
                // Later duplicates win, as in `parse_json`.
                kept.insert(key.into_owned(), map.next_value_seed(seed)?);
            }
        }
        Ok(Value::Object(kept))
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
        Ok(Value::Null)
    }

    fn visit_bool<E>(self, _: bool) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_str<E>(self, _: &str) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
}

/// An object key, borrowed from the document unless it has escapes.
struct Key<'de>(std::borrow::Cow<'de, str>);

impl<'de> serde::Deserialize<'de> for Key<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an object key")
            }
            fn visit_borrowed_str<E>(self, key: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(key.into()))
            }
            fn visit_str<E>(self, key: &str) -> Result<Key<'de>, E> {
                Ok(Key(key.to_owned().into()))
            }
        }
        d.deserialize_str(Visitor)
    }
}

/// The value at `path` (object keys), if every step exists.
pub fn at<'a>(json: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(json, |node, key| node.get(key))
}

/// The string at `path`, if present and a string.
pub fn str_at<'a>(json: &'a Value, path: &[&str]) -> Option<&'a str> {
    at(json, path)?.as_str()
}

/// The integer at `path`, if present and representable as `i64`.
pub fn i64_at(json: &Value, path: &[&str]) -> Option<i64> {
    at(json, path)?.as_i64()
}

/// An `application/x-www-form-urlencoded` body (Slack commands, Twilio) as (name, value)
/// pairs in order; `None` if a decoded name or value is not UTF-8 (an id must not be lossy).
pub fn form_pairs(body: &[u8]) -> Option<Vec<(String, String)>> {
    let decode = |s: &[u8]| {
        let plus: Vec<u8> = s
            .iter()
            .map(|&b| if b == b'+' { b' ' } else { b })
            .collect();
        percent_encoding::percent_decode(&plus)
            .decode_utf8()
            .ok()
            .map(|s| s.into_owned())
    };
    body.split(|&b| b == b'&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (name, value) = match pair.iter().position(|&b| b == b'=') {
                Some(at) => (&pair[..at], &pair[at + 1..]),
                None => (pair, &b""[..]),
            };
            Some((decode(name)?, decode(value)?))
        })
        .collect()
}

/// The first value of `name` among form pairs.
pub fn form_value<'a>(pairs: &'a [(String, String)], name: &str) -> Option<&'a str> {
    pairs
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
}

/// A header value as a non-empty UTF-8 string.
pub fn utf8_nonempty(value: Vec<u8>) -> Option<String> {
    String::from_utf8(value).ok().filter(|s| !s.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signed_prefix() {
        assert_eq!(
            prefix_before_body(&[b"msg_1", b"1614265330"], b'.'),
            b"msg_1.1614265330."
        );
        assert_eq!(prefix_before_body(&[b"123"], b'.'), b"123.");
    }

    #[test]
    fn forms() {
        let pairs = form_pairs(b"command=%2Fdeploy&text=a+b%20c&empty=&flag").unwrap();
        assert_eq!(form_value(&pairs, "command"), Some("/deploy"));
        assert_eq!(form_value(&pairs, "text"), Some("a b c"));
        assert_eq!(form_value(&pairs, "empty"), Some(""));
        assert_eq!(form_value(&pairs, "flag"), Some(""));
        assert_eq!(form_value(&pairs, "missing"), None);
        assert_eq!(form_pairs(b"id=%ff"), None, "not UTF-8 once decoded");
    }

    #[test]
    fn hex() {
        assert_eq!(hex_decode(b"00ffAB"), Some(vec![0, 0xff, 0xab]));
        assert_eq!(hex_decode(b""), None);
        assert_eq!(hex_decode(b"abc"), None);
        assert_eq!(hex_decode(b"zz"), None);
    }

    #[test]
    fn base64() {
        assert_eq!(base64_decode(b"aGk="), Some(b"hi".to_vec()));
        assert_eq!(base64_decode(b"aGk"), Some(b"hi".to_vec()));
        assert_eq!(base64_decode(b""), None);
        assert_eq!(
            base64_decode(b"a-_b"),
            None,
            "URL-safe alphabet is not standard"
        );
        assert_eq!(base64_decode(b"!!!!"), None);
        let sig = base64_decode(b"g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=").unwrap();
        assert_eq!(sig.len(), 32);
    }

    #[test]
    fn lists_and_pairs() {
        let items: Vec<_> = split_list(b" v1,abc  v1a,xyz ", b' ').collect();
        assert_eq!(items, [&b"v1,abc"[..], b"v1a,xyz"]);
        let items: Vec<_> = split_list(b"t=1, v1=aa,,", b',').collect();
        assert_eq!(items, [&b"t=1"[..], b"v1=aa"]);
        assert_eq!(split_pair(b"v1=a=b", b'='), Some((&b"v1"[..], &b"a=b"[..])));
        assert_eq!(split_pair(b"v1,", b','), Some((&b"v1"[..], &b""[..])));
        assert_eq!(split_pair(b"nothing", b'='), None);
    }

    #[test]
    fn timestamps() {
        assert_eq!(parse_unix_timestamp(b"1614265330"), Some(1_614_265_330));
        assert_eq!(parse_unix_timestamp(b"0"), Some(0));
        for bad in [
            &b""[..],
            b"-1",
            b"+1",
            b" 1",
            b"1.5",
            b"1e9",
            b"99999999999999999999",
        ] {
            assert_eq!(parse_unix_timestamp(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn json_paths() {
        let json =
            parse_json(br#"{"id":"evt_1","created":17,"data":{"object":{"id":"cus_1"}}}"#).unwrap();
        assert_eq!(str_at(&json, &["data", "object", "id"]), Some("cus_1"));
        assert_eq!(str_at(&json, &["id"]), Some("evt_1"));
        assert_eq!(str_at(&json, &["created"]), None);
        assert_eq!(i64_at(&json, &["created"]), Some(17));
        assert_eq!(str_at(&json, &["data", "missing", "id"]), None);
        assert_eq!(at(&json, &[]), Some(&json));
        assert!(parse_json(b"Hello, World!").is_none());
    }

    #[test]
    fn json_paths_kept() {
        let body = br#"{"id":"evt_1","big":"xxxx","created":17,"data":{"object":{"id":"cus_1","n":[1,2]}},"id":"evt_2"}"#;
        let paths: &[&[&str]] = &[&["id"], &["created"], &["data", "object", "id"]];
        let kept = parse_json_paths(body, paths).unwrap();
        assert_eq!(
            str_at(&kept, &["id"]),
            Some("evt_2"),
            "later duplicates win"
        );
        assert_eq!(i64_at(&kept, &["created"]), Some(17));
        assert_eq!(str_at(&kept, &["data", "object", "id"]), Some("cus_1"));
        assert_eq!(at(&kept, &["big"]), None, "not kept");
        assert!(parse_json_paths(b"Hello, World!", paths).is_none());
        assert!(
            parse_json_paths(b"{\"a\":\"\xff\"}", paths).is_none(),
            "not UTF-8"
        );
        assert!(
            parse_json_paths(b"{\"a\":1} x", paths).is_none(),
            "trailing bytes"
        );
    }

    #[test]
    fn utf8() {
        assert_eq!(utf8_nonempty(b"abc".to_vec()).as_deref(), Some("abc"));
        assert_eq!(utf8_nonempty(Vec::new()), None);
        assert_eq!(utf8_nonempty(vec![0xff]), None);
    }

    /// The decoders see attacker-controlled header and body bytes before anything is
    /// verified: whatever they are given, they never panic and fail closed.
    mod properties {
        use super::super::*;
        use proptest::collection::vec;
        use proptest::prelude::*;

        /// JSON documents whose keys often lie on the paths the test reads.
        fn json() -> impl Strategy<Value = Value> {
            let leaf = prop_oneof![
                Just(Value::Null),
                any::<bool>().prop_map(Value::Bool),
                any::<i64>().prop_map(Value::from),
                any::<f64>()
                    .prop_filter("finite", |f| f.is_finite())
                    .prop_map(Value::from),
                "[a-z\\u{e9}\"\\\\]{0,8}".prop_map(Value::String),
            ];
            leaf.prop_recursive(4, 32, 6, |inner| {
                prop_oneof![
                    vec(inner.clone(), 0..4).prop_map(Value::Array),
                    vec(
                        (
                            prop_oneof![Just("id"), Just("a"), Just("b"), Just("c"), Just("x")],
                            inner
                        ),
                        0..6
                    )
                    .prop_map(|pairs| {
                        Value::Object(pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
                    }),
                ]
            })
        }

        proptest! {
            #![proptest_config(ProptestConfig { cases: 1024, ..ProptestConfig::default() })]

            #[test]
            fn decoders_never_panic_nor_yield_an_empty_signature(input in vec(any::<u8>(), 0..96)) {
                prop_assert!(hex_decode(&input).is_none_or(|d| !d.is_empty()));
                prop_assert!(base64_decode(&input).is_none_or(|d| !d.is_empty()));
                if let Some(ts) = parse_unix_timestamp(&input) {
                    prop_assert!(ts >= 0);
                    prop_assert_eq!(std::str::from_utf8(&input).unwrap().parse::<i64>().ok(), Some(ts));
                }
                let _ = form_pairs(&input);
                let _ = parse_json(&input);
                let _ = utf8_nonempty(input.clone());
            }

            #[test]
            fn kept_paths_read_as_the_whole_document_does(
                doc in json(),
                cut in any::<prop::sample::Index>(),
                flip in any::<prop::sample::Index>(),
                damage in 0u8..3,
            ) {
                let mut body = serde_json::to_vec(&doc).unwrap();
                // Sometimes not JSON: truncated, or with one byte changed.
                match damage {
                    1 => body.truncate(cut.index(body.len() + 1)),
                    2 if !body.is_empty() => {
                        let i = flip.index(body.len());
                        body[i] = body[i].wrapping_add(0x80);
                    }
                    _ => {}
                }
                let paths: &[&[&str]] =
                    &[&["id"], &["a", "id"], &["a", "b", "c"], &["b"], &["a", "b"]];
                let whole = parse_json(&body);
                let kept = parse_json_paths(&body, paths);
                prop_assert_eq!(whole.is_some(), kept.is_some());
                if let (Some(whole), Some(kept)) = (whole, kept) {
                    for path in paths {
                        prop_assert_eq!(at(&whole, path), at(&kept, path));
                    }
                }
            }

            #[test]
            fn encodings_round_trip(bytes in vec(any::<u8>(), 1..64)) {
                use base64::Engine as _;
                prop_assert_eq!(hex_decode(hex::encode(&bytes).as_bytes()), Some(bytes.clone()));
                let b64 = base64::engine::general_purpose::STANDARD.encode(&bytes);
                prop_assert_eq!(base64_decode(b64.as_bytes()), Some(bytes.clone()));
                prop_assert_eq!(base64_decode(b64.trim_end_matches('=').as_bytes()), Some(bytes));
            }

            #[test]
            fn lists_and_pairs_never_yield_empty_or_untrimmed_items(
                input in vec(prop_oneof![Just(b' '), Just(b','), Just(b'='), any::<u8>()], 0..64),
                sep in prop_oneof![Just(b' '), Just(b','), Just(b';')],
            ) {
                for item in split_list(&input, sep) {
                    prop_assert!(!item.is_empty());
                    prop_assert_eq!(item, item.trim_ascii());
                    if let Some((key, value)) = split_pair(item, b'=') {
                        prop_assert_eq!(key, key.trim_ascii());
                        prop_assert_eq!(value, value.trim_ascii());
                    }
                }
            }

            #[test]
            fn signed_prefixes_hold_every_piece_in_order(
                pieces in vec(vec(any::<u8>(), 0..12), 0..5),
                sep in any::<u8>(),
            ) {
                let refs: Vec<&[u8]> = pieces.iter().map(Vec::as_slice).collect();
                let prefix = prefix_before_body(&refs, sep);
                let expected: Vec<u8> = pieces.iter().flat_map(|p| p.iter().copied().chain([sep])).collect();
                prop_assert_eq!(prefix, expected);
            }
        }
    }
}

//! Whether an event's bytes can be the projection's document (`object_state.state`, `jsonb`).
//!
//! The bytes go to Postgres as they came: the check walks the JSON without building it. A
//! tree (`serde_json::Value`) and its text again cost a worker more than the rest of the
//! event's processing (an allocation per key, string and number of a 10 KiB event, then every
//! string escaped again), and rounded integers past 2^64 to floats where `jsonb` keeps them
//! exact. What is refused is what was refused before: anything serde_json does not parse
//! (syntax, invalid UTF-8, a lone surrogate, a number past `f64`, nesting past 128), and a
//! string or key holding U+0000, which `jsonb` cannot store.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

/// `body` as the projection's document, or `None` when `jsonb` could not hold it.
pub fn storable_json(body: &[u8]) -> Option<&str> {
    serde_json::from_slice::<Storable>(body).ok()?;
    // Whatever parsed is UTF-8 (outside strings JSON is ASCII, and strings were checked).
    std::str::from_utf8(body).ok()
}

/// Parses a JSON value and keeps nothing of it.
struct Storable;

impl<'de> Deserialize<'de> for Storable {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(Storable)
    }
}

impl<'de> Visitor<'de> for Storable {
    type Value = Storable;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value jsonb can store")
    }

    fn visit_bool<E>(self, _: bool) -> Result<Storable, E> {
        Ok(Storable)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Storable, E> {
        Ok(Storable)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Storable, E> {
        Ok(Storable)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Storable, E> {
        Ok(Storable)
    }
    fn visit_unit<E>(self) -> Result<Storable, E> {
        Ok(Storable)
    }
    fn visit_str<E: de::Error>(self, s: &str) -> Result<Storable, E> {
        if s.contains('\0') {
            return Err(E::custom("jsonb cannot store U+0000"));
        }
        Ok(Storable)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Storable, A::Error> {
        while seq.next_element::<Storable>()?.is_some() {}
        Ok(Storable)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Storable, A::Error> {
        while map.next_entry::<Storable, Storable>()?.is_some() {}
        Ok(Storable)
    }
}

#[cfg(test)]
mod tests {
    use super::storable_json;

    #[test]
    fn json_goes_through_byte_for_byte() {
        let body = br#"{"id":"evt_1","amount":123456789012345678901234567890,"n":[1,2.5e3,null,true],"s":"caf\u00e9 \ud83d\ude00 \\u0000"}"#;
        assert_eq!(
            storable_json(body),
            Some(std::str::from_utf8(body).unwrap())
        );
        assert_eq!(storable_json(b" 42 "), Some(" 42 "));
    }

    #[test]
    fn what_jsonb_or_serde_json_refuses_is_not_a_document() {
        for body in [
            &br#"{"s":"a\u0000b"}"#[..],
            br#"{"a\u0000":1}"#,
            br#"["\ud800"]"#,
            br#"{"n":1e400}"#,
            br#"{"a":1"#,
            br#"{"a":1} x"#,
            b"\xff",
            b"\"\xc3\x28\"",
            b"",
        ] {
            assert_eq!(
                storable_json(body),
                None,
                "{:?}",
                String::from_utf8_lossy(body)
            );
        }
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        assert_eq!(storable_json(deep.as_bytes()), None);
        let within = format!("{}{}", "[".repeat(100), "]".repeat(100));
        assert!(storable_json(within.as_bytes()).is_some());
    }
}

//! Where JSON values lie in the raw body, for batches whose items are stored one by one
//! (SendGrid) or whose fields are signed one by one (Adyen).
//!
//! Built on serde_json's `RawValue`: a `&RawValue` borrowed from the body *is* a slice of it,
//! so its offset is pointer arithmetic and nothing is re-serialised. Objects whose keys repeat
//! are refused: a consumer reading the stored payload may take the other copy of a field than
//! the one that was signed or read here.

use serde::de::{Deserializer as _, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;

use crate::Span;

/// A JSON value of the body: its exact text and where that text lies.
#[derive(Clone, Copy, Debug)]
pub struct Located<'a> {
    raw: &'a RawValue,
    /// Byte offset of the value's first byte in the body.
    start: usize,
}

impl<'a> Located<'a> {
    /// The body's one top-level value (surrounding whitespace, such as SendGrid's trailing
    /// CRLF, is allowed and left out of its span). `None` when the body is not JSON.
    pub fn root(body: &'a [u8]) -> Option<Self> {
        let text = std::str::from_utf8(body).ok()?;
        let raw: &RawValue = serde_json::from_str(text).ok()?;
        Some(Self::inside(text, raw))
    }

    /// `raw` borrowed from `text`: its offset is the distance between the two pointers.
    fn inside(text: &str, raw: &'a RawValue) -> Self {
        let start = raw.get().as_ptr() as usize - text.as_ptr() as usize;
        debug_assert!(start + raw.get().len() <= text.len());
        Self { raw, start }
    }

    /// The value's exact bytes.
    pub fn text(&self) -> &'a str {
        self.raw.get()
    }

    /// The value's span in the body.
    pub fn span(&self) -> Span {
        crate::span(self.start, self.start + self.raw.get().len())
    }

    fn child(&self, raw: &'a RawValue) -> Self {
        let start = self.start + (raw.get().as_ptr() as usize - self.text().as_ptr() as usize);
        Self { raw, start }
    }

    /// An array's elements, in order. `None` when this is not an array.
    pub fn elements(&self) -> Option<Vec<Located<'a>>> {
        let raws = serde_json::Deserializer::from_str(self.text())
            .deserialize_seq(Elements)
            .ok()?;
        Some(raws.into_iter().map(|r| self.child(r)).collect())
    }

    /// An array's elements, in order, when there are at most `max`: `None` when this is not an
    /// array or has more, found at element `max + 1` without reading further (a batch of
    /// 60,000 items costs what 65 do).
    pub fn elements_at_most(&self, max: usize) -> Option<Vec<Located<'a>>> {
        let raws = serde_json::Deserializer::from_str(self.text())
            .deserialize_seq(AtMost(max))
            .ok()?;
        Some(raws.into_iter().map(|r| self.child(r)).collect())
    }

    /// An object's members, in order. `None` when this is not an object or a key repeats.
    pub fn members(&self) -> Option<Members<'a>> {
        let pairs = serde_json::Deserializer::from_str(self.text())
            .deserialize_map(Pairs)
            .ok()?;
        let mut keys: Vec<&str> = pairs.iter().map(|(k, _)| k.as_str()).collect();
        keys.sort_unstable();
        if keys.windows(2).any(|w| w[0] == w[1]) {
            return None;
        }
        let members = pairs.into_iter().map(|(k, r)| (k, self.child(r))).collect();
        Some(Members(members))
    }

    /// Whether the value is a JSON string token (its span then includes the quotes).
    pub fn is_string(&self) -> bool {
        self.text().starts_with('"')
    }

    pub fn is_null(&self) -> bool {
        self.text() == "null"
    }

    /// The string this value decodes to, when it is a string.
    pub fn as_str(&self) -> Option<String> {
        serde_json::from_str(self.text()).ok()
    }

    /// The integer this value is, when it is written as a plain JSON integer.
    pub fn as_i64(&self) -> Option<i64> {
        if !is_integer_text(self.text()) {
            return None;
        }
        self.text().parse().ok()
    }
}

/// Whether `text` is `-?[0-9]+` (JSON never writes leading zeros), so it reads as the integer
/// it denotes: no fraction, no exponent.
pub fn is_integer_text(text: &str) -> bool {
    let digits = text.strip_prefix('-').unwrap_or(text);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

/// An object's members with distinct keys, in order.
#[derive(Debug)]
pub struct Members<'a>(Vec<(String, Located<'a>)>);

impl<'a> Members<'a> {
    /// The value of `key`, if present.
    pub fn get(&self, key: &str) -> Option<Located<'a>> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| *v)
    }

    /// The members of the object at `key`; `None` when absent, not an object or keys repeat.
    pub fn object(&self, key: &str) -> Option<Members<'a>> {
        self.get(key)?.members()
    }

    /// The string at `key`, decoded; `None` when absent or not a string.
    pub fn str(&self, key: &str) -> Option<String> {
        self.get(key)?.as_str()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

struct Elements;

impl<'de> Visitor<'de> for Elements {
    type Value = Vec<&'de RawValue>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON array")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut out = Vec::new();
        while let Some(raw) = seq.next_element::<&RawValue>()? {
            out.push(raw);
        }
        Ok(out)
    }
}

/// Elements up to a count; past it, an error that stops the parse.
struct AtMost(usize);

impl<'de> Visitor<'de> for AtMost {
    type Value = Vec<&'de RawValue>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "a JSON array of at most {} elements", self.0)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut out = Vec::new();
        while let Some(raw) = seq.next_element::<&RawValue>()? {
            if out.len() == self.0 {
                return Err(serde::de::Error::invalid_length(self.0 + 1, &self));
            }
            out.push(raw);
        }
        Ok(out)
    }
}

struct Pairs;

impl<'de> Visitor<'de> for Pairs {
    type Value = Vec<(String, &'de RawValue)>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut out = Vec::new();
        // Keys are decoded (escapes resolved), so `"a"` and `"\u0061"` count as the same key.
        while let Some((key, raw)) = map.next_entry::<String, &RawValue>()? {
            out.push((key, raw));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slice<'b>(body: &'b str, s: &Span) -> &'b str {
        &body[s.start as usize..s.end as usize]
    }

    #[test]
    fn spans_are_the_exact_bytes_of_each_value() {
        let body = "  [{\"a\":1},\r\n {\"b\" : \"x\\u00e9\"} ]\r\n";
        let root = Located::root(body.as_bytes()).unwrap();
        assert_eq!(slice(body, &root.span()), root.text());
        assert!(root.text().starts_with('[') && root.text().ends_with(']'));
        let items = root.elements().unwrap();
        assert_eq!(items.len(), 2);
        assert_eq!(slice(body, &items[0].span()), "{\"a\":1}");
        assert_eq!(slice(body, &items[1].span()), "{\"b\" : \"x\\u00e9\"}");
        let b = items[1].members().unwrap().get("b").unwrap();
        assert_eq!(slice(body, &b.span()), "\"x\\u00e9\"");
        assert!(b.is_string());
        assert_eq!(b.as_str().as_deref(), Some("x\u{e9}"));
        let a = items[0].members().unwrap().get("a").unwrap();
        assert_eq!((a.as_i64(), a.is_string()), (Some(1), false));
    }

    #[test]
    fn nested_offsets_add_up() {
        let body = r#"{"x":[0,{"y":{"z":"deep"}}],"n":null}"#;
        let root = Located::root(body.as_bytes()).unwrap();
        let m = root.members().unwrap();
        let arr = m.get("x").unwrap().elements().unwrap();
        let z = arr[1]
            .members()
            .unwrap()
            .object("y")
            .unwrap()
            .get("z")
            .unwrap();
        assert_eq!(slice(body, &z.span()), "\"deep\"");
        assert!(m.get("n").unwrap().is_null());
        assert_eq!(m.str("n"), None);
        assert_eq!(m.len(), 2);
    }

    #[test]
    fn repeated_keys_are_refused_even_when_escaped() {
        for body in [r#"{"a":1,"a":2}"#, r#"{"a":1,"\u0061":2}"#] {
            assert!(
                Located::root(body.as_bytes()).unwrap().members().is_none(),
                "{body}"
            );
        }
        // Only the object asked about is checked; the same key in two objects is fine.
        let body = r#"[{"a":1},{"a":2}]"#;
        let items = Located::root(body.as_bytes()).unwrap().elements().unwrap();
        assert!(items.iter().all(|i| i.members().is_some()));
    }

    #[test]
    fn elements_past_a_count_are_none() {
        let root = Located::root(b"[1, 2, 3]").unwrap();
        assert_eq!(root.elements_at_most(3).unwrap().len(), 3);
        assert!(root.elements_at_most(2).is_none());
        assert!(Located::root(b"{}").unwrap().elements_at_most(3).is_none());
    }

    #[test]
    fn wrong_shapes_and_bad_json_are_none() {
        assert!(Located::root(b"[1] x").is_none());
        assert!(Located::root(b"\xff").is_none());
        assert!(Located::root(b"").is_none());
        let obj = Located::root(b"{}").unwrap();
        assert!(obj.elements().is_none() && obj.members().unwrap().is_empty());
        assert!(Located::root(b"[]").unwrap().members().is_none());
    }

    #[test]
    fn integers_are_plain_integer_text_only() {
        for (text, n) in [("0", Some(0)), ("-12", Some(-12)), ("1130", Some(1130))] {
            assert_eq!(Located::root(text.as_bytes()).unwrap().as_i64(), n);
        }
        for text in ["1.0", "1e3", "\"5\"", "-", "99999999999999999999"] {
            let v = Located::root(text.as_bytes());
            assert_eq!(v.and_then(|v| v.as_i64()), None, "{text}");
        }
        assert!(is_integer_text("-0") && !is_integer_text("+1") && !is_integer_text(""));
    }
}

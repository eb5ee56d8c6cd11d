//! Text an adapter wrote (a rejection's `detail`, a trap's stderr), made safe for a log line.
//!
//! An adapter is untrusted: its text may be huge, carry control characters that forge log
//! lines, or echo the request in any encoding (a card number from the body, Meta's verify
//! token from the query, a signature as a list of byte values, a header value glued to another
//! word). Searching every encoding of every request value cannot be done in bounded time, so
//! the text reaches the log only as a vocabulary: it is cut to `MAX_ADAPTER_TEXT_BYTES`,
//! control characters become spaces, and of its words (runs of letters and digits) only those
//! made of letters alone, at most `MAX_WORD_CHARS` long, that appear nowhere in the request's
//! body, header values or query are kept; every other word is `[withheld]`. Numbers never
//! reach the log (a signature's bytes, a card, a token's digits), except `v0`..`v9`, the
//! version tags signature headers use. Punctuation between words is kept, so a diagnostic
//! still reads: `missing Stripe-Signature header`, `no [withheld] entry`.

use memchr::memmem;

/// The most of an adapter's text that reaches a log line.
pub const MAX_ADAPTER_TEXT_BYTES: usize = 200;
/// Longer letter runs are not diagnostics but data (a token, base64 without digits).
const MAX_WORD_CHARS: usize = 24;
/// Shorter words ("bad", "no", "v") are searched for nowhere: too common to hide anything.
const MIN_ECHO_BYTES: usize = 4;
const WITHHELD: &str = "[withheld]";

/// What an adapter's text may echo: the request as it arrived.
#[derive(Clone, Copy)]
pub struct Echoes<'a> {
    pub body: &'a [u8],
    pub headers: &'a http::HeaderMap,
    /// The raw query string, without `?`.
    pub query: &'a str,
}

/// Bounded, printable, and only words of the vocabulary (see the module's text).
pub fn adapter_text(text: &str, echoes: &Echoes<'_>) -> String {
    let bounded = printable(text, MAX_ADAPTER_TEXT_BYTES);
    let mut out = String::with_capacity(bounded.len());
    let mut rest = bounded.as_str();
    while !rest.is_empty() {
        let word_len = rest
            .find(|c: char| !c.is_alphanumeric())
            .unwrap_or(rest.len());
        let (word, tail) = rest.split_at(word_len);
        if !word.is_empty() {
            let kept = (is_word(word) || is_version_tag(word)) && !echoed(word, echoes);
            out.push_str(if kept { word } else { WITHHELD });
        }
        let sep_len = tail.chars().next().map_or(0, char::len_utf8);
        out.push_str(&tail[..sep_len]);
        rest = &tail[sep_len..];
    }
    out
}

/// Letters only, and not too long to be a word.
fn is_word(word: &str) -> bool {
    word.chars().count() <= MAX_WORD_CHARS && word.chars().all(char::is_alphabetic)
}

/// `v0` to `v9`: the scheme tags of `v1=`, `v0=` signature entries.
fn is_version_tag(word: &str) -> bool {
    matches!(word.as_bytes(), [b'v', d] if d.is_ascii_digit())
}

/// Whether the word appears in the request. Letter runs read the same raw, percent-encoded
/// and form-encoded, so one search of each part covers those encodings.
fn echoed(word: &str, echoes: &Echoes<'_>) -> bool {
    if word.len() < MIN_ECHO_BYTES {
        return false;
    }
    let finder = memmem::Finder::new(word.as_bytes());
    finder.find(echoes.body).is_some()
        || finder.find(echoes.query.as_bytes()).is_some()
        || echoes
            .headers
            .values()
            .any(|v| finder.find(v.as_bytes()).is_some())
}

/// At most `max` bytes (cut on a character boundary), control characters as spaces.
pub fn printable(text: &str, max: usize) -> String {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end]
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn echoes<'a>(body: &'a [u8], headers: &'a http::HeaderMap, query: &'a str) -> Echoes<'a> {
        Echoes {
            body,
            headers,
            query,
        }
    }

    #[test]
    fn echoes_of_the_body_and_headers_are_withheld() {
        let body = br#"{"card":"4242424242424242","cvc":"123","holder":"Quintessa"}"#;
        let mut headers = http::HeaderMap::new();
        headers.insert(
            "stripe-signature",
            http::HeaderValue::from_static(
                "t=1700000000,v1=5257a869e7ecebeda32affa62cdca3fa51cad7e77a0e56ff536d0ce8e108d8bd",
            ),
        );
        let text = adapter_text(
            "bad body {\"card\":\"4242424242424242\",\"holder\":\"Quintessa\"} and v1=5257a869e7ecebeda32affa62cdca3fa51cad7e77a0e56ff536d0ce8e108d8bd",
            &echoes(body, &headers, ""),
        );
        assert!(!text.contains("4242"), "{text}");
        assert!(!text.contains("5257a869"), "{text}");
        assert!(!text.contains("Quintessa"), "{text}");
        // Even the body's field names: a word of the request is the request's.
        assert_eq!(
            text,
            "bad body {\"[withheld]\":\"[withheld]\",\"[withheld]\":\"[withheld]\"} and v1=[withheld]"
        );
    }

    #[test]
    fn the_query_a_list_of_byte_values_and_a_glued_header_value_are_withheld() {
        let mut headers = http::HeaderMap::new();
        headers.insert(
            "x-token",
            http::HeaderValue::from_static("SecretHeaderValue"),
        );
        let query = "hub.mode=subscribe&hub.verify_token=MetaVerifyToken&hub.challenge=1158201444";
        let text = adapter_text(
            "query hub.verify_token=MetaVerifyToken, sig [82, 87, 168, 105] got Bearer.SecretHeaderValue",
            &echoes(b"{}", &headers, query),
        );
        for leaked in ["MetaVerifyToken", "82", "168", "SecretHeaderValue"] {
            assert!(!text.contains(leaked), "{leaked} in {text}");
        }
        assert_eq!(
            text,
            "query hub.[withheld]_[withheld]=[withheld], sig [[withheld], [withheld], \
             [withheld], [withheld]] got Bearer.[withheld]"
        );
    }

    #[test]
    fn diagnostics_are_kept_bounded_and_printable() {
        let none = http::HeaderMap::new();
        let text = adapter_text(
            "missing Stripe-Signature header\r\nforged: line",
            &echoes(b"{}", &none, ""),
        );
        assert_eq!(text, "missing Stripe-Signature header  forged: line");
        let long = "é".repeat(300);
        let text = adapter_text(&long, &echoes(b"", &none, ""));
        assert!(text.len() <= MAX_ADAPTER_TEXT_BYTES);
        assert_eq!(text, WITHHELD, "a 100-letter run is not a word");
        let text = adapter_text("déjà vu", &echoes(b"", &none, ""));
        assert_eq!(text, "déjà vu");
    }
}

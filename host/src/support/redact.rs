//! Text an adapter wrote (a rejection's `detail`, a trap's stderr), made safe for a log line.
//!
//! An adapter is untrusted: its text may be huge, carry control characters that forge log
//! lines, or echo the request (a card number from the body, a signature header). So the text
//! is cut to `MAX_ADAPTER_TEXT_BYTES`, control characters become spaces, and every word of it
//! that also appears in the request's body or header values is withheld.

use memchr::memmem;

/// The most of an adapter's text that reaches a log line.
pub const MAX_ADAPTER_TEXT_BYTES: usize = 200;
/// Shorter words ("missing", "v1", a header name) are diagnostics, not data worth hiding.
const MIN_ECHO_BYTES: usize = 8;
const WITHHELD: &str = "[withheld]";

/// Bounded, printable, and free of echoes of `body` and `header_values`.
pub fn adapter_text(text: &str, body: &[u8], headers: &http::HeaderMap) -> String {
    let bounded = printable(text, MAX_ADAPTER_TEXT_BYTES);
    let mut out = String::with_capacity(bounded.len());
    let mut rest = bounded.as_str();
    while !rest.is_empty() {
        let word_len = rest.find(is_separator).unwrap_or(rest.len());
        let (word, tail) = rest.split_at(word_len);
        let echoed = word.len() >= MIN_ECHO_BYTES
            && (memmem::find(body, word.as_bytes()).is_some()
                || headers
                    .values()
                    .any(|v| memmem::find(v.as_bytes(), word.as_bytes()).is_some()));
        out.push_str(if echoed { WITHHELD } else { word });
        let sep_len = tail.chars().next().map_or(0, char::len_utf8);
        out.push_str(&tail[..sep_len]);
        rest = &tail[sep_len..];
    }
    out
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

/// Where words split: white space and the punctuation that delimits values in JSON, forms and
/// signature headers (`t=…,v1=…`).
fn is_separator(c: char) -> bool {
    c.is_whitespace() || "\"'`,;:=&()[]{}<>".contains(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn echoes_of_the_body_and_headers_are_withheld() {
        let body = br#"{"card":"4242424242424242","cvc":"123"}"#;
        let mut headers = http::HeaderMap::new();
        headers.insert(
            "stripe-signature",
            http::HeaderValue::from_static(
                "t=1700000000,v1=5257a869e7ecebeda32affa62cdca3fa51cad7e77a0e56ff536d0ce8e108d8bd",
            ),
        );
        let text = adapter_text(
            "bad body {\"card\":\"4242424242424242\"} and v1=5257a869e7ecebeda32affa62cdca3fa51cad7e77a0e56ff536d0ce8e108d8bd",
            body,
            &headers,
        );
        assert!(!text.contains("4242424242424242"), "{text}");
        assert!(!text.contains("5257a869"), "{text}");
        assert!(
            text.starts_with("bad body {\"card\":\"[withheld]\"}"),
            "{text}"
        );
    }

    #[test]
    fn diagnostics_are_kept_bounded_and_printable() {
        let text = adapter_text(
            "missing Stripe-Signature header\r\nforged: line",
            b"{}",
            &http::HeaderMap::new(),
        );
        assert_eq!(text, "missing Stripe-Signature header  forged: line");
        let long = "é".repeat(300);
        let text = adapter_text(&long, b"", &http::HeaderMap::new());
        assert!(text.len() <= MAX_ADAPTER_TEXT_BYTES);
        assert!(text.chars().all(|c| c == 'é'));
    }
}

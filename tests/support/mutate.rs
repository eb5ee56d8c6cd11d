//! Requests changed one element at a time, to see each signed element matter. Header names
//! are matched ignoring ASCII case, as HTTP does.

/// Owned header pairs, in the order they are sent.
pub type Headers = Vec<(String, String)>;

/// Owned pairs from borrowed ones.
pub fn pairs(borrowed: &[(&str, &str)]) -> Headers {
    borrowed
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// `headers` with every `name` header's value replaced by `value`.
pub fn with(headers: &[(String, String)], name: &str, value: &str) -> Headers {
    headers
        .iter()
        .map(|(k, v)| {
            let v = if k.eq_ignore_ascii_case(name) {
                value
            } else {
                v
            };
            (k.clone(), v.to_owned())
        })
        .collect()
}

/// `headers` without any `name` header.
pub fn without(headers: &[(String, String)], name: &str) -> Headers {
    headers
        .iter()
        .filter(|(k, _)| !k.eq_ignore_ascii_case(name))
        .cloned()
        .collect()
}

/// `headers` with every `name` header sent a second time, at the end.
pub fn twice(headers: &[(String, String)], name: &str) -> Headers {
    let mut out = headers.to_vec();
    out.extend(
        headers
            .iter()
            .filter(|(k, _)| k.eq_ignore_ascii_case(name))
            .cloned(),
    );
    out
}

/// `headers` with `(name, value)` added at the end.
pub fn plus(headers: &[(String, String)], name: &str, value: &str) -> Headers {
    let mut out = headers.to_vec();
    out.push((name.to_owned(), value.to_owned()));
    out
}

/// The first `name` header's value.
pub fn header<'a>(headers: &'a [(String, String)], name: &str) -> &'a str {
    headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
        .unwrap_or_else(|| panic!("no {name} header"))
}

/// One character of `s` changed at `at`, keeping its length and alphabet.
pub fn flip_char(s: &str, at: usize) -> String {
    let mut bytes = s.as_bytes().to_vec();
    bytes[at] = if bytes[at] == b'a' { b'b' } else { b'a' };
    String::from_utf8(bytes).unwrap()
}

/// The last hex digit of `s` changed (`0` to `1`, anything else to `0`).
pub fn flip_last_hex(s: &str) -> String {
    let last = if s.ends_with('0') { '1' } else { '0' };
    format!("{}{last}", &s[..s.len() - 1])
}

/// `body` with the lowest bit of its middle byte flipped.
pub fn flip_body_byte(body: &str) -> Vec<u8> {
    flip_byte(body, body.len() / 2)
}

/// `body` with the lowest bit of byte `at` flipped.
pub fn flip_byte(body: &str, at: usize) -> Vec<u8> {
    let mut bytes = body.as_bytes().to_vec();
    bytes[at] ^= 0x01;
    bytes
}

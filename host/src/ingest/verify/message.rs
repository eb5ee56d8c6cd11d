//! Message assembly: a check's parts resolved against the request (literals, body slices,
//! JSON strings, sorted form parameters, the URL in either port form).

use std::borrow::Cow;

use sha2::Digest as _;

use super::contract::{ContractViolation, Inputs, MAX_FORM_PAIRS, slice};
use super::outcome::VerifyError;
use crate::adapter::Part;

/// One piece of a signed message, resolved: bytes (borrowed from the request where they can
/// be), or the URL, which has more than one form.
pub(super) enum Piece<'a> {
    Bytes(Cow<'a, [u8]>),
    Url,
}

/// A check's message, resolved against the request. `Ok(None)`: the request cannot match
/// (a missing or wrong body digest). A signed string that does not decode or a body that is
/// not a form is the request's fault; a slice that is not a JSON string token, the adapter's.
pub(super) fn resolve<'a>(
    i: usize,
    message: &'a [Part],
    body_sha256_param: Option<&str>,
    inputs: &Inputs<'a>,
) -> Result<Option<Vec<Piece<'a>>>, VerifyError> {
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
                Piece::Bytes(Cow::Owned(json_string(i, slice(i, inputs.body, s)?)?))
            }
            Part::SortedFormParams => match sorted_form_params(inputs.body) {
                Some(bytes) => Piece::Bytes(Cow::Owned(bytes)),
                None => return Err(VerifyError::NotAForm(i)),
            },
            Part::Url => Piece::Url,
        });
    }
    Ok(Some(pieces))
}

/// The string a JSON string token decodes to. A token that is not one JSON string is the
/// adapter's mistake; one that is, but whose escapes name no character (a lone surrogate,
/// which JSON's grammar allows), is the request's.
fn json_string(i: usize, token: &[u8]) -> Result<Vec<u8>, VerifyError> {
    let quoted = token.len() >= 2 && token.first() == Some(&b'"') && token.last() == Some(&b'"');
    if !quoted || serde_json::from_slice::<serde::de::IgnoredAny>(token).is_err() {
        return Err(ContractViolation::NotAJsonString(i).into());
    }
    serde_json::from_slice::<String>(token)
        .map(String::into_bytes)
        .map_err(|_| VerifyError::UndecodableString(i))
}

/// The decoded values of `name` in a query string.
fn query_values<'q>(query: &'q str, name: &'q str) -> impl Iterator<Item = String> + 'q {
    form_pairs(query.as_bytes(), usize::MAX)
        .into_iter()
        .flatten()
        .filter(move |(n, _)| n.as_ref() == name.as_bytes())
        .map(|(_, v)| String::from_utf8_lossy(&v).into_owned())
}

/// A form parameter's name and value, decoded.
type FormPair<'a> = (Cow<'a, [u8]>, Cow<'a, [u8]>);

/// `application/x-www-form-urlencoded` pairs, percent- and `+`-decoded (borrowed from `body`
/// where nothing needs decoding); `None` past `max_pairs`.
fn form_pairs(body: &[u8], max_pairs: usize) -> Option<Vec<FormPair<'_>>> {
    fn decode(s: &[u8]) -> Cow<'_, [u8]> {
        if !s.iter().any(|&b| b == b'+' || b == b'%') {
            return Cow::Borrowed(s);
        }
        let plus: Vec<u8> = s
            .iter()
            .map(|&b| if b == b'+' { b' ' } else { b })
            .collect();
        Cow::Owned(percent_encoding::percent_decode(&plus).collect())
    }
    let mut pairs = Vec::new();
    for pair in body.split(|&b| b == b'&').filter(|pair| !pair.is_empty()) {
        if pairs.len() == max_pairs {
            return None;
        }
        let (name, value) = match pair.iter().position(|&b| b == b'=') {
            Some(at) => (&pair[..at], &pair[at + 1..]),
            None => (pair, &b""[..]),
        };
        pairs.push((decode(name), decode(value)));
    }
    Some(pairs)
}

/// Twilio's form signature input: every distinct parameter (a name and value sent twice
/// counts once, as in Twilio's SDKs), sorted by name and then by value, each name immediately
/// followed by its value. `None` when the body is not UTF-8 or has over `MAX_FORM_PAIRS`
/// parameters.
fn sorted_form_params(body: &[u8]) -> Option<Vec<u8>> {
    std::str::from_utf8(body).ok()?;
    let mut pairs = form_pairs(body, MAX_FORM_PAIRS)?;
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
pub(super) fn url_forms(url: &str) -> Vec<Cow<'_, str>> {
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

/// The message as one buffer, with `url` where the URL goes (a public-key signature is over
/// the whole message).
pub(super) fn materialize(pieces: &[Piece<'_>], url: &str) -> Vec<u8> {
    let mut out = Vec::new();
    for piece in pieces {
        match piece {
            Piece::Bytes(bytes) => out.extend_from_slice(bytes),
            Piece::Url => out.extend_from_slice(url.as_bytes()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use hmac::{Hmac, Mac};

    use super::*;
    use crate::adapter::{Algorithm, Check};
    use crate::ingest::verify::test_kit::*;
    use crate::ingest::verify::{ContractViolation, VerifyError};

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
        // Past the pair cap the body is not a form, whatever it holds.
        let at_cap = vec!["a=1"; MAX_FORM_PAIRS].join("&");
        assert!(sorted_form_params(at_cap.as_bytes()).is_some());
        let over = format!("{at_cap}&b");
        assert!(sorted_form_params(over.as_bytes()).is_none());
        let set = secrets(&[("k", b"secret")]);
        let p = one(
            hmac_check(vec![Part::SortedFormParams], vec![vec![0; 32]]),
            None,
        );
        assert_eq!(
            run(HMAC, &set, &p, &inputs(over.as_bytes()), false).unwrap_err(),
            VerifyError::NotAForm(0)
        );
    }

    #[test]
    fn a_signed_json_string_that_does_not_decode_is_the_requests_fault() {
        let token = |s: &str| json_string(0, s.as_bytes());
        assert_eq!(token(r#""a\u00e9:b""#).unwrap(), "a\u{e9}:b".as_bytes());
        // A lone surrogate is JSON, but names no character.
        assert_eq!(token(r#""\ud800""#), Err(VerifyError::UndecodableString(0)));
        // Not one string token at all: the adapter pointed at the wrong bytes.
        for not_a_string in ["1", r#""a"#, r#""a","b""#, r#""\x""#, "\""] {
            assert_eq!(
                token(not_a_string),
                Err(ContractViolation::NotAJsonString(0).into()),
                "{not_a_string}"
            );
        }
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
}

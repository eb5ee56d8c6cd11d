//! What `describe`, `prepare` and `parse` return: constructors, so an adapter names only the
//! fields it sets (everything left out is empty: `None`, no event types), rejections, and
//! readers that reject with the kind their stage calls for.

use crate::bindings::wharf::adapter::types::{
    Algorithm, Answer, AnswerPart, Check, Description, Envelope, Handshake, ObjectVersion,
    Ordering, Parsed, Part, Prepared, PublicKeyEncoding, Rejection, RejectionKind, Request,
    SecretEncoding, Span, Tolerance,
};
use crate::decode::{
    Value, form_pairs, hex_decode, parse_unix_timestamp, prefix_before_body, str_at, utf8_nonempty,
};

impl Description {
    /// Checks of `algorithm` only, any event type, no body limit of its own, the secret's
    /// UTF-8 bytes as the key (`Raw`), no signed timestamp, no ordering, POST only, the host's
    /// JSON acknowledgement.
    pub fn new(name: impl Into<String>, version: impl Into<String>, algorithm: Algorithm) -> Self {
        Self {
            name: name.into(),
            version: version.into(),
            event_types: Vec::new(),
            max_body_bytes: None,
            algorithms: vec![algorithm],
            secret_encoding: SecretEncoding::Raw,
            public_key_encoding: None,
            tolerance: None,
            ordering: Ordering::None,
            serves_get: false,
            acknowledgement: None,
        }
    }

    /// Another algorithm this adapter's checks may name (Standard Webhooks: HMAC and Ed25519).
    pub fn also(mut self, algorithm: Algorithm) -> Self {
        self.algorithms.push(algorithm);
        self
    }

    /// How the endpoint's `public_key`s are written (needed for Ed25519 and ECDSA).
    pub fn public_key_encoding(self, encoding: PublicKeyEncoding) -> Self {
        Self {
            public_key_encoding: Some(encoding),
            ..self
        }
    }

    /// Lets GET requests reach the adapter, to be answered with a handshake only.
    pub fn serves_get(self) -> Self {
        Self {
            serves_get: true,
            ..self
        }
    }

    /// Exact bytes to answer an accepted or duplicate request with (Adyen: `[accepted]`).
    pub fn acknowledgement(self, content_type: &str, body: &[u8]) -> Self {
        let acknowledgement = Some(Answer {
            status: 200,
            content_type: content_type.into(),
            body: body.to_vec(),
        });
        Self {
            acknowledgement,
            ..self
        }
    }

    /// How the configured secret becomes key bytes, when not its UTF-8 bytes as written.
    pub fn secret_encoding(self, secret_encoding: SecretEncoding) -> Self {
        Self {
            secret_encoding,
            ..self
        }
    }

    /// How old (`past_secs`) and how far ahead (`future_secs`) a signed timestamp may be.
    pub fn tolerance(self, past_secs: u64, future_secs: u64) -> Self {
        let tolerance = Some(Tolerance {
            past_secs,
            future_secs,
        });
        Self { tolerance, ..self }
    }

    pub fn ordering(self, ordering: Ordering) -> Self {
        Self { ordering, ..self }
    }

    /// Globs (`*` matches any run of characters); without any, every type is accepted.
    pub fn event_types<S: Into<String>>(self, globs: impl IntoIterator<Item = S>) -> Self {
        let event_types = globs.into_iter().map(Into::into).collect();
        Self {
            event_types,
            ..self
        }
    }

    pub fn max_body_bytes(self, bytes: u64) -> Self {
        let max_body_bytes = Some(bytes);
        Self {
            max_body_bytes,
            ..self
        }
    }
}

/// One signature check under the endpoint's `secret`: the signed `message` and the candidate
/// signatures, decoded to bytes.
pub fn check(algorithm: Algorithm, message: Vec<Part>, signatures: Vec<Vec<u8>>) -> Check {
    Check {
        algorithm,
        key: None,
        message,
        signatures,
        body_sha256_param: None,
    }
}

/// A shared-token check: passes when one of `tokens` equals the secret (compared by the host).
pub fn token_check(tokens: Vec<Vec<u8>>) -> Check {
    check(Algorithm::Token, Vec::new(), tokens)
}

impl Check {
    /// Verified under the endpoint's `secrets.<name>` instead of its `secret`.
    pub fn key(self, name: &str) -> Self {
        Self {
            key: Some(name.into()),
            ..self
        }
    }

    /// The signed URL's query parameter `name` must be the hex SHA-256 of the body (Twilio).
    pub fn body_sha256_param(self, name: &str) -> Self {
        Self {
            body_sha256_param: Some(name.into()),
            ..self
        }
    }

    /// This check alone, with the signed timestamp (Unix seconds) the host checks freshness of.
    pub fn timestamped(self, unix: i64) -> Prepared {
        Prepared {
            checks: vec![self],
            timestamp: Some(unix),
        }
    }
}

/// This check alone, for a scheme that signs no timestamp.
impl From<Check> for Prepared {
    fn from(check: Check) -> Self {
        Self {
            checks: vec![check],
            timestamp: None,
        }
    }
}

/// An event with no object, version, creation time or route; add them with the methods.
pub fn event(event_id: impl Into<String>, event_type: impl Into<String>) -> Envelope {
    Envelope {
        event_id: event_id.into(),
        event_type: event_type.into(),
        object_id: None,
        object_version: None,
        created_at: None,
        route: None,
        span: None,
        signed_by: None,
    }
}

// Each takes an `Option` too, since most values come from a body that may lack them.
impl Envelope {
    pub fn object<'a>(self, object_id: impl Into<Option<&'a str>>) -> Self {
        let object_id = object_id.into().map(Into::into);
        Self { object_id, ..self }
    }

    pub fn version(self, object_version: impl Into<Option<ObjectVersion>>) -> Self {
        let object_version = object_version.into();
        Self {
            object_version,
            ..self
        }
    }

    /// When the provider created the event (Unix seconds).
    pub fn created_at(self, unix: impl Into<Option<i64>>) -> Self {
        let created_at = unix.into();
        Self { created_at, ..self }
    }

    pub fn route<'a>(self, route: impl Into<Option<&'a str>>) -> Self {
        let route = route.into().map(Into::into);
        Self { route, ..self }
    }

    /// This event is the slice `span` of a batch body: what is stored and delivered for it.
    pub fn span(self, span: Span) -> Self {
        Self {
            span: Some(span),
            ..self
        }
    }

    /// For a batch signed per item: the index of this event's check in `prepared.checks`.
    pub fn signed_by(self, check: usize) -> Self {
        Self {
            signed_by: Some(check as u32),
            ..self
        }
    }
}

/// Several events, accepted together or not at all.
impl From<Vec<Envelope>> for Parsed {
    fn from(events: Vec<Envelope>) -> Self {
        Self::Events(events)
    }
}

impl Handshake {
    /// A 200 answer of fixed bytes.
    pub fn literal(content_type: &str, body: impl Into<Vec<u8>>) -> Self {
        Self {
            status: 200,
            content_type: content_type.into(),
            body: vec![AnswerPart::Literal(body.into())],
        }
    }
}

impl From<Handshake> for Parsed {
    fn from(handshake: Handshake) -> Self {
        Self::Handshake(handshake)
    }
}

/// The bytes from `start` to `end` of the body.
pub fn span(start: usize, end: usize) -> Span {
    Span {
        start: start as u64,
        end: end as u64,
    }
}

/// One event.
impl From<Envelope> for Parsed {
    fn from(event: Envelope) -> Self {
        Self::Events(vec![event])
    }
}

fn rejection(kind: RejectionKind, detail: impl Into<String>) -> Rejection {
    Rejection {
        kind,
        detail: detail.into(),
    }
}

/// 401 `invalid_signature`: for anything wrong before verification.
pub fn invalid(detail: impl Into<String>) -> Rejection {
    rejection(RejectionKind::InvalidSignature, detail)
}

/// 400 `malformed`: a verified body whose envelope cannot be read.
pub fn malformed(detail: impl Into<String>) -> Rejection {
    rejection(RejectionKind::Malformed, detail)
}

/// 422 `unsupported_event_type` (or ignored, per endpoint).
pub fn unsupported(detail: impl Into<String>) -> Rejection {
    rejection(RejectionKind::UnsupportedEventType, detail)
}

/// The signed message `piece SEP piece SEP ... body`: literals, then the raw body by
/// reference (never copied back to the host).
pub fn pieces_then_body(pieces: &[&[u8]], sep: u8) -> Vec<Part> {
    vec![
        Part::Literal(prefix_before_body(pieces, sep)),
        Part::RawBody,
    ]
}

/// The `v0` scheme Slack and Zoom share: `<signature_header>: v0=<hex>`, the HMAC-SHA256 of
/// `v0:<timestamp>:<raw body>`, the timestamp in `<timestamp_header>`.
pub fn v0_hmac_sha256(
    req: &Request,
    signature_header_name: &str,
    timestamp_header: &str,
) -> Result<Prepared, Rejection> {
    let timestamp = signature_header(req, timestamp_header)?;
    let unix =
        parse_unix_timestamp(&timestamp).ok_or_else(|| invalid("timestamp is not an integer"))?;
    let header = signature_header(req, signature_header_name)?;
    let hex = header
        .strip_prefix(b"v0=")
        .ok_or_else(|| invalid("expected v0="))?;
    let signature = hex_decode(hex).ok_or_else(|| invalid("signature is not hex"))?;
    let message = pieces_then_body(&[b"v0", &timestamp], b':');
    Ok(check(Algorithm::HmacSha256, message, vec![signature]).timestamped(unix))
}

/// A header present exactly once and non-empty; missing, empty or repeated is 401.
pub fn signature_header(req: &Request, name: &str) -> Result<Vec<u8>, Rejection> {
    req.header(name)
        .filter(|v| !v.is_empty())
        .ok_or_else(|| invalid(format!("missing, empty or repeated {name}")))
}

/// The request's query parameters, decoded, in order; empty without a query string, `None`
/// when it is not a valid form.
pub fn query_pairs(req: &Request) -> Option<Vec<(String, String)>> {
    form_pairs(req.query().unwrap_or_default().as_bytes())
}

/// After verification, a header carrying part of the event (its id or type): present once
/// and non-empty UTF-8, else 400.
pub fn required_header(req: &Request, name: &str) -> Result<String, Rejection> {
    req.header(name)
        .and_then(utf8_nonempty)
        .ok_or_else(|| malformed(format!("missing or repeated {name}")))
}

/// The non-empty string at `path` of a verified body, else 400.
pub fn required_str<'a>(json: &'a Value, path: &[&str]) -> Result<&'a str, Rejection> {
    str_at(json, path)
        .filter(|v| !v.is_empty())
        .ok_or_else(|| malformed(format!("missing {}", path.join("."))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptions_default_to_empty() {
        let d = Description::new("acme", "0.1.0", Algorithm::HmacSha1);
        assert_eq!((d.name.as_str(), d.version.as_str()), ("acme", "0.1.0"));
        assert!(d.event_types.is_empty() && d.max_body_bytes.is_none() && d.tolerance.is_none());
        assert!(matches!(d.algorithms[..], [Algorithm::HmacSha1]));
        assert!(!d.serves_get && d.acknowledgement.is_none() && d.public_key_encoding.is_none());
        assert!(matches!(d.secret_encoding, SecretEncoding::Raw));
        assert!(matches!(d.ordering, Ordering::None));
        let d = d
            .secret_encoding(SecretEncoding::Hex)
            .tolerance(300, 60)
            .ordering(Ordering::Sequence)
            .event_types(["order.*"])
            .max_body_bytes(1024);
        let t = d.tolerance.unwrap();
        assert_eq!((t.past_secs, t.future_secs), (300, 60));
        assert!(matches!(d.secret_encoding, SecretEncoding::Hex));
        assert!(matches!(d.ordering, Ordering::Sequence));
        assert_eq!(
            (d.event_types, d.max_body_bytes),
            (vec!["order.*".into()], Some(1024))
        );
    }

    #[test]
    fn events_set_only_what_is_given() {
        let e = event("evt_1", "order.created");
        assert_eq!(
            (e.event_id.as_str(), e.event_type.as_str()),
            ("evt_1", "order.created")
        );
        assert!(e.object_id.is_none() && e.object_version.is_none());
        assert!(e.created_at.is_none() && e.route.is_none());
        let e = e
            .object("ord_1")
            .version(ObjectVersion::Sequence(7))
            .created_at(17)
            .route(None);
        assert_eq!(e.object_id.as_deref(), Some("ord_1"));
        assert!(matches!(e.object_version, Some(ObjectVersion::Sequence(7))));
        assert_eq!((e.created_at, e.route.as_deref()), (Some(17), None));
        let Parsed::Events(events) = Parsed::from(e.object(None)) else {
            panic!("one event")
        };
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].object_id, None);
    }

    #[test]
    fn checks_and_rejections() {
        let message = pieces_then_body(&[b"msg_1", b"17"], b'.');
        assert!(
            matches!(&message[..], [Part::Literal(l), Part::RawBody] if l == b"msg_1.17."),
            "{message:?}"
        );
        let prepared = check(Algorithm::HmacSha256, message, vec![vec![1]]).timestamped(17);
        assert_eq!((prepared.checks.len(), prepared.timestamp), (1, Some(17)));
        let prepared = Prepared::from(check(
            Algorithm::HmacSha1,
            vec![Part::RawBody],
            vec![vec![1]],
        ));
        assert_eq!(prepared.checks[0].signatures, [[1]]);
        assert_eq!(prepared.timestamp, None);

        let r = invalid("missing t");
        assert!(matches!(r.kind, RejectionKind::InvalidSignature));
        assert_eq!(r.detail, "missing t");
        assert!(matches!(malformed("x").kind, RejectionKind::Malformed));
        assert!(matches!(
            unsupported("x").kind,
            RejectionKind::UnsupportedEventType
        ));
    }

    #[test]
    fn required_strings() {
        let json = crate::parse_json(br#"{"id":"evt_1","empty":"","data":{"n":1}}"#).unwrap();
        assert_eq!(required_str(&json, &["id"]).unwrap(), "evt_1");
        for path in [&["empty"][..], &["data", "n"], &["data", "id"]] {
            let r = required_str(&json, path).unwrap_err();
            assert!(matches!(r.kind, RejectionKind::Malformed));
            assert_eq!(r.detail, format!("missing {}", path.join(".")));
        }
    }
}

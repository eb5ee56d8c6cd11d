//! What `describe`, `prepare` and `parse` return: constructors, so an adapter names only the
//! fields it sets (everything left out is empty: `None`, no event types).

use crate::decode::prefix_before_body;
use crate::{
    Algorithm, Answer, AnswerPart, Check, Description, Envelope, Handshake, ObjectVersion,
    Ordering, Parsed, Part, Prepared, PublicKeyEncoding, SecretEncoding, Span, Tolerance,
};

impl Description {
    /// Checks of `algorithm` only, any event type, no body limit of its own, the secret's
    /// UTF-8 bytes as the key (`Raw`), no signed timestamp, no ordering, POST only, the host's
    /// JSON acknowledgement; named and versioned by [`export!`](crate::export) after the
    /// adapter's package unless [`name`](Self::name) or [`version`](Self::version) says otherwise.
    pub fn new(algorithm: Algorithm) -> Self {
        Self {
            name: String::new(),
            version: String::new(),
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

    /// A name other than the package's: what endpoints refer to and the built file is called.
    pub fn name(self, name: impl Into<String>) -> Self {
        let name = name.into();
        Self { name, ..self }
    }

    /// A version other than the package's, logged with every request the adapter serves.
    pub fn version(self, version: impl Into<String>) -> Self {
        let version = version.into();
        Self { version, ..self }
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
    pub fn acknowledgement(self, answer: Answer) -> Self {
        let acknowledgement = Some(answer);
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

impl Answer {
    /// A 200 answer of fixed bytes.
    pub fn new(content_type: &str, body: impl Into<Vec<u8>>) -> Self {
        Self {
            status: 200,
            content_type: content_type.into(),
            body: body.into(),
        }
    }

    /// Another 2xx status.
    pub fn status(self, status: u16) -> Self {
        Self { status, ..self }
    }
}

impl Check {
    /// One check under the endpoint's `secret`: the signed `message` and the candidate
    /// signatures, decoded to bytes. The shorthands below name the algorithm for you.
    pub fn new(algorithm: Algorithm, message: Vec<Part>, signatures: Vec<Vec<u8>>) -> Self {
        Self {
            algorithm,
            key: None,
            message,
            signatures,
            body_sha256_param: None,
        }
    }

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
        Prepared::from(self).timestamped(unix)
    }
}

/// An HMAC-SHA256 check of `message` under the endpoint's secret.
pub fn hmac_sha256(message: Vec<Part>, signatures: Vec<Vec<u8>>) -> Check {
    Check::new(Algorithm::HmacSha256, message, signatures)
}

/// An HMAC-SHA1 check of `message` under the endpoint's secret.
pub fn hmac_sha1(message: Vec<Part>, signatures: Vec<Vec<u8>>) -> Check {
    Check::new(Algorithm::HmacSha1, message, signatures)
}

/// An HMAC-SHA512 check of `message` under the endpoint's secret.
pub fn hmac_sha512(message: Vec<Part>, signatures: Vec<Vec<u8>>) -> Check {
    Check::new(Algorithm::HmacSha512, message, signatures)
}

/// An Ed25519 check of `message` under the endpoint's public key.
pub fn ed25519(message: Vec<Part>, signatures: Vec<Vec<u8>>) -> Check {
    Check::new(Algorithm::Ed25519, message, signatures)
}

/// An ECDSA P-256 (SHA-256) check of `message` under the endpoint's public key.
pub fn ecdsa_p256_sha256(message: Vec<Part>, signatures: Vec<Vec<u8>>) -> Check {
    Check::new(Algorithm::EcdsaP256Sha256, message, signatures)
}

/// A shared-token check: passes when one of `tokens` equals the secret (compared by the host).
pub fn token_check(tokens: Vec<Vec<u8>>) -> Check {
    Check::new(Algorithm::Token, Vec::new(), tokens)
}

/// The signed message `piece SEP piece SEP ... body`: literals, then the raw body by
/// reference (never copied back to the host).
pub fn pieces_then_body(pieces: &[&[u8]], sep: u8) -> Vec<Part> {
    vec![
        Part::Literal(prefix_before_body(pieces, sep)),
        Part::RawBody,
    ]
}

impl Prepared {
    /// Checks that must all pass where they apply, for a scheme that signs no timestamp.
    pub fn new(checks: Vec<Check>) -> Self {
        Self {
            checks,
            timestamp: None,
        }
    }

    /// With the signed timestamp (Unix seconds) the host checks freshness of.
    pub fn timestamped(self, unix: i64) -> Self {
        Self {
            timestamp: Some(unix),
            ..self
        }
    }
}

/// This check alone, for a scheme that signs no timestamp.
impl From<Check> for Prepared {
    fn from(check: Check) -> Self {
        Self::new(vec![check])
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

    /// When the provider created the event (Unix seconds), which also orders the events of
    /// its object (`ObjectVersion::CreatedAt`, for `Ordering::CreatedAt`).
    pub fn created(self, unix: impl Into<Option<i64>>) -> Self {
        let unix = unix.into();
        self.version(unix.map(ObjectVersion::CreatedAt))
            .created_at(unix)
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

/// One event.
impl From<Envelope> for Parsed {
    fn from(event: Envelope) -> Self {
        Self::Events(vec![event])
    }
}

/// Several events, accepted together or not at all.
impl From<Vec<Envelope>> for Parsed {
    fn from(events: Vec<Envelope>) -> Self {
        Self::Events(events)
    }
}

impl Handshake {
    /// A 200 answer of these parts (fixed bytes, or a MAC the host computes).
    pub fn new(content_type: &str, body: Vec<AnswerPart>) -> Self {
        Self {
            status: 200,
            content_type: content_type.into(),
            body,
        }
    }

    /// A 200 answer of fixed bytes.
    pub fn literal(content_type: &str, body: impl Into<Vec<u8>>) -> Self {
        Self::new(content_type, vec![AnswerPart::Literal(body.into())])
    }

    /// Another 2xx status.
    pub fn status(self, status: u16) -> Self {
        Self { status, ..self }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptions_default_to_empty() {
        let d = Description::new(Algorithm::HmacSha1);
        assert_eq!((d.name.as_str(), d.version.as_str()), ("", ""));
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
            .max_body_bytes(1024)
            .acknowledgement(Answer::new("text/plain", "").status(202));
        let t = d.tolerance.unwrap();
        assert_eq!((t.past_secs, t.future_secs), (300, 60));
        assert!(matches!(d.secret_encoding, SecretEncoding::Hex));
        assert!(matches!(d.ordering, Ordering::Sequence));
        assert_eq!(
            (d.event_types, d.max_body_bytes),
            (vec!["order.*".into()], Some(1024))
        );
        let ack = d.acknowledgement.unwrap();
        assert_eq!((ack.status, ack.content_type.as_str()), (202, "text/plain"));
        assert!(ack.body.is_empty());
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
        let e = event("evt_1", "x").created(17);
        assert!(matches!(
            e.object_version,
            Some(ObjectVersion::CreatedAt(17))
        ));
        assert_eq!(e.created_at, Some(17));
        let e = event("evt_1", "x").created(None);
        assert!(e.object_version.is_none() && e.created_at.is_none());
    }

    #[test]
    fn checks_carry_their_algorithm() {
        let message = pieces_then_body(&[b"msg_1", b"17"], b'.');
        assert!(
            matches!(&message[..], [Part::Literal(l), Part::RawBody] if l == b"msg_1.17."),
            "{message:?}"
        );
        let prepared = hmac_sha256(message, vec![vec![1]]).timestamped(17);
        assert_eq!((prepared.checks.len(), prepared.timestamp), (1, Some(17)));
        assert!(matches!(
            prepared.checks[0].algorithm,
            Algorithm::HmacSha256
        ));
        let prepared = Prepared::from(hmac_sha1(vec![Part::RawBody], vec![vec![1]]));
        assert_eq!(prepared.checks[0].signatures, [[1]]);
        assert_eq!(prepared.timestamp, None);
        for (check, algorithm) in [
            (hmac_sha512(vec![], vec![]), Algorithm::HmacSha512),
            (ed25519(vec![], vec![]), Algorithm::Ed25519),
            (
                ecdsa_p256_sha256(vec![], vec![]),
                Algorithm::EcdsaP256Sha256,
            ),
            (token_check(vec![]), Algorithm::Token),
        ] {
            assert_eq!(check.algorithm, algorithm);
            assert!(check.key.is_none() && check.body_sha256_param.is_none());
        }
        let prepared = Prepared::new(vec![token_check(vec![]).key("verify-token")]);
        assert_eq!(prepared.checks[0].key.as_deref(), Some("verify-token"));
        assert_eq!(prepared.timestamped(5).timestamp, Some(5));
    }

    #[test]
    fn handshakes() {
        let h = Handshake::literal("application/json", "{}");
        assert_eq!(
            (h.status, h.content_type.as_str()),
            (200, "application/json")
        );
        assert!(matches!(&h.body[..], [AnswerPart::Literal(b)] if b == b"{}"));
        let h = Handshake::new("text/plain", Vec::new()).status(204);
        assert!(h.status == 204 && h.body.is_empty());
        assert!(matches!(Parsed::from(h), Parsed::Handshake(_)));
    }
}

//! `wharf:adapter@0.1.0` (`wit/0.1/adapter.wit`), served unchanged beside 0.2: its results are
//! converted into 0.2's types here, so nothing above knows which version a component targets.
//! Every 0.1 result has a 0.2 equivalent: a check verified with the adapter's one algorithm
//! under the endpoint's `secret`, an event that is the whole body, a handshake of fixed bytes.

use super::request::{GuestState, RequestView};
use super::v0_2;

mod generated {
    wasmtime::component::bindgen!({
        path: "../wit/0.1/adapter.wit",
        world: "adapter",
        imports: { default: trappable },
        exports: { default: async },
        with: { "wharf:adapter/types.request": crate::adapter::bindings::request::RequestView },
    });
}

use generated::wharf::adapter::types as v1;
pub use generated::{Adapter, AdapterPre};

impl v1::Host for GuestState {}

impl v1::HostRequest for GuestState {
    super::request::shared_request_methods!();
}

impl From<v1::Algorithm> for v0_2::Algorithm {
    fn from(a: v1::Algorithm) -> Self {
        match a {
            v1::Algorithm::HmacSha256 => Self::HmacSha256,
            v1::Algorithm::HmacSha1 => Self::HmacSha1,
            v1::Algorithm::HmacSha512 => Self::HmacSha512,
            v1::Algorithm::Ed25519 => Self::Ed25519,
            v1::Algorithm::EcdsaP256Sha256 => Self::EcdsaP256Sha256,
        }
    }
}

impl From<v1::Description> for v0_2::Description {
    fn from(d: v1::Description) -> Self {
        Self {
            name: d.name,
            version: d.version,
            event_types: d.event_types,
            max_body_bytes: d.max_body_bytes,
            algorithms: vec![d.algorithm.into()],
            secret_encoding: match d.secret_encoding {
                v1::SecretEncoding::Raw => v0_2::SecretEncoding::Raw,
                v1::SecretEncoding::WhsecBase64 => v0_2::SecretEncoding::WhsecBase64,
                v1::SecretEncoding::Base64 => v0_2::SecretEncoding::Base64,
                v1::SecretEncoding::Hex => v0_2::SecretEncoding::Hex,
            },
            public_key_encoding: None,
            tolerance: d.tolerance.map(|t| v0_2::Tolerance {
                past_secs: t.past_secs,
                future_secs: t.future_secs,
            }),
            ordering: match d.ordering {
                v1::Ordering::Sequence => v0_2::Ordering::Sequence,
                v1::Ordering::CreatedAt => v0_2::Ordering::CreatedAt,
                v1::Ordering::None => v0_2::Ordering::None,
            },
            serves_get: false,
            acknowledgement: None,
        }
    }
}

/// 0.1 checks are all of the adapter's one algorithm, under the endpoint's `secret`.
pub fn upgrade_prepared(p: v1::Prepared, algorithm: v0_2::Algorithm) -> v0_2::Prepared {
    v0_2::Prepared {
        checks: p
            .checks
            .into_iter()
            .map(|c| v0_2::Check {
                algorithm,
                key: None,
                message: c
                    .message
                    .into_iter()
                    .map(|part| match part {
                        v1::Part::Literal(bytes) => v0_2::Part::Literal(bytes),
                        v1::Part::RawBody => v0_2::Part::RawBody,
                    })
                    .collect(),
                signatures: c.signatures,
                body_sha256_param: None,
            })
            .collect(),
        timestamp: p.timestamp,
    }
}

impl From<v1::Parsed> for v0_2::Parsed {
    fn from(p: v1::Parsed) -> Self {
        match p {
            v1::Parsed::Events(events) => Self::Events(
                events
                    .into_iter()
                    .map(|e| v0_2::Envelope {
                        event_id: e.event_id,
                        event_type: e.event_type,
                        object_id: e.object_id,
                        object_version: e.object_version.map(|v| match v {
                            v1::ObjectVersion::Sequence(n) => v0_2::ObjectVersion::Sequence(n),
                            v1::ObjectVersion::CreatedAt(t) => v0_2::ObjectVersion::CreatedAt(t),
                        }),
                        created_at: e.created_at,
                        route: e.route,
                        span: None,
                        signed_by: None,
                    })
                    .collect(),
            ),
            v1::Parsed::Handshake(h) => Self::Handshake(v0_2::Handshake {
                status: h.status,
                content_type: h.content_type,
                body: vec![v0_2::AnswerPart::Literal(h.body)],
            }),
        }
    }
}

impl From<v1::Rejection> for v0_2::Rejection {
    fn from(r: v1::Rejection) -> Self {
        Self {
            kind: match r.kind {
                v1::RejectionKind::InvalidSignature => v0_2::RejectionKind::InvalidSignature,
                v1::RejectionKind::Malformed => v0_2::RejectionKind::Malformed,
                v1::RejectionKind::UnsupportedEventType => {
                    v0_2::RejectionKind::UnsupportedEventType
                }
            },
            detail: r.detail,
        }
    }
}

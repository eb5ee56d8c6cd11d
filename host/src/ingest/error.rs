//! The ingest boundary's one error type, with its status, public code and internal cause: the
//! HTTP layer answers with them and the fixture runner compares them.

use http::StatusCode;

use super::rate_limit::Limited;
use super::rows::StoreError;
use super::secrets::SecretsError;
use super::verify::{self, VerifyError};
use crate::adapter::AdapterFailure;

/// Every way a request can fail, each with one answer: its status and code, and
/// the cause kept for the log.
#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    #[error("no endpoint with this id")]
    UnknownEndpoint,
    /// The endpoint's or its provider's token bucket is empty; nothing of the request was
    /// read past its head and no adapter ran.
    #[error("rate limit reached: retry after {} s", .0.retry_after_secs())]
    RateLimited(Limited),
    #[error("too many or too large headers")]
    HeadersTooLarge,
    #[error("unsupported content type")]
    UnsupportedMediaType,
    #[error("body larger than {0} bytes")]
    PayloadTooLarge(u64),
    #[error("request body ended early")]
    IncompleteBody,
    #[error("signature verification failed")]
    InvalidSignature(String),
    #[error("signed timestamp outside the tolerance")]
    StaleTimestamp(VerifyError),
    /// The request asks for more work than verifying any request may cost: public-key checks
    /// past their budget, or a `prepare` that ran out of CPU on a body no ordinary request
    /// needs that long for (`REQUEST_SIZED_BODY_BYTES`). The request's doing, not the adapter's.
    #[error("verifying this request would cost more than allowed")]
    TooCostly(String),
    #[error("the verified body could not be parsed")]
    Malformed(String),
    #[error("event type not supported by this endpoint")]
    UnsupportedEventType(String),
    #[error("storage unavailable")]
    StorageUnavailable(#[from] StoreError),
    #[error("secrets unavailable")]
    SecretsUnavailable(#[from] SecretsError),
    #[error("adapter unavailable")]
    AdapterUnavailable(String),
    /// The adapter's `prepare` asked for something the host refuses to call verification
    /// (a check that skips the body, an unsigned timestamp, unbounded work): its fault, 503.
    #[error("adapter broke the verification contract")]
    AdapterContract(verify::ContractViolation),
    /// The body budget cannot hold this request's body now, and no slower upload could give
    /// way to it: refused from its head, or cut when a part of its body did not fit.
    #[error("too many request bodies in flight")]
    Overloaded,
    /// This upload was among the slowest when the body budget was full, past its grace period,
    /// and gave way to a new request (answered as `Overloaded`: the client should retry).
    #[error("too many request bodies in flight")]
    GaveWay,
    /// More requests are in flight than could be answered within the answer budget; this one
    /// is refused before the adapter runs (its body was read, the connection stays usable).
    #[error("more requests than can be answered in time")]
    AtCapacity,
    /// Every connection slot is serving a request: this connection was answered at once
    /// rather than left unserved in the kernel's backlog, and is closed.
    #[error("more connections than the receiver serves at once")]
    AtConnectionCap,
    /// The body did not arrive within the body deadline; nothing was stored.
    #[error("request body not received in time")]
    BodyTimeout,
    /// After its grace period the body arrived below `[server] body_min_bytes_per_second`.
    #[error("request body not received in time")]
    TooSlow,
}

impl IngestError {
    /// Status and public code (DESIGN.md section 6), for answers, log lines, metrics and
    /// fixtures alike.
    pub fn status_and_code(&self) -> (StatusCode, &'static str) {
        match self {
            IngestError::UnknownEndpoint => (StatusCode::NOT_FOUND, "unknown_endpoint"),
            IngestError::RateLimited(_) => (StatusCode::TOO_MANY_REQUESTS, "rate_limited"),
            IngestError::HeadersTooLarge => (
                StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
                "headers_too_large",
            ),
            IngestError::UnsupportedMediaType => {
                (StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type")
            }
            IngestError::PayloadTooLarge(_) => (StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large"),
            IngestError::IncompleteBody | IngestError::Malformed(_) => {
                (StatusCode::BAD_REQUEST, "malformed")
            }
            IngestError::InvalidSignature(_) => (StatusCode::UNAUTHORIZED, "invalid_signature"),
            IngestError::StaleTimestamp(_) => (StatusCode::UNAUTHORIZED, "stale_timestamp"),
            IngestError::TooCostly(_) => (StatusCode::UNAUTHORIZED, "verification_too_costly"),
            IngestError::UnsupportedEventType(_) => {
                (StatusCode::UNPROCESSABLE_ENTITY, "unsupported_event_type")
            }
            IngestError::StorageUnavailable(_) => {
                (StatusCode::SERVICE_UNAVAILABLE, "storage_unavailable")
            }
            IngestError::SecretsUnavailable(_) => {
                (StatusCode::SERVICE_UNAVAILABLE, "secrets_unavailable")
            }
            IngestError::AdapterUnavailable(_) | IngestError::AdapterContract(_) => {
                (StatusCode::SERVICE_UNAVAILABLE, "adapter_unavailable")
            }
            IngestError::Overloaded
            | IngestError::GaveWay
            | IngestError::AtCapacity
            | IngestError::AtConnectionCap => (StatusCode::SERVICE_UNAVAILABLE, "overloaded"),
            IngestError::BodyTimeout | IngestError::TooSlow => {
                (StatusCode::REQUEST_TIMEOUT, "body_timeout")
            }
        }
    }

    /// The cause kept for the log and never sent: it may name files, adapters or database
    /// state.
    pub fn internal_cause(&self) -> Option<String> {
        match self {
            IngestError::InvalidSignature(d)
            | IngestError::TooCostly(d)
            | IngestError::Malformed(d)
            | IngestError::UnsupportedEventType(d) => Some(d.clone()),
            IngestError::AdapterUnavailable(d) => Some(d.clone()),
            IngestError::AdapterContract(v) => {
                Some(format!("adapter broke the verification contract: {v}"))
            }
            IngestError::StaleTimestamp(e) => Some(e.to_string()),
            IngestError::StorageUnavailable(e) => Some(e.to_string()),
            IngestError::SecretsUnavailable(e) => Some(e.to_string()),
            IngestError::RateLimited(l) => Some(format!("{} rate limit", l.scope.as_str())),
            IngestError::GaveWay => Some("slowest upload when the body budget was full".into()),
            IngestError::TooSlow => Some("body below the minimum rate".into()),
            _ => None,
        }
    }
}

impl From<AdapterFailure> for IngestError {
    fn from(e: AdapterFailure) -> Self {
        IngestError::AdapterUnavailable(e.to_string())
    }
}

/// A body at least this long may be what made `prepare` run out of CPU: the default 100 ms
/// deadline is about 1.5 us a byte of it, a hundred times what parsing JSON costs a guest.
/// Below it, no ordinary request needs the deadline, so running out is the adapter's fault.
pub const REQUEST_SIZED_BODY_BYTES: usize = 64 << 10;

impl IngestError {
    /// `prepare` failed in the sandbox. A CPU deadline on a large body is the request's doing
    /// (a batch of 60,000 items): 401 `verification_too_costly`, so that a stranger cannot make
    /// a healthy adapter look broken. Anything else (a trap, a deadline on a small body, a
    /// wall-clock overrun, an oversized result) is the adapter's: 503.
    pub fn from_prepare_failure(e: AdapterFailure, body_len: usize) -> Self {
        match e {
            AdapterFailure::Timeout if body_len >= REQUEST_SIZED_BODY_BYTES => {
                IngestError::TooCostly(format!(
                    "prepare exceeded the adapter's CPU deadline on a {body_len}-byte body"
                ))
            }
            e => e.into(),
        }
    }
}

/// Verification's answers: the adapter's contract breaches 503, a signed string that does not
/// decode 400, the work budgets 401 `verification_too_costly`, everything else 401
/// `invalid_signature` (its cause kept for the log).
impl From<VerifyError> for IngestError {
    fn from(e: VerifyError) -> Self {
        match e {
            VerifyError::Contract(v) => IngestError::AdapterContract(v),
            VerifyError::UndecodableString(_) => IngestError::Malformed(e.to_string()),
            VerifyError::PublicKeyBudget(_) | VerifyError::PublicKeyBytes { .. } => {
                IngestError::TooCostly(e.to_string())
            }
            VerifyError::TooOld(_) | VerifyError::TooNew(_) => IngestError::StaleTimestamp(e),
            e => IngestError::InvalidSignature(e.to_string()),
        }
    }
}

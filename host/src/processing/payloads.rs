//! Stored payloads as processing, deliveries and operators read them: opened (decrypted under
//! the key id stored beside them) and cut to the event's own span of a batch's body.

use uuid::Uuid;

use crate::support::sealing::{OpenError, PayloadKeys};

/// Why an event's bytes cannot be had.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum PayloadError {
    #[error("payload no longer stored (past retention)")]
    Gone,
    #[error("event span lies outside the stored payload")]
    OutsideSpan,
    #[error(transparent)]
    Open(#[from] OpenError),
}

impl PayloadError {
    /// Only a key missing on this host can be cured by waiting (the rotation reaching it);
    /// everything else is the same on every retry.
    pub fn is_transient(&self) -> bool {
        matches!(self, PayloadError::Open(OpenError::UnknownKey(_)))
    }
}

/// A row of `webhook_payloads` as read: `key_id` `None` is a body stored before encryption.
pub struct StoredPayload {
    pub payload_ref: Uuid,
    pub key_id: Option<String>,
    pub body: Vec<u8>,
}

impl StoredPayload {
    pub fn open(&self, keys: &PayloadKeys) -> Result<Vec<u8>, PayloadError> {
        Ok(keys.open(self.payload_ref, self.key_id.as_deref(), &self.body)?)
    }
}

/// The event's byte range of its body (`payload_start`, `payload_end`), or all of it.
pub fn event_span(body: &[u8], span: Option<(i64, i64)>) -> Result<&[u8], PayloadError> {
    let Some((start, end)) = span else {
        return Ok(body);
    };
    usize::try_from(start)
        .ok()
        .zip(usize::try_from(end).ok())
        .and_then(|(start, end)| body.get(start..end))
        .ok_or(PayloadError::OutsideSpan)
}

/// The event's bytes from its stored row (`None`: the row is gone).
pub fn event_bytes(
    keys: &PayloadKeys,
    stored: Option<&StoredPayload>,
    span: Option<(i64, i64)>,
) -> Result<Vec<u8>, PayloadError> {
    let body = stored.ok_or(PayloadError::Gone)?.open(keys)?;
    match span {
        None => Ok(body),
        Some(_) => event_span(&body, span).map(<[u8]>::to_vec),
    }
}

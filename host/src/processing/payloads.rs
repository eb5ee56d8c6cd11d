//! Stored payloads as processing, deliveries and operators read them: opened (decrypted under
//! the key id stored beside them) and cut to the event's own span of a batch's body.

use std::collections::HashMap;

use sqlx::PgPool;
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

/// Whole stored bodies by payload ref, each read once however many events it holds and
/// opened under its key id.
pub struct Bodies(HashMap<Uuid, Result<Vec<u8>, PayloadError>>);

impl Bodies {
    /// The stored payloads under these refs; no statement for none.
    pub async fn read(
        pool: &PgPool,
        keys: &PayloadKeys,
        refs: &[Uuid],
    ) -> Result<Self, sqlx::Error> {
        if refs.is_empty() {
            return Ok(Self(HashMap::new()));
        }
        let rows = sqlx::query_as::<_, (Uuid, Option<String>, Vec<u8>)>(
            "SELECT payload_ref, key_id, body FROM webhook_payloads WHERE payload_ref = ANY($1)",
        )
        .bind(refs)
        .fetch_all(pool)
        .await?;
        Ok(Self(
            rows.into_iter()
                .map(|(payload_ref, key_id, body)| {
                    let stored = StoredPayload {
                        payload_ref,
                        key_id,
                        body,
                    };
                    (payload_ref, stored.open(keys))
                })
                .collect(),
        ))
    }

    /// An event's own bytes: its span of the request's payload, or the whole payload when it
    /// has none. Either failure is poison: retrying cannot bring a body back or lengthen it.
    pub fn event(
        &self,
        payload_ref: Uuid,
        span: Option<(i64, i64)>,
    ) -> Result<&[u8], PayloadError> {
        let body = self
            .0
            .get(&payload_ref)
            .ok_or(PayloadError::Gone)?
            .as_ref()
            .map_err(Clone::clone)?;
        event_span(body, span)
    }
}

//! Stored payloads as processing, deliveries and operators read them: the event's link to its
//! payload checked (`support::payload_link`), the body opened (decrypted under the key id
//! stored beside it) and cut to the event's own span of a batch's body.

use std::collections::HashMap;

use sqlx::PgPool;
use sqlx::Row as _;
use sqlx::postgres::PgRow;
use uuid::Uuid;

use sha2::{Digest, Sha256};

use crate::ingest::Claim;
use crate::support::payload_link::{Link, LinkTag};
use crate::support::sealing::{OpenError, PayloadKeys};

/// The inbox columns an event's link is read from (`LinkRow::read`), in this order, for a
/// statement whose inbox alias is `i`.
pub const LINK_COLUMNS: &str = "i.inbox_id, i.provider, i.endpoint_id, i.provider_event_id, \
     i.event_type, i.raw_payload_ref, i.payload_start, i.payload_end, i.payload_hash, \
     i.payload_link_key, i.payload_link";

/// An inbox row's link to its payload, as read: what it says, and the tag stored with it.
#[derive(Debug, Clone)]
pub struct LinkRow {
    pub inbox_id: Uuid,
    pub provider: String,
    pub endpoint_id: String,
    pub event_id: String,
    pub event_type: String,
    pub payload_ref: Uuid,
    pub span: Option<(i64, i64)>,
    pub payload_hash: Vec<u8>,
    /// `None`: a row from before links (or with its tag removed).
    pub tag: Option<LinkTag>,
}

impl LinkRow {
    /// The [`LINK_COLUMNS`] of `row`, the first at index `at`.
    pub fn read(row: &PgRow, at: usize) -> Result<Self, sqlx::Error> {
        let key_id: Option<String> = row.try_get(at + 9)?;
        let tag: Option<Vec<u8>> = row.try_get(at + 10)?;
        Ok(Self {
            inbox_id: row.try_get(at)?,
            provider: row.try_get(at + 1)?,
            endpoint_id: row.try_get(at + 2)?,
            event_id: row.try_get(at + 3)?,
            event_type: row.try_get(at + 4)?,
            payload_ref: row.try_get(at + 5)?,
            // Both or neither (a CHECK on the table).
            span: row
                .try_get::<Option<i64>, _>(at + 6)?
                .zip(row.try_get::<Option<i64>, _>(at + 7)?),
            payload_hash: row.try_get(at + 8)?,
            tag: key_id.zip(tag).map(|(key_id, tag)| LinkTag { key_id, tag }),
        })
    }

    pub fn link(&self) -> Link<'_> {
        Link {
            inbox_id: self.inbox_id,
            provider: &self.provider,
            endpoint_id: &self.endpoint_id,
            event_id: &self.event_id,
            event_type: &self.event_type,
            payload_ref: self.payload_ref,
            span: self.span,
            payload_hash: &self.payload_hash,
        }
    }
}

/// A claimed event's link, as its claim holds it.
pub fn claim_link(claim: &Claim) -> Link<'_> {
    Link {
        inbox_id: claim.inbox_id,
        provider: &claim.provider,
        endpoint_id: &claim.endpoint_id,
        event_id: &claim.event_id,
        event_type: &claim.event_type,
        payload_ref: claim.payload_ref,
        span: claim.payload_span,
        payload_hash: &claim.payload_hash,
    }
}

/// Why an event's bytes cannot be had.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum PayloadError {
    #[error("payload no longer stored (past retention)")]
    Gone,
    #[error("event span lies outside the stored payload")]
    OutsideSpan,
    /// The body opened, but is not the one the event's (authenticated) hash names: a body
    /// put in its row by hand (unsealed, or sealed by a re-encryption of one).
    #[error("the stored payload does not match the event's payload_hash")]
    HashMismatch,
    #[error(transparent)]
    Open(#[from] OpenError),
}

impl PayloadError {
    /// Only a key missing on this host can be cured by waiting (the rotation reaching it);
    /// everything else is the same on every retry (a legacy row refused included: turning
    /// the upgrade setting on and `wharf events replay` reads it).
    pub fn is_transient(&self) -> bool {
        matches!(self, PayloadError::Open(OpenError::UnknownKey(_)))
    }
}

/// A row of `webhook_payloads` as read: `key_id` `None` is a body stored before encryption
/// (or written by hand), opened only with the upgrade setting.
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

/// The event's bytes from its stored row (`None`: the row is gone), once the event's link to
/// that row checks: never another event's body, or a body no one received.
pub fn event_bytes(
    keys: &PayloadKeys,
    link: &LinkRow,
    stored: Option<&StoredPayload>,
) -> Result<Vec<u8>, PayloadError> {
    keys.check_link(&link.link(), link.tag.as_ref())?;
    let stored = stored.ok_or(PayloadError::Gone)?;
    if stored.payload_ref != link.payload_ref {
        return Err(PayloadError::Gone);
    }
    let body = stored.open(keys)?;
    if Sha256::digest(&body)[..] != link.payload_hash[..] {
        return Err(PayloadError::HashMismatch);
    }
    match link.span {
        None => Ok(body),
        Some(_) => event_span(&body, link.span).map(<[u8]>::to_vec),
    }
}

/// An opened body and its SHA-256.
type Opened = (Vec<u8>, [u8; 32]);

/// Whole stored bodies by payload ref, each read once however many events it holds, opened
/// under its key id, with its SHA-256.
pub struct Bodies(HashMap<Uuid, Result<Opened, PayloadError>>);

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
                    let opened = stored.open(keys).map(|body| {
                        let digest = Sha256::digest(&body).into();
                        (body, digest)
                    });
                    (payload_ref, opened)
                })
                .collect(),
        ))
    }

    /// A claimed event's own bytes, once its link checks: its span of the request's payload,
    /// or the whole payload when it has none. A body gone or too short is poison: retrying
    /// cannot bring it back or lengthen it.
    pub fn event(&self, keys: &PayloadKeys, claim: &Claim) -> Result<&[u8], PayloadError> {
        keys.check_link(&claim_link(claim), claim.payload_link.as_ref())?;
        let (payload_ref, span) = (claim.payload_ref, claim.payload_span);
        let (body, digest) = self
            .0
            .get(&payload_ref)
            .ok_or(PayloadError::Gone)?
            .as_ref()
            .map_err(Clone::clone)?;
        if digest[..] != claim.payload_hash[..] {
            return Err(PayloadError::HashMismatch);
        }
        event_span(body, span)
    }
}

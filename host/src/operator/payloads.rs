//! Operator actions on stored payloads behind `wharf payloads`: re-encryption under the
//! current payload key after a rotation, in bounded batches, then the inbox rows' links
//! carried over to it (`support::payload_link`), so the old key can be retired.
//!
//! Rows are visited once, in primary key order (`payload_ref`, then `inbox_id`), so each batch
//! is one short index range and the whole pass is linear however large the table is; it can
//! run beside serving, be interrupted and be started again. A row is rewritten only if it
//! still holds what was read (same key id, same tag), so nothing written meanwhile is
//! overwritten.
//!
//! A link is carried over only if it verifies under its old key: a forged or changed row is
//! refused, never tagged anew. Rows from before encryption (no key id) or before links (no
//! tag) are sealed and linked as they stand only with `[payloads] upgrade_legacy_rows`;
//! without it they are refused and listed.

use serde::Serialize;
use sqlx::PgPool;
use uuid::Uuid;

use super::error::OperatorError;
use crate::processing::{LINK_COLUMNS, LinkRow, StoredPayload};
use crate::support::columns::column;
use crate::support::sealing::PayloadKeys;

/// Ids listed in a report, at most (the counts are whole).
const LISTED: usize = 1000;

/// What a re-encryption pass did.
#[derive(Debug, Default, Clone, Serialize, PartialEq, Eq)]
pub struct Resealed {
    /// Rows found under another key (or none, stored before encryption).
    pub found: u64,
    /// Rows now sealed under the current key.
    pub resealed: u64,
    /// Rows that did not open (key missing here, corrupted, or unsealed without the upgrade
    /// setting); left as they were.
    pub unreadable: Vec<Uuid>,
    /// Inbox rows whose link is under another key (or absent, from before links).
    pub links_found: u64,
    /// Inbox rows now linked under the current key.
    pub relinked: u64,
    /// Inbox rows whose link did not verify (or is absent, without the upgrade setting), the
    /// first `LISTED` of them; left as they were, and refused on every read.
    pub refused_links: Vec<Uuid>,
    pub refused_links_total: u64,
}

/// Seals every payload not under the current key with it, then links every inbox row not
/// linked under it, `batch` rows per statement, calling `progress` after each batch.
pub async fn reencrypt(
    pool: &PgPool,
    keys: &PayloadKeys,
    batch: i64,
    mut progress: impl FnMut(&Resealed),
) -> Result<Resealed, OperatorError> {
    let mut done = Resealed::default();
    reseal(pool, keys, batch, &mut done, &mut progress).await?;
    relink(pool, keys, batch, &mut done, &mut progress).await?;
    Ok(done)
}

async fn reseal(
    pool: &PgPool,
    keys: &PayloadKeys,
    batch: i64,
    done: &mut Resealed,
    progress: &mut impl FnMut(&Resealed),
) -> Result<(), OperatorError> {
    let current = keys.current_id();
    let mut after = Uuid::nil();
    loop {
        let rows: Vec<(Uuid, Option<String>, Vec<u8>)> = sqlx::query_as(
            "SELECT payload_ref, key_id, body FROM webhook_payloads
             WHERE payload_ref > $1 AND key_id IS DISTINCT FROM $2
             ORDER BY payload_ref LIMIT $3",
        )
        .bind(after)
        .bind(current)
        .bind(batch)
        .fetch_all(pool)
        .await?;
        let Some(last) = rows.last() else {
            return Ok(());
        };
        after = last.0;
        done.found += rows.len() as u64;
        let mut sealed = Vec::with_capacity(rows.len());
        for (payload_ref, key_id, body) in rows {
            let stored = StoredPayload {
                payload_ref,
                key_id,
                body,
            };
            match stored.open(keys) {
                Ok(plain) => {
                    sealed.push((payload_ref, stored.key_id, keys.seal(payload_ref, &plain)))
                }
                Err(_) => done.unreadable.push(payload_ref),
            }
        }
        let updated = sqlx::query(
            "UPDATE webhook_payloads p SET key_id = n.key_id, body = n.body
             FROM unnest($1::uuid[], $2::text[], $3::text[], $4::bytea[])
                 AS n(payload_ref, old_key_id, key_id, body)
             WHERE p.payload_ref = n.payload_ref AND p.key_id IS NOT DISTINCT FROM n.old_key_id",
        )
        .bind(column(&sealed, |s| s.0))
        .bind(column(&sealed, |s| s.1.as_deref()))
        .bind(column(&sealed, |s| s.2.key_id.as_str()))
        .bind(column(&sealed, |s| s.2.bytes.as_slice()))
        .execute(pool)
        .await?;
        done.resealed += updated.rows_affected();
        progress(done);
    }
}

async fn relink(
    pool: &PgPool,
    keys: &PayloadKeys,
    batch: i64,
    done: &mut Resealed,
    progress: &mut impl FnMut(&Resealed),
) -> Result<(), OperatorError> {
    let current = keys.current_id();
    let mut after = Uuid::nil();
    loop {
        let rows = sqlx::query(&format!(
            "SELECT {LINK_COLUMNS} FROM webhook_inbox i
             WHERE i.inbox_id > $1 AND i.payload_link_key IS DISTINCT FROM $2
             ORDER BY i.inbox_id LIMIT $3"
        ))
        .bind(after)
        .bind(current)
        .bind(batch)
        .fetch_all(pool)
        .await?;
        let rows = rows
            .iter()
            .map(|r| LinkRow::read(r, 0))
            .collect::<Result<Vec<_>, _>>()?;
        let Some(last) = rows.last() else {
            return Ok(());
        };
        after = last.inbox_id;
        done.links_found += rows.len() as u64;
        let mut linked = Vec::with_capacity(rows.len());
        for row in &rows {
            match keys.check_link(&row.link(), row.tag.as_ref()) {
                Ok(()) => linked.push((row, keys.link_tag(&row.link()))),
                Err(_) => {
                    done.refused_links_total += 1;
                    if done.refused_links.len() < LISTED {
                        done.refused_links.push(row.inbox_id);
                    }
                }
            }
        }
        let updated = sqlx::query(
            "UPDATE webhook_inbox i SET payload_link_key = n.key_id, payload_link = n.tag
             FROM unnest($1::uuid[], $2::bytea[], $3::text[], $4::bytea[])
                 AS n(inbox_id, old_tag, key_id, tag)
             WHERE i.inbox_id = ANY ($1) AND i.inbox_id = n.inbox_id
               AND i.payload_link IS NOT DISTINCT FROM n.old_tag",
        )
        .bind(column(&linked, |l| l.0.inbox_id))
        .bind(column(&linked, |l| {
            l.0.tag.as_ref().map(|t| t.tag.as_slice())
        }))
        .bind(column(&linked, |l| l.1.key_id.as_str()))
        .bind(column(&linked, |l| l.1.tag.as_slice()))
        .execute(pool)
        .await?;
        done.relinked += updated.rows_affected();
        progress(done);
    }
}

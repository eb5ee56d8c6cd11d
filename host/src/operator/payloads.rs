//! Operator actions on stored payloads behind `wharf payloads`: re-encryption under the
//! current payload key after a rotation, in bounded batches.
//!
//! Rows are visited once, in `payload_ref` order (the primary key), so each batch is one short
//! index range and the whole pass is linear however large the table is; it can run beside
//! serving, be interrupted and be started again. A row is rewritten only if it still holds
//! what was read (same key id), so nothing written meanwhile is overwritten.

use serde::Serialize;
use sqlx::PgPool;
use uuid::Uuid;

use super::error::OperatorError;
use crate::processing::StoredPayload;
use crate::support::columns::column;
use crate::support::sealing::PayloadKeys;

/// What a re-encryption pass did.
#[derive(Debug, Default, Clone, Serialize, PartialEq, Eq)]
pub struct Resealed {
    /// Rows found under another key (or none, stored before encryption).
    pub found: u64,
    /// Rows now sealed under the current key.
    pub resealed: u64,
    /// Rows that did not open (key missing here, or corrupted); left as they were.
    pub unreadable: Vec<Uuid>,
}

/// Seals every payload not under the current key with it, `batch` rows per statement, and
/// calls `progress` after each batch.
pub async fn reencrypt(
    pool: &PgPool,
    keys: &PayloadKeys,
    batch: i64,
    mut progress: impl FnMut(&Resealed),
) -> Result<Resealed, OperatorError> {
    let current = keys.current_id();
    let mut done = Resealed::default();
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
            return Ok(done);
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
        progress(&done);
    }
}

//! Recording delivery attempts: each result on its row (only while the claim is still the
//! relay's), the HTTP status it answered, and a history row for every attempt that did not
//! succeed, all in one statement per batch. A delivery sent at its first attempt adds no
//! history row: the steady state writes what it wrote before.

use std::time::Duration;

use sqlx::PgPool;
use uuid::Uuid;

use crate::ingest::redact_db;
use crate::support::columns::column;

/// The result of one attempt, to record if the claim is still ours.
pub struct Mark {
    pub delivery_id: Uuid,
    /// With the id, it names the row's partition.
    pub inbox_id: Uuid,
    pub claim_id: Uuid,
    /// The attempt's number (the row's `attempt_count` once claimed).
    pub attempt: i32,
    pub status: &'static str,
    /// The HTTP answer's status, when there was one.
    pub status_code: Option<i16>,
    pub error: Option<String>,
    pub delay: Duration,
}

/// Records attempts' results, each only if its claim is still ours, in one statement.
pub async fn record(pool: &PgPool, marks: &[Mark]) {
    if marks.is_empty() {
        return;
    }
    // `delivery_id = ANY($1)` lets the plan probe the marked rows by key; joined to the list
    // alone, a generic plan could hash-join it to a scan of the partition. The history rows
    // come from the rows actually updated, so a stale claim records nothing.
    let result = sqlx::query(
        "WITH marked AS (
             UPDATE deliveries AS d
             SET status = m.status, last_error = m.error, claim_id = NULL,
                 last_status_code = m.code,
                 sent_at = CASE WHEN m.status = 'SENT' THEN now() END,
                 next_attempt_at = now() + make_interval(secs => m.delay)
             FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::text[], $5::float8[],
                         $6::uuid[], $7::int2[], $8::int4[])
                  AS m(delivery_id, claim_id, status, error, delay, inbox_id, code, attempt)
             WHERE d.delivery_id = ANY ($1) AND d.delivery_id = m.delivery_id
               AND d.inbox_id = m.inbox_id AND d.claim_id = m.claim_id
               AND d.status = 'PENDING'
             RETURNING d.inbox_id, d.delivery_id, m.attempt, m.status, m.code, m.error)
         INSERT INTO delivery_attempts
             (inbox_id, delivery_id, attempt, outcome, status_code, diagnostic)
         SELECT inbox_id, delivery_id, attempt,
                CASE status WHEN 'FAILED' THEN 'failed' ELSE 'retry' END, code, error
         FROM marked WHERE status <> 'SENT'",
    )
    .bind(column(marks, |m| m.delivery_id))
    .bind(column(marks, |m| m.claim_id))
    .bind(column(marks, |m| m.status))
    .bind(column(marks, |m| m.error.as_deref()))
    .bind(column(marks, |m| m.delay.as_secs_f64()))
    .bind(column(marks, |m| m.inbox_id))
    .bind(column(marks, |m| m.status_code))
    .bind(column(marks, |m| m.attempt))
    .execute(pool)
    .await;
    if let Err(e) = result {
        // The claims expire and the deliveries are attempted again.
        tracing::warn!(deliveries = marks.len(), error = %redact_db(&e),
            "recording delivery attempts failed");
    }
}
